"""Who may sign in on the approval page: every credential the HTTP server accepts (its own
authenticator: stored tokens and, with JWT configured, access tokens), only for the principal
that started the purge; and, on a public (non-loopback) deployment, the page's form POSTs from
its own origin pass the Origin check without `--allow-origin` while other origins do not."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from sqlalchemy import Engine, text
from starlette.testclient import TestClient

from notes_server.app import create_http_app
from notes_server.config import HttpSettings, Settings
from notes_server.tools.services import Services
from tests.approval.purge_support import (
    WS,
    add_note,
    approve,
    csrf_of,
    form_post,
    open_link,
    purge,
    round_of,
    sign_in,
)
from tests.transports.http_support import LOOPBACK_URL, rpc

ISSUER = "https://issuer.example"
AUDIENCE = "https://notes.example/mcp"
CAROL = f"{ISSUER}|carol"
PUBLIC = "https://notes.example"


@pytest.fixture(scope="module")
def signing_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def mint(key: rsa.RSAPrivateKey, subject: str) -> str:
    claims = {"sub": subject, "iss": ISSUER, "aud": AUDIENCE, "exp": int(time.time()) + 300}
    return jwt.encode(claims, key, algorithm="RS256", headers={"kid": "k1"})


@pytest.fixture
def jwt_app(
    tmp_path: Path, settings: Settings, services: Services, signing_key: rsa.RSAPrivateKey
) -> Iterator[TestClient]:
    public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(signing_key.public_key()))
    public.update(kid="k1", alg="RS256", use="sig")
    jwks = tmp_path / "jwks.json"
    jwks.write_text(json.dumps({"keys": [public]}))
    http = HttpSettings(jwt_issuer=ISSUER, jwt_audience=AUDIENCE, jwt_jwks=str(jwks))
    app = create_http_app(settings, http, Services(settings, engine=services.engine))
    with TestClient(app, base_url=LOOPBACK_URL) as client:
        yield client


def live_count(engine: Engine) -> int:
    with engine.connect() as conn:
        count = conn.execute(text("SELECT count(*) FROM notes")).scalar()
    assert isinstance(count, int)
    return count


def test_a_jwt_user_signs_in_on_the_page_with_the_same_access_token_and_purges(
    jwt_app: TestClient,
    signing_key: rsa.RSAPrivateKey,
    migrated_engine: Engine,
    grant: Callable[..., str],
) -> None:
    grant(CAROL, WS)
    add_note(migrated_engine, "old.md", "Old", archived=True)
    token = mint(signing_key, "carol")
    first = round_of(purge(jwt_app, token))
    browser = TestClient(jwt_app.app, base_url=LOOPBACK_URL)

    approved = approve(browser, first.url, token)
    final = round_of(purge(jwt_app, token, answer="accept", state=first.state)).result

    assert approved.status_code == 200 and "Purge approved" in approved.text
    assert final["structuredContent"]["purgedCount"] == 1
    assert live_count(migrated_engine) == 0


@pytest.mark.parametrize("who", ["another-subject", "signed-by-another-key", "not-a-token"])
def test_the_page_refuses_a_credential_that_is_not_the_purges_principal(
    jwt_app: TestClient,
    signing_key: rsa.RSAPrivateKey,
    migrated_engine: Engine,
    grant: Callable[..., str],
    who: str,
) -> None:
    grant(CAROL, WS)
    grant(f"{ISSUER}|dave", WS)
    add_note(migrated_engine, "old.md", "Old", archived=True)
    first = round_of(purge(jwt_app, mint(signing_key, "carol")))
    other_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    typed = {
        "another-subject": mint(signing_key, "dave"),
        "signed-by-another-key": mint(other_key, "carol"),
        "not-a-token": "carol",
    }[who]

    refused = sign_in(TestClient(jwt_app.app, base_url=LOOPBACK_URL), first.url, typed)

    assert refused.status_code == 403
    assert "does not belong to the account" in refused.text


def test_without_credentials_on_http_the_page_still_wants_a_stored_token(
    settings: Settings, services: Services, migrated_engine: Engine, alice: str
) -> None:
    """`--auth none` accepts anything on /mcp; the page does not take that as proof."""
    app = create_http_app(
        settings, HttpSettings(auth="none"), Services(settings, engine=services.engine)
    )
    add_note(migrated_engine, "old.md", "Old", archived=True)
    with TestClient(app, base_url=LOOPBACK_URL) as client:
        first = round_of(purge(client, "ignored"))
    browser = TestClient(app, base_url=LOOPBACK_URL)
    assert open_link(browser, first.url).status_code == 303
    csrf = csrf_of(browser.get("/approval"))

    anything = form_post(browser, {"csrf": csrf, "token": "anything"})
    own = form_post(browser, {"csrf": csrf, "token": alice})

    assert anything.status_code == 403
    assert own.status_code == 303


# -- a public deployment: the page's own origin ------------------------------------------------


@pytest.fixture
def public_app(settings: Settings, services: Services) -> Iterator[TestClient]:
    http = HttpSettings(host="0.0.0.0", port=8443, public_url=PUBLIC)
    app = create_http_app(settings, http, Services(settings, engine=services.engine))
    with TestClient(app, base_url=PUBLIC) as client:
        yield client


def test_on_a_public_deployment_the_page_posts_from_its_own_origin_without_allow_origin(
    public_app: TestClient, alice: str, migrated_engine: Engine
) -> None:
    add_note(migrated_engine, "old.md", "Old", archived=True)
    first = round_of(purge(public_app, alice))
    assert first.url.startswith(PUBLIC + "/approval?")
    browser = TestClient(public_app.app, base_url=PUBLIC)

    approved = approve(browser, first.url, alice)  # every POST carries Origin: PUBLIC
    final = round_of(purge(public_app, alice, answer="accept", state=first.state)).result

    assert approved.status_code == 200 and "Purge approved" in approved.text
    assert final["structuredContent"]["purgedCount"] == 1


@pytest.mark.parametrize(
    "origin",
    ["https://evil.example", "https://notes.example:444", "null", "https://notes.example.evil"],
)
def test_on_a_public_deployment_a_cross_origin_post_to_the_page_is_refused(
    public_app: TestClient, alice: str, migrated_engine: Engine, origin: str
) -> None:
    add_note(migrated_engine, "old.md", "Old", archived=True)
    first = round_of(purge(public_app, alice))
    browser = TestClient(public_app.app, base_url=PUBLIC)
    assert open_link(browser, first.url).status_code == 303
    csrf = csrf_of(browser.get("/approval"))

    forged = browser.post(
        "/approval", data={"csrf": csrf, "token": alice}, headers={"Origin": origin}
    )

    assert forged.status_code == 403
    assert forged.json()["error"]["message"] == "Forbidden: Origin not allowed"


def test_the_pages_own_origin_is_not_allowed_on_mcp(public_app: TestClient, alice: str) -> None:
    body, headers = rpc("tools/list")
    headers |= {"Origin": PUBLIC, "Authorization": f"Bearer {alice}"}

    response = public_app.post("/mcp", content=body, headers=headers)

    assert response.status_code == 403
