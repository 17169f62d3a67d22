"""The pages' stylesheet keeps its WCAG 2.2 AA promise in both schemes: every text colour on the
background it is drawn on reaches 4.5:1, and the focus ring 3:1 against what it surrounds. The
colours are read from the stylesheet itself, so a change to a palette is checked here."""

from __future__ import annotations

import re

import pytest

from notes_server.features.page_style import STYLESHEET

_VARS = re.compile(r"--([a-z-]+):(#[0-9a-f]{3,6})")
# (foreground, background, minimum): where the stylesheet draws one on the other.
TEXT = [
    ("fg", "bg"),  # body text, text inputs
    ("fg", "card"),  # the page's card, secondary buttons
    ("muted", "card"),  # .muted
    ("accent-fg", "accent"),  # the primary button
    ("card", "danger"),  # the danger button
    ("danger", "card"),  # [role=alert]
]
RING = [("accent", "card"), ("accent", "bg")]  # :focus-visible outline, non-text: 3:1


def palettes() -> dict[str, dict[str, str]]:
    light, _, dark = STYLESHEET.partition("@media (prefers-color-scheme:dark)")
    dark = dark.split("}}", 1)[0]
    return {"light": dict(_VARS.findall(light)), "dark": dict(_VARS.findall(dark))}


def luminance(colour: str) -> float:
    digits = colour.lstrip("#")
    if len(digits) == 3:
        digits = "".join(d * 2 for d in digits)
    channels = [int(digits[i : i + 2], 16) / 255 for i in (0, 2, 4)]
    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(a: str, b: str) -> float:
    high, low = sorted((luminance(a), luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def test_contrast_of_known_colours_matches_the_wcag_formula() -> None:
    assert contrast("#000", "#fff") == pytest.approx(21.0)
    assert contrast("#777", "#fff") == pytest.approx(4.48, abs=0.01)


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_every_text_colour_reaches_4_5_to_1_on_its_background(scheme: str) -> None:
    colours = palettes()[scheme]
    assert set(colours) >= {name for pair in TEXT + RING for name in pair}
    low = {
        f"{fg} on {bg}": round(contrast(colours[fg], colours[bg]), 2)
        for fg, bg in TEXT
        if contrast(colours[fg], colours[bg]) < 4.5
    }
    assert low == {}


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_focus_ring_reaches_3_to_1_against_what_it_surrounds(scheme: str) -> None:
    colours = palettes()[scheme]
    for ring, around in RING:
        assert contrast(colours[ring], colours[around]) >= 3.0, (scheme, ring, around)
