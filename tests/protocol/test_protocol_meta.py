"""The per-request `_meta` ladder: shape first (-32602), then version support (-32022)."""

from __future__ import annotations

from typing import Any

import pytest

from notes_server.errors import (
    INVALID_PARAMS,
    UNSUPPORTED_VERSION,
    InvalidParams,
    UnsupportedVersion,
)
from notes_server.protocol.meta import ClientMeta, allows_form_elicitation, read_meta

VERSION = "io.modelcontextprotocol/protocolVersion"
CAPS = "io.modelcontextprotocol/clientCapabilities"
INFO = "io.modelcontextprotocol/clientInfo"


def params_with(meta: Any) -> dict[str, Any]:
    return {"_meta": meta}


def test_a_complete_meta_yields_version_capabilities_and_client_info() -> None:
    meta = read_meta(
        params_with(
            {
                VERSION: "2026-07-28",
                CAPS: {"elicitation": {}},
                INFO: {"name": "c", "version": "1"},
            }
        )
    )

    assert meta == ClientMeta("2026-07-28", {"elicitation": {}}, {"name": "c", "version": "1"})


def test_client_info_is_optional() -> None:
    meta = read_meta(params_with({VERSION: "2026-07-28", CAPS: {}}))

    assert meta.client_info is None


def test_client_info_that_is_not_an_object_is_invalid_params() -> None:
    with pytest.raises(InvalidParams):
        read_meta(params_with({VERSION: "2026-07-28", CAPS: {}, INFO: "me"}))


def test_missing_meta_is_invalid_params() -> None:
    with pytest.raises(InvalidParams) as info:
        read_meta({})

    assert info.value.code == INVALID_PARAMS


@pytest.mark.parametrize("meta", [None, "x", [], 1])
def test_meta_that_is_not_an_object_is_invalid_params(meta: Any) -> None:
    with pytest.raises(InvalidParams):
        read_meta(params_with(meta))


@pytest.mark.parametrize("version", ["<missing>", None, 20260728, ["2026-07-28"], {}])
def test_a_missing_or_non_string_version_is_invalid_params(version: Any) -> None:
    meta: dict[str, Any] = {CAPS: {}}
    if version != "<missing>":
        meta[VERSION] = version

    with pytest.raises(InvalidParams) as info:
        read_meta(params_with(meta))

    assert VERSION in info.value.message


@pytest.mark.parametrize("caps", ["<missing>", None, [], "all", True])
def test_missing_or_non_object_capabilities_are_invalid_params(caps: Any) -> None:
    meta: dict[str, Any] = {VERSION: "2026-07-28"}
    if caps != "<missing>":
        meta[CAPS] = caps

    with pytest.raises(InvalidParams) as info:
        read_meta(params_with(meta))

    assert CAPS in info.value.message


@pytest.mark.parametrize("caps", ["<missing>", "not-an-object"])
def test_shape_is_checked_before_version_support(caps: Any) -> None:
    meta: dict[str, Any] = {VERSION: "1900-01-01"}
    if caps != "<missing>":
        meta[CAPS] = caps

    with pytest.raises(InvalidParams) as info:
        read_meta(params_with(meta))

    assert info.value.code == INVALID_PARAMS


@pytest.mark.parametrize("requested", ["1900-01-01", "2025-11-25", "", "2026-07-28 "])
def test_an_unsupported_version_is_refused_with_supported_and_the_exact_requested_value(
    requested: str,
) -> None:
    with pytest.raises(UnsupportedVersion) as info:
        read_meta(params_with({VERSION: requested, CAPS: {}}))

    assert info.value.code == UNSUPPORTED_VERSION
    assert info.value.data == {"supported": ["2026-07-28"], "requested": requested}


@pytest.mark.parametrize(
    ("capabilities", "expected"),
    [
        ({}, False),
        ({"sampling": {}}, False),
        ({"elicitation": {}}, True),
        ({"elicitation": {"form": {}}}, True),
        ({"elicitation": {"form": {}, "url": {}}}, True),
        ({"elicitation": {"url": {}}}, False),
        ({"elicitation": {"form": True}}, False),
        ({"elicitation": "yes"}, False),
        ({"elicitation": None}, False),
        ({"elicitation": []}, False),
    ],
)
def test_form_elicitation_is_allowed_only_when_declared(
    capabilities: dict[str, Any], expected: bool
) -> None:
    assert allows_form_elicitation(capabilities) is expected
