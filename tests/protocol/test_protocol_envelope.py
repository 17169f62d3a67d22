"""JSON-RPC envelope: strict decoding of one message, compact encoding of replies."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from notes_server.errors import INVALID_PARAMS, INVALID_REQUEST, PARSE_ERROR, to_wire
from notes_server.jsontext import dump_text
from notes_server.protocol.envelope import (
    DecodeFailure,
    Notification,
    Request,
    decode,
    encode_error,
    encode_result,
    parse_json,
)


def failure_of(raw: bytes | str) -> DecodeFailure:
    with pytest.raises(DecodeFailure) as info:
        decode(raw)
    return info.value


def message(**members: Any) -> bytes:
    return json.dumps(members).encode()


def test_a_well_formed_request_decodes_with_its_id_method_and_params() -> None:
    request = decode(message(jsonrpc="2.0", id=7, method="tools/list", params={"a": 1}))

    assert request == Request(7, "tools/list", {"a": 1})


def test_a_string_id_is_kept_as_a_string() -> None:
    request = decode(message(jsonrpc="2.0", id="7", method="m"))

    assert isinstance(request, Request)
    assert request.id == "7"


def test_missing_params_decode_as_an_empty_object() -> None:
    assert decode(message(jsonrpc="2.0", id=1, method="m")) == Request(1, "m", {})


def test_a_message_without_id_is_a_notification() -> None:
    decoded = decode(message(jsonrpc="2.0", method="notifications/cancelled", params={"x": 1}))

    assert decoded == Notification("notifications/cancelled", {"x": 1})


@pytest.mark.parametrize(
    "raw",
    [b"{not json", b"", b'{"jsonrpc":"2.0","id":1,"method":"m"', b"{'a': 1}"],
    ids=["garbage", "empty", "truncated", "single-quotes"],
)
def test_invalid_json_is_a_parse_error_without_id(raw: bytes) -> None:
    failure = failure_of(raw)

    assert failure.error.code == PARSE_ERROR
    assert failure.request_id is None


def test_bytes_that_are_not_utf8_are_a_parse_error() -> None:
    failure = failure_of(b'{"jsonrpc":"2.0","id":1,"method":"\xff\xfe"}')

    assert failure.error.code == PARSE_ERROR
    assert failure.request_id is None


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_number_constants_are_a_parse_error(constant: str) -> None:
    failure = failure_of(f'{{"jsonrpc":"2.0","id":1,"method":"m","params":{{"x":{constant}}}}}')

    assert failure.error.code == PARSE_ERROR


def test_a_batch_array_is_an_invalid_request() -> None:
    failure = failure_of(b'[{"jsonrpc":"2.0","id":1,"method":"m"}]')

    assert failure.error.code == INVALID_REQUEST
    assert failure.request_id is None


def test_an_empty_batch_array_is_an_invalid_request() -> None:
    assert failure_of(b"[]").error.code == INVALID_REQUEST


@pytest.mark.parametrize("raw", [b"1", b'"text"', b"null", b"true"])
def test_a_json_scalar_is_an_invalid_request(raw: bytes) -> None:
    failure = failure_of(raw)

    assert failure.error.code == INVALID_REQUEST
    assert failure.request_id is None


def test_missing_jsonrpc_member_is_an_invalid_request_that_echoes_the_id() -> None:
    failure = failure_of(message(id=5, method="m"))

    assert failure.error.code == INVALID_REQUEST
    assert failure.request_id == 5


def test_jsonrpc_version_1_is_an_invalid_request_that_echoes_the_id() -> None:
    failure = failure_of(message(jsonrpc="1.0", id="abc", method="m"))

    assert failure.error.code == INVALID_REQUEST
    assert failure.request_id == "abc"


@pytest.mark.parametrize("bad_id", [None, True, 1.5, {}, [], False])
def test_an_id_that_is_not_a_string_or_integer_is_refused_with_a_null_id(bad_id: Any) -> None:
    failure = failure_of(message(jsonrpc="2.0", id=bad_id, method="m"))

    assert failure.error.code == INVALID_REQUEST
    assert failure.request_id is None


def test_duplicate_object_keys_are_an_invalid_request() -> None:
    failure = failure_of(b'{"jsonrpc":"2.0","id":1,"method":"a","method":"b"}')

    assert failure.error.code == INVALID_REQUEST


def test_duplicate_keys_nested_in_params_are_an_invalid_request() -> None:
    failure = failure_of(b'{"jsonrpc":"2.0","id":1,"method":"m","params":{"x":1,"x":2}}')

    assert failure.error.code == INVALID_REQUEST


@pytest.mark.parametrize("extra", ["result", "error", "extra"])
def test_an_unexpected_member_is_an_invalid_request(extra: str) -> None:
    failure = failure_of(message(jsonrpc="2.0", id=3, method="m", **{extra: {}}))

    assert failure.error.code == INVALID_REQUEST
    assert failure.request_id == 3


@pytest.mark.parametrize("method", [None, 1, "", ["m"]])
def test_a_method_that_is_not_a_non_empty_string_is_an_invalid_request(method: Any) -> None:
    failure = failure_of(message(jsonrpc="2.0", id=3, method=method))

    assert failure.error.code == INVALID_REQUEST


def test_a_response_object_sent_to_the_server_is_an_invalid_request() -> None:
    assert failure_of(message(jsonrpc="2.0", id=1, result={})).error.code == INVALID_REQUEST


@pytest.mark.parametrize("params", [[1, 2], "x", 3, None])
def test_params_that_are_not_an_object_are_invalid_params(params: Any) -> None:
    failure = failure_of(message(jsonrpc="2.0", id=9, method="m", params=params))

    assert failure.error.code == INVALID_PARAMS
    assert failure.request_id == 9


def test_encoded_results_are_one_compact_line() -> None:
    raw = encode_result(1, {"text": "line one\nline two", "nested": {"a": [1, 2]}})

    assert b"\n" not in raw
    assert b", " not in raw and b": " not in raw
    assert json.loads(raw) == {
        "jsonrpc": "2.0",
        "id": 1,
        "result": {"text": "line one\nline two", "nested": {"a": [1, 2]}},
    }


def test_encoded_errors_carry_a_null_id_when_the_id_is_unknown() -> None:
    raw = encode_error(None, {"code": -32700, "message": "Parse error"})

    assert b"\n" not in raw
    assert json.loads(raw) == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32700, "message": "Parse error"},
    }


def test_non_ascii_text_is_encoded_as_utf8() -> None:
    raw = encode_result("é", {"title": "Grüße ✓"})

    assert "Grüße ✓".encode() in raw
    assert json.loads(raw.decode("utf-8"))["id"] == "é"


def test_a_lone_surrogate_in_an_id_is_echoed_as_an_escape_not_a_crash() -> None:
    request = decode(b'{"jsonrpc":"2.0","id":"\\ud800","method":"m"}')
    assert isinstance(request, Request)

    raw = encode_error(request.id, {"code": -32601, "message": "Method not found"})

    raw.decode("utf-8")
    assert json.loads(raw)["id"] == "\ud800"


ANY_TEXT = st.text(st.characters(exclude_categories=()), max_size=40)
# What UTF-8 can carry: everything but lone surrogates (category Cs), which are refused.
STORABLE_TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=40)


@given(ANY_TEXT)
def test_any_string_id_is_echoed_as_valid_utf8_json(request_id: str) -> None:
    raw = encode_error(request_id, {"code": -32601, "message": f"Method not found: {request_id}"})

    reply = json.loads(raw.decode("utf-8"))

    assert b"\n" not in raw
    assert reply["id"] == request_id
    assert reply["error"]["message"] == f"Method not found: {request_id}"


@given(st.binary(max_size=120))
def test_arbitrary_bytes_either_decode_or_fail_with_an_encodable_error(raw: bytes) -> None:
    try:
        decode(raw)
    except DecodeFailure as failure:
        reply = json.loads(encode_error(failure.request_id, to_wire(failure.error)))
        assert reply["error"]["code"] in (PARSE_ERROR, INVALID_REQUEST, INVALID_PARAMS)


@given(
    request_id=st.one_of(ANY_TEXT, st.integers()),
    method=STORABLE_TEXT.filter(bool),
    params=st.dictionaries(
        STORABLE_TEXT, st.one_of(st.none(), st.booleans(), STORABLE_TEXT), max_size=4
    ),
)
def test_any_well_formed_request_decodes_to_what_was_sent(
    request_id: str | int, method: str, params: dict[str, Any]
) -> None:
    raw = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})

    assert decode(raw.encode()) == Request(request_id, method, params)


@given(
    request_id=st.one_of(ANY_TEXT, st.integers()),
    method=ANY_TEXT.filter(bool),
    params=st.dictionaries(ANY_TEXT, st.one_of(st.none(), st.booleans(), ANY_TEXT), max_size=4),
)
def test_a_request_with_a_lone_surrogate_is_refused_with_its_id_or_decodes_exactly(
    request_id: str | int, method: str, params: dict[str, Any]
) -> None:
    raw = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
    lone = any("\ud800" <= c <= "\udfff" for c in method + json.dumps(params, ensure_ascii=False))

    try:
        decoded = decode(raw.encode())
    except DecodeFailure as failure:
        assert lone
        assert failure.error.code in (INVALID_REQUEST, INVALID_PARAMS)
        assert failure.request_id == request_id
    else:
        assert not lone
        assert decoded == Request(request_id, method, params)


def _stdlib(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode(
        "utf-8", "backslashreplace"
    )


JSON_WITHOUT_FLOATS = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)


@given(JSON_WITHOUT_FLOATS)
def test_replies_are_encoded_byte_for_byte_as_the_stdlib_would(value: Any) -> None:
    assert encode_result(7, {"v": value}) == _stdlib(
        {"jsonrpc": "2.0", "id": 7, "result": {"v": value}}
    )
    assert dump_text(value) == _stdlib(value).decode("utf-8")


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_floats_in_replies_keep_their_value(value: float) -> None:
    assert json.loads(encode_result(1, {"x": value}))["result"]["x"] == value


@pytest.mark.parametrize(
    "value",
    [2**64, -(2**63) - 1, 10**30, "\ud800", {"k\udfff": 1}, {1: "int key"}, [{"deep": 2**70}]],
)
def test_what_the_fast_encoder_refuses_is_encoded_as_the_stdlib_would(value: Any) -> None:
    assert encode_result(1, {"v": value}) == _stdlib(
        {"jsonrpc": "2.0", "id": 1, "result": {"v": value}}
    )


def test_values_json_cannot_encode_still_fail_as_type_errors() -> None:
    with pytest.raises(TypeError):
        encode_result(1, {"when": datetime(2026, 1, 1)})
    with pytest.raises(TypeError):
        dump_text({"obj": object()})


# -- parse_json reads compact canonical messages with orjson: the same verdicts as the stdlib --


def _reference(raw: bytes) -> tuple[str, Any]:
    """What the strict stdlib decoder alone says of `raw`: ("value", v) or ("refused", None)."""

    def no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        if len({key for key, _ in pairs}) != len(pairs):
            raise ValueError("duplicate")
        return dict(pairs)

    def no_constant(name: str) -> Any:
        raise ValueError(name)

    try:
        text = raw.decode("utf-8")
        value = json.loads(text, object_pairs_hook=no_duplicates, parse_constant=no_constant)
    except (ValueError, RecursionError):
        return "refused", None
    return "value", value


def _outcome(raw: bytes) -> tuple[str, Any]:
    try:
        return "value", parse_json(raw)
    except DecodeFailure:
        return "refused", None


_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
)
_values = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=12,
)


@given(_values)
def test_a_compact_message_reads_as_the_stdlib_reads_it(value: Any) -> None:
    for raw in (
        json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode(),
        json.dumps(value).encode(),
    ):
        got = _outcome(raw)
        assert got == _reference(raw)
        assert repr(got) == repr(_reference(raw))  # ints stay ints, -0.0 stays -0.0


@given(st.dictionaries(st.text(max_size=3), _scalars, min_size=1, max_size=4), _scalars)
def test_a_duplicate_key_in_a_compact_object_is_refused(
    members: dict[str, Any], extra: Any
) -> None:
    body = json.dumps(members, separators=(",", ":"), ensure_ascii=False)
    key = json.dumps(next(iter(members)), ensure_ascii=False)
    raw = (body[:-1] + "," + key + ":" + json.dumps(extra) + "}").encode()
    assert _reference(raw) == ("refused", None)
    assert _outcome(raw) == ("refused", None)


@pytest.mark.parametrize(
    "raw",
    [
        b'{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":1,"a":1}}',
        b'{"jsonrpc":"2.0","id":1,"id":1,"method":"m"}',
        b'{"a":18446744073709551616}',
        b'{"a":-9223372036854775809}',
        b'{"a":1e400}',
        b'{"a":NaN}',
        b'{"a":"\\ud800"}',
        b'{"a":"\xff"}',
    ],
)
def test_what_orjson_reads_otherwise_gets_the_stdlib_verdict(raw: bytes) -> None:
    assert repr(_outcome(raw)) == repr(_reference(raw))
    if b'"a":1,"a"' in raw or b'"id":1,"id"' in raw:
        assert failure_of(raw).error.code == INVALID_REQUEST


def test_a_compact_message_nested_too_deep_is_still_refused() -> None:
    raw = b'{"jsonrpc":"2.0","id":3,"method":"m","params":{"a":' + b"[" * 64 + b"]" * 64 + b"}}"
    failure = failure_of(raw)
    assert (failure.error.code, failure.request_id) == (INVALID_PARAMS, 3)


def test_integers_beyond_64_bits_stay_exact() -> None:
    assert parse_json(b'{"a":18446744073709551616}') == {"a": 18446744073709551616}
    assert type(parse_json(b"[-9223372036854775809]")[0]) is int
