"""JSON-RPC 2.0 envelope: strict decoding of one message and compact encoding of replies.

Pure: bytes in, values out. Errors carry the request id when it could be read safely.
"""

from __future__ import annotations

import json
import re
from typing import Any, NamedTuple, NoReturn

from notes_server.errors import InvalidParams, InvalidRequest, McpError, ParseError
from notes_server.jsontext import dump_bytes
from notes_server.values import (
    MAX_DEPTH,
    has_surrogate,
    nests_deeper_than,
    surrogate_problem,
)

RequestId = str | int
_ALLOWED_KEYS = frozenset({"jsonrpc", "id", "method", "params"})
_TOO_DEEP = f"Invalid Request: message nests deeper than {MAX_DEPTH} levels"
# A lone surrogate can only arrive as a `\uD800`-style escape (strict UTF-8 refuses the raw
# form), so a message without one of these needs no walk.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


# Messages, and the per-request records built from them, are NamedTuples rather than frozen
# dataclasses: as immutable, cheaper to build per request, and no methods compiled at start.
class Request(NamedTuple):
    id: RequestId
    method: str
    params: dict[str, Any]


class Notification(NamedTuple):
    method: str
    params: dict[str, Any]


class DecodeFailure(Exception):
    """A message that cannot be dispatched; `request_id` is None when it is unknown."""

    def __init__(self, error: McpError, request_id: RequestId | None) -> None:
        super().__init__(error.message)
        self.error = error
        self.request_id = request_id


class _DuplicateKey(ValueError):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        raise _DuplicateKey
    return result


def _reject_constant(name: str) -> Any:
    raise ValueError(f"invalid JSON constant {name}")


# Built once: `json.loads` with options builds a decoder (and its scanner) on every call.
_DECODER = json.JSONDecoder(object_pairs_hook=_no_duplicates, parse_constant=_reject_constant)


def parse_json(raw: bytes | str) -> Any:
    """Strict JSON: UTF-8 only, no NaN/Infinity, no duplicate object keys, at most MAX_DEPTH
    levels of nesting (deeper values would exhaust the stack of whatever walks them later)."""
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
    except UnicodeDecodeError:
        raise DecodeFailure(ParseError("Parse error: message is not valid UTF-8"), None) from None
    try:
        value = _DECODER.decode(text)
    except _DuplicateKey:
        raise DecodeFailure(InvalidRequest("Invalid Request: duplicate object key"), None) from None
    except RecursionError:
        raise DecodeFailure(InvalidRequest(_TOO_DEEP), None) from None
    except ValueError:
        raise DecodeFailure(ParseError("Parse error: invalid JSON"), None) from None
    if text.count("{") + text.count("[") > MAX_DEPTH and nests_deeper_than(value):
        raise DecodeFailure(InvalidRequest(_TOO_DEEP), request_id_of(value))
    return value


def _valid_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def request_id_of(message: Any) -> RequestId | None:
    """The id of a parsed message when it has a valid one (to answer even a refused request)."""
    if isinstance(message, dict) and _valid_id(message.get("id")):
        request_id: RequestId = message["id"]
        return request_id
    return None


def decode(raw: bytes | str) -> Request | Notification:
    """Decode one message into a Request or Notification, or raise DecodeFailure."""
    message = parse_json(raw)
    if isinstance(message, list):
        raise DecodeFailure(InvalidRequest("Invalid Request: batch arrays are not supported"), None)
    if not isinstance(message, dict):
        raise DecodeFailure(InvalidRequest("Invalid Request: expected a JSON object"), None)
    has_id = "id" in message
    if has_id and not _valid_id(message["id"]):
        raise DecodeFailure(
            InvalidRequest("Invalid Request: id must be a string or an integer"), None
        )
    request_id: RequestId | None = message["id"] if has_id else None
    if message.get("jsonrpc") != "2.0":
        raise DecodeFailure(InvalidRequest('Invalid Request: jsonrpc must be "2.0"'), request_id)
    if not message.keys() <= _ALLOWED_KEYS:
        raise DecodeFailure(
            InvalidRequest("Invalid Request: unexpected members in a request"), request_id
        )
    method = message.get("method")
    if not isinstance(method, str) or not method:
        raise DecodeFailure(InvalidRequest("Invalid Request: method must be a string"), request_id)
    params = message.get("params", {})
    if not isinstance(params, dict):
        raise DecodeFailure(InvalidParams("Invalid params: params must be an object"), request_id)
    if request_id is None:
        return Notification(method, params)
    if _may_hold_surrogate(raw):
        _refuse_surrogates(method, params, request_id)
    return Request(request_id, method, params)


def _may_hold_surrogate(raw: bytes | str) -> bool:
    if isinstance(raw, str):
        return has_surrogate(raw) or "\\u" in raw
    return _SURROGATE_ESCAPE.search(raw) is not None


def _refuse_surrogates(method: str, params: dict[str, Any], request_id: RequestId) -> None:
    """A lone surrogate has no UTF-8 form: the store and the encoder would both fail on it."""
    if has_surrogate(method):
        raise DecodeFailure(
            InvalidRequest("Invalid Request: method contains an unpaired surrogate"), request_id
        )
    problem = surrogate_problem(params, "")
    if problem is not None:
        raise DecodeFailure(InvalidParams(f"Invalid params: {problem}"), request_id)


class EncodedResult(dict[str, Any]):
    """A result that is the same for every request (`tools/list`, `server/discover`), encoded
    once: `encode_result` splices these bytes instead of serializing the mapping again. It is
    read-only, so the bytes cannot go stale; copy it to change it."""

    __slots__ = ("encoded",)

    def __init__(self, body: dict[str, Any]) -> None:
        super().__init__(body)
        self.encoded = dump_bytes(body)

    def __reduce__(self) -> tuple[type[dict[str, Any]], tuple[dict[str, Any]]]:
        return dict, (dict(self),)  # copy/deepcopy/pickle give a plain, mutable dict

    def _read_only(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError("an EncodedResult is read-only; copy it to change it")

    __setitem__ = __delitem__ = setdefault = update = pop = popitem = clear = __ior__ = _read_only


def encode_result(request_id: RequestId, result: dict[str, Any]) -> bytes:
    if isinstance(result, EncodedResult):
        # Byte for byte what the general branch produces, without re-serializing the body.
        return (
            b'{"jsonrpc":"2.0","id":'
            + dump_bytes(request_id)
            + b',"result":'
            + result.encoded
            + b"}"
        )
    return dump_bytes({"jsonrpc": "2.0", "id": request_id, "result": result})


def encode_error(request_id: RequestId | None, error: dict[str, Any]) -> bytes:
    return dump_bytes({"jsonrpc": "2.0", "id": request_id, "error": error})
