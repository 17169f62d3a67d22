"""Shared by the notes_purge tests: the composed HTTP app, tokens, archived notes, the MCP calls
and the browser steps of the approval page (httpx through Starlette's TestClient)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import parse_qs, urlsplit

import httpx
from sqlalchemy import Engine

from notes_server.store import notes
from notes_server.store.engine import write_tx
from notes_server.tools.services import utc_now
from tests.transports.http_support import rpc

WS = "file:///home/alice/projects/garden"
URL_CAPS: dict[str, Any] = {"elicitation": {"url": {}}}
CSRF = re.compile(r'name="csrf" value="([^"]+)"')
CODE = re.compile(r"approval code for purge request (pa-[0-9a-f]+): ([A-Z2-9]{5}-[A-Z2-9]{5})")


class Stderr(Protocol):
    def stderr_text(self) -> str: ...


def approval_of(url: str) -> str:
    """The approval id the link names (its `a` parameter)."""
    return parse_qs(urlsplit(url).query)["a"][0]


def code_for(server: Stderr, approval: str) -> str:
    """The code a stdio server printed for `approval` (written before the link's redirect)."""
    found = [m.group(2) for m in CODE.finditer(server.stderr_text()) if m.group(1) == approval]
    assert len(found) == 1, server.stderr_text()
    return found[0]


@dataclass
class Round:
    """One purge round's parsed answer."""

    reply: dict[str, Any]

    @property
    def result(self) -> dict[str, Any]:
        result: dict[str, Any] = self.reply["result"]
        return result

    @property
    def state(self) -> str:
        state: str = self.result["requestState"]
        return state

    @property
    def url(self) -> str:
        url: str = self.result["inputRequests"]["purge_approval"]["params"]["url"]
        return url


def add_note(engine: Engine, path: str, title: str, *, archived: bool) -> notes.NoteRecord:
    now = utc_now()
    with write_tx(engine) as conn:
        note = notes.insert_note(conn, workspace=WS, path=path, title=title, body="x", now=now)
        if archived:
            changed = notes.update_fields(conn, note, now=now, archived=True, archived_at=now)
            assert changed is not None
            note = changed
    return note


def post_mcp(
    client: httpx.Client,
    token: str,
    params: Mapping[str, Any],
    caps: Mapping[str, Any] | None = URL_CAPS,
) -> httpx.Response:
    body, headers = rpc("tools/call", params, caps=caps)
    headers["Authorization"] = f"Bearer {token}"
    return client.post("/mcp", content=body, headers=headers)


def purge(
    client: httpx.Client,
    token: str,
    *,
    answer: str | None = None,
    state: str | None = None,
    caps: Mapping[str, Any] | None = URL_CAPS,
) -> httpx.Response:
    params: dict[str, Any] = {"name": "notes_purge", "arguments": {"workspaceUri": WS}}
    if state is not None:
        params["requestState"] = state
        params["inputResponses"] = {} if answer is None else {"purge_approval": {"action": answer}}
    return post_mcp(client, token, params, caps)


def round_of(response: httpx.Response) -> Round:
    assert response.status_code == 200, response.text
    return Round(response.json())


def page_path(url: str) -> str:
    """The path and query of an approval URL (the test clients have the origin as base)."""
    parts = urlsplit(url)
    assert parts.path == "/approval" and parts.query, url
    return f"{parts.path}?{parts.query}"


def csrf_of(response: httpx.Response) -> str:
    found = CSRF.search(response.text)
    assert found is not None, response.text
    return found.group(1)


def form_post(browser: httpx.Client, fields: Mapping[str, str]) -> httpx.Response:
    """A same-origin form submission, as a browser sends it."""
    return browser.post(
        "/approval",
        data=dict(fields),
        headers={"Origin": str(browser.base_url).rstrip("/")},
        follow_redirects=False,
    )


def open_link(browser: httpx.Client, url: str) -> httpx.Response:
    return browser.get(page_path(url), follow_redirects=False)


def sign_in(browser: httpx.Client, url: str, token: str) -> httpx.Response:
    """Open the link, then submit the login form with `token`; returns the login answer."""
    assert open_link(browser, url).status_code == 303
    login = browser.get("/approval")
    return form_post(browser, {"csrf": csrf_of(login), "token": token})


def approve(browser: httpx.Client, url: str, token: str, typed: str = "garden") -> httpx.Response:
    """The whole page flow: link, sign-in, confirm form; returns the confirm answer."""
    signed = sign_in(browser, url, token)
    assert signed.status_code == 303, signed.text
    page = browser.get("/approval")
    assert page.status_code == 200, page.text
    return form_post(browser, {"csrf": csrf_of(page), "confirm": typed})


def approve_with_code(server: Stderr, url: str, typed: str = "garden") -> httpx.Response:
    """The page flow on a stdio server's loopback listener, signed in with the code from its
    stderr; returns the confirm answer."""
    origin = f"http://127.0.0.1:{urlsplit(url).port}"
    with httpx.Client(base_url=origin, timeout=30) as browser:
        assert open_link(browser, url).status_code == 303
        login = browser.get("/approval")
        code = code_for(server, approval_of(url))
        signed = form_post(browser, {"csrf": csrf_of(login), "token": code})
        assert signed.status_code == 303, signed.text
        page = browser.get("/approval")
        return form_post(browser, {"csrf": csrf_of(page), "confirm": typed})
