"""JSON-RPC 2.0 envelope: strict decoding of one message and compact encoding of replies.

Pure: bytes in, values out. Errors carry the request id when it could be read safely: a
message nested too deep is refused with its top-level `id` whenever that can be read (-32602
when the depth is inside `params`, -32600 elsewhere), even when the nesting is too deep for the
parser itself (`_top_level_members`, only on that refusal path); only a frame whose own top
level cannot be read is answered with `id: null`.
"""

from __future__ import annotations

import json
import re
from typing import Any, NamedTuple, NoReturn

import orjson

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
_PARAMS_TOO_DEEP = f"Invalid params: params nest deeper than {MAX_DEPTH} levels"
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
    levels of nesting (deeper values would exhaust the stack of whatever walks them later).

    A message that is exactly orjson's compact encoding of what orjson reads from it (what
    most clients send) is that value, read in C; that equality leaves no room for a duplicate
    key (the re-encoded object would have lost a member), a number read inexactly (orjson
    reads integers beyond 64 bits as floats, which re-encode otherwise) or anything orjson
    refuses. Every other message, and every refusal, is the stdlib decoder's verdict."""
    if isinstance(raw, bytes) and raw.count(b"{") + raw.count(b"[") <= MAX_DEPTH:
        try:
            value = orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass
        else:
            if orjson.dumps(value) == raw:
                return value
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
    except UnicodeDecodeError:
        raise DecodeFailure(ParseError("Parse error: message is not valid UTF-8"), None) from None
    try:
        value = _DECODER.decode(text)
    except _DuplicateKey:
        raise DecodeFailure(InvalidRequest("Invalid Request: duplicate object key"), None) from None
    except RecursionError:
        members = _top_level_members(text)
        raise _too_deep(members, members is not None and members.get("params") is _DEEP) from None
    except ValueError:
        raise DecodeFailure(ParseError("Parse error: invalid JSON"), None) from None
    if text.count("{") + text.count("[") > MAX_DEPTH and nests_deeper_than(value):
        members = value if isinstance(value, dict) else None
        in_params = members is not None and nests_deeper_than(members.get("params"), MAX_DEPTH - 1)
        raise _too_deep(members, in_params)
    return value


def _too_deep(members: dict[str, Any] | None, in_params: bool) -> DecodeFailure:
    """The refusal of a message nested too deep, with its id when the top level was read."""
    request_id = request_id_of(members)
    if in_params:
        return DecodeFailure(InvalidParams(_PARAMS_TOO_DEEP), request_id)
    return DecodeFailure(InvalidRequest(_TOO_DEEP), request_id)


# Stands for the member whose value nests too deep for the parser (`_top_level_members`).
_DEEP: Any = object()
_SPACE = re.compile(r"[ \t\n\r]*")
_STRING = r'"(?:[^"\\\x00-\x1f]|\\.)*"'
_NUMBER = r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?"
_TAIL_SCALAR = re.compile(f"(?:{_NUMBER}|true|false|null|{_STRING})[ \t\n\r]*\\Z")
_TAIL_KEY = re.compile(f"({_STRING})[ \t\n\r]*:[ \t\n\r]*\\Z")
# How far back a scalar member at the end of a too-deep message is looked for (an id, a
# method name: short values).
_TAIL_WINDOW = 4096


def _skip_space(text: str, index: int) -> int:
    match = _SPACE.match(text, index)
    return index if match is None else match.end()


def _space_before(text: str, end: int) -> int:
    """The index where the whitespace that ends at `end` starts."""
    while end > 0 and text[end - 1] in " \t\n\r":
        end -= 1
    return end


def _top_level_members(text: str) -> dict[str, Any] | None:
    """The members of a top-level object too deep for the parser, as far as they can be read
    without walking the deep value: from the front up to it (each member decoded by the
    strict parser, which stops at the deep one), then the scalar members after it, from the
    closing brace backwards. The deep value is `_DEEP`. None when the top level is not an
    object or a member name repeats."""
    members: dict[str, Any] = {}
    index = _skip_space(text, 0)
    if not text.startswith("{", index):
        return None
    index = _skip_space(text, index + 1)
    while True:
        try:
            key, index = _DECODER.raw_decode(text, index)
            index = _skip_space(text, index)
            if not isinstance(key, str) or not text.startswith(":", index):
                return None
            value, index = _DECODER.raw_decode(text, _skip_space(text, index + 1))
        except RecursionError:
            if key in members:
                return None
            members[key] = _DEEP
            return _tail_members(text, members)
        except ValueError:
            return None
        if key in members:
            return None
        members[key] = value
        index = _skip_space(text, index)
        if not text.startswith(",", index):
            return members
        index = _skip_space(text, index + 1)


def _tail_members(text: str, members: dict[str, Any]) -> dict[str, Any] | None:
    """`members` and the scalar members that end the top-level object, read from its closing
    brace backwards up to the first that is not a short scalar."""
    end = _space_before(text, len(text))
    if not text.endswith("}", 0, end):
        return members
    end -= 1
    while True:
        scalar = _TAIL_SCALAR.search(text, max(0, end - _TAIL_WINDOW), end)
        if scalar is None:
            return members
        named = _TAIL_KEY.search(text, max(0, scalar.start() - _TAIL_WINDOW), scalar.start())
        if named is None:
            return members
        try:
            key = _DECODER.decode(named.group(1))
            value = _DECODER.decode(text[scalar.start() : end])
        except ValueError:
            return members
        if key in members:
            return None
        members[key] = value
        end = _space_before(text, named.start())
        if not text.endswith(",", 0, end):
            return members
        end -= 1


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
