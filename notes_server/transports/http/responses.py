"""The HTTP shell's own answers: always `application/json`, refusals as id-less JSON-RPC errors."""

from __future__ import annotations

import json
from collections.abc import Mapping

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from notes_server.errors import INVALID_REQUEST


def json_response(
    status: int, payload: object, headers: Mapping[str, str] | None = None
) -> Response:
    body = json.dumps(payload, separators=(",", ":")).encode()
    return Response(body, status, headers=dict(headers or {}), media_type="application/json")


def error_response(
    status: int,
    message: str,
    *,
    code: int = INVALID_REQUEST,
    headers: Mapping[str, str] | None = None,
) -> Response:
    """A transport-level refusal as an id-less JSON-RPC error (the request was not read)."""
    error = {"code": code, "message": message}
    return json_response(status, {"jsonrpc": "2.0", "id": None, "error": error}, headers)


async def http_exception(request: Request, exc: Exception) -> Response:
    """Starlette's own 404 / 405 (unknown path, method without a route) as JSON, not text."""
    assert isinstance(exc, HTTPException)
    return error_response(exc.status_code, exc.detail, headers=exc.headers)
