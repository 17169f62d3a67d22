"""Folding (case and diacritics) as the word index compares words: ASCII text takes a shorter
way that must give exactly what the Unicode fold gives."""

from __future__ import annotations

import unicodedata

from hypothesis import given
from hypothesis import strategies as st

from notes_server.store.search_terms import fold


def _unicode_fold(text: str) -> str:
    decomposed = unicodedata.normalize("NFD", text.casefold())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


@given(st.text(alphabet=st.characters(max_codepoint=127)))
def test_ascii_text_folds_as_the_unicode_fold_does(text: str) -> None:
    assert fold(text) == _unicode_fold(text)


@given(st.text())
def test_any_text_folds_as_the_unicode_fold_does(text: str) -> None:
    assert fold(text) == _unicode_fold(text)


def test_case_and_diacritics_fold_away() -> None:
    assert fold("Café MÜNCHEN Straße") == "cafe munchen strasse"
    assert fold("Budget Q3") == "budget q3"
