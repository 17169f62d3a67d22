"""The per-request `_meta` ladder (2026-07-28): shape first, then version. Pure."""

from __future__ import annotations

from typing import Any, NamedTuple

from notes_server.capabilities import allows_form_elicitation
from notes_server.errors import InvalidParams, UnsupportedVersion
from notes_server.protocol.versions import (
    META_CAPABILITIES,
    META_CLIENT_INFO,
    META_VERSION,
    MODERN_VERSIONS,
)

__all__ = [
    "ClientMeta",
    "allows_form_elicitation",
    "check_version",
    "names_version",
    "read_meta",
    "read_meta_shape",
]


class ClientMeta(NamedTuple):  # a NamedTuple, like the other per-request records
    protocol_version: str
    capabilities: dict[str, Any]
    client_info: dict[str, Any] | None


def names_version(params: dict[str, Any]) -> bool:
    """A message is modern (2026-07-28 and later) when its `_meta` names a protocol version,
    valid or not: the one rule by which 2025-era traffic is told apart, on every transport."""
    meta = params.get("_meta")
    return isinstance(meta, dict) and META_VERSION in meta


def read_meta(params: dict[str, Any]) -> ClientMeta:
    """Validate `params._meta` in the documented order; raise the matching wire error."""
    return check_version(read_meta_shape(params))


def read_meta_shape(params: dict[str, Any]) -> ClientMeta:
    """Rung one alone (-32602). HTTP compares its headers with the body between the two rungs,
    so a header/body version disagreement is -32020 and never -32022."""
    meta = params.get("_meta")
    if not isinstance(meta, dict):
        raise InvalidParams("Invalid params: params._meta must be an object")
    version = meta.get(META_VERSION)
    if not isinstance(version, str):
        raise InvalidParams(f"Invalid params: _meta[{META_VERSION!r}] must be a string")
    capabilities = meta.get(META_CAPABILITIES)
    if not isinstance(capabilities, dict):
        raise InvalidParams(f"Invalid params: _meta[{META_CAPABILITIES!r}] must be an object")
    client_info = meta.get(META_CLIENT_INFO)
    if client_info is not None and not isinstance(client_info, dict):
        raise InvalidParams(f"Invalid params: _meta[{META_CLIENT_INFO!r}] must be an object")
    return ClientMeta(version, capabilities, client_info)


def check_version(meta: ClientMeta) -> ClientMeta:
    """Rung two (-32022): the version is one this server speaks in `_meta`."""
    if meta.protocol_version not in MODERN_VERSIONS:
        raise UnsupportedVersion(
            "Unsupported protocol version",
            {"supported": list(MODERN_VERSIONS), "requested": meta.protocol_version},
        )
    return meta
