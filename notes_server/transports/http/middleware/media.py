"""`POST /mcp` media types: 406 unless the client accepts both response types, 415 unless the
body is UTF-8 JSON. Checked after authentication and before the body is read, so the order of
refusals stays Accept, Content-Type, size, time (`limits`)."""

from __future__ import annotations

import re

from starlette.responses import Response

from notes_server.transports.http.middleware.guard import RememberedValues
from notes_server.transports.http.request import McpRequest
from notes_server.transports.http.responses import error_response

_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_PARAM_VALUE = re.compile(r'[!#$%&\'*+.^_`|~0-9A-Za-z-]+|"[^"\\]*"')


def _media_types(header: str) -> set[str]:
    return {part.split(";", 1)[0].strip().lower() for part in header.split(",")}


def json_content_type(header: str) -> bool:
    """`application/json` with any parameters (RFC 9110 §8.3.1), of which `charset`, if given,
    must be UTF-8: `application/json; charset="UTF-8"; foo=bar` is fine, `charset=latin-1` or a
    malformed parameter is not."""
    media, *params = header.split(";")
    if media.strip().lower() != "application/json":
        return False
    for param in params:
        if not param.strip():
            continue  # an empty parameter (`application/json;`) is allowed by the grammar
        name, sep, value = param.strip().partition("=")
        if not sep or not _TOKEN.fullmatch(name) or not _PARAM_VALUE.fullmatch(value):
            return False
        if name.lower() == "charset" and value.strip('"').lower() not in ("utf-8", "utf8"):
            return False
    return True


def media_problem_for(accept: str, content_type: str) -> Response | None:
    """406 or 415 from the (first) `Accept` and `Content-Type` values, or None."""
    accepted = _media_types(accept)
    if not {"application/json", "text/event-stream"} <= accepted:
        return error_response(
            406, "Not Acceptable: Accept must list application/json and text/event-stream"
        )
    if not json_content_type(content_type):
        return error_response(
            415, "Unsupported Media Type: Content-Type must be application/json (UTF-8)"
        )
    return None


class MediaCheck:
    """The chain's media step: POSTs only (GET and DELETE carry no body); a pair of values
    that passed is remembered, since a client repeats its own on every request."""

    def __init__(self) -> None:
        self.passed = RememberedValues()

    async def __call__(self, request: McpRequest) -> Response | None:
        if request.method != "POST":
            return None
        accept = request.first(b"accept")
        content_type = request.first(b"content-type")
        if (accept, content_type) in self.passed:
            return None
        problem = media_problem_for(accept, content_type)
        if problem is None:
            self.passed.add((accept, content_type))
        return problem
