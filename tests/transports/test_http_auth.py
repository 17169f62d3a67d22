"""Authentication over HTTP: every request on its own, principal only from the credential.

In-process through the ASGI app: stored `nst_` tokens (missing, wrong, revoked, expired, valid,
and a valid token whose principal lacks the workspace) and JWTs checked against a JWKS file
(wrong audience, wrong issuer, expired, bad signature, wrong algorithm, no subject).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from sqlalchemy import Engine, text
from starlette.testclient import TestClient

from notes_server.app import create_http_app
from notes_server.config import HttpSettings, Settings
from notes_server.security.tokens import create_token, utc_now
from notes_server.store import tokens
from notes_server.store.engine import write_tx
from notes_server.store.tokens import SqlTokenRecords
from notes_server.tools.services import Services
from tests.helpers import workspace_refusal
from tests.transports.http_support import LOOPBACK_URL, rpc

ISSUER = "https://issuer.example"
AUDIENCE = "https://notes.example/mcp"
CHALLENGE = (
    'Bearer resource_metadata="http://127.0.0.1:8765/.well-known/oauth-protected-resource/mcp"'
)
WS = "file:///home/alice/notes"
Client = Callable[..., httpx.Response]


@pytest.fixture(scope="module")
def signing_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture
def jwks_file(tmp_path: Path, signing_key: rsa.RSAPrivateKey) -> Path:
    public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(signing_key.public_key()))
    public.update(kid="k1", alg="RS256", use="sig")
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps({"keys": [public]}))
    return path


@pytest.fixture
def http_settings(jwks_file: Path) -> HttpSettings:
    return HttpSettings(jwt_issuer=ISSUER, jwt_audience=AUDIENCE, jwt_jwks=str(jwks_file))


@pytest.fixture
def client(
    settings: Settings, services: Services, http_settings: HttpSettings
) -> Iterator[TestClient]:
    settings = dataclasses.replace(settings, tools_modules=("tests.transports.http_support",))
    app = create_http_app(settings, http_settings, Services(settings, engine=services.engine))
    with TestClient(app, base_url=LOOPBACK_URL) as test_client:
        yield test_client


def call(client: TestClient, method: str, params: Any = None, token: str | None = None) -> Any:
    body, headers = rpc(method, params)
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return client.post("/mcp", content=body, headers=headers)


def whoami(client: TestClient, token: str | None) -> httpx.Response:
    return call(client, "tools/call", {"name": "test_whoami", "arguments": {}}, token)


def principal_of(response: httpx.Response) -> str:
    assert response.status_code == 200, response.text
    principal: str = response.json()["result"]["structuredContent"]["principal"]
    return principal


def assert_unauthorized(response: httpx.Response, *, presented: bool) -> None:
    assert response.status_code == 401
    expected = CHALLENGE + (', error="invalid_token"' if presented else "")
    assert response.headers["www-authenticate"] == expected
    assert response.json() == {
        "error": "invalid_token",
        "error_description": "Missing or invalid access token",
    }


def test_a_valid_token_acts_as_its_principal(client: TestClient, migrated_engine: Engine) -> None:
    _, secret = create_token(SqlTokenRecords(migrated_engine), "bob")

    assert principal_of(whoami(client, secret)) == "bob"


def test_no_token_is_401_with_the_resource_metadata_challenge(client: TestClient) -> None:
    assert_unauthorized(whoami(client, None), presented=False)


@pytest.mark.parametrize(
    "header",
    ["Bearer nst_" + "A" * 43, "Bearer not-a-token", "Basic YWxpY2U6cHc=", "Bearer ", "nst_x"],
)
def test_a_wrong_or_malformed_credential_is_401(client: TestClient, header: str) -> None:
    body, headers = rpc("tools/call", {"name": "test_whoami", "arguments": {}})
    response = client.post("/mcp", content=body, headers={**headers, "Authorization": header})

    assert_unauthorized(response, presented=True)  # a fixed body: nothing is echoed


def test_a_revoked_token_is_401(client: TestClient, migrated_engine: Engine) -> None:
    token_id, secret = create_token(SqlTokenRecords(migrated_engine), "bob")
    assert principal_of(whoami(client, secret)) == "bob"
    with write_tx(migrated_engine) as conn:
        assert tokens.revoke(conn, token_id, utc_now())

    assert_unauthorized(whoami(client, secret), presented=True)


def test_an_expired_token_is_401(client: TestClient, migrated_engine: Engine) -> None:
    past = utc_now() - timedelta(days=2)
    _, secret = create_token(
        SqlTokenRecords(migrated_engine), "bob", expires_in=timedelta(days=1), now=past
    )

    assert_unauthorized(whoami(client, secret), presented=True)


def test_only_the_hash_is_stored_and_use_is_recorded(
    client: TestClient, migrated_engine: Engine
) -> None:
    _, secret = create_token(SqlTokenRecords(migrated_engine), "bob")
    principal_of(whoami(client, secret))

    with migrated_engine.connect() as conn:
        row = conn.execute(text("SELECT * FROM api_tokens")).mappings().one()
    assert row["token_hash"] == hashlib.sha256(secret.encode()).hexdigest()
    assert secret not in json.dumps({k: str(v) for k, v in row.items()})
    assert row["last_used_at"] is not None


def test_a_token_of_another_principal_gets_the_fixed_workspace_denial(
    client: TestClient, migrated_engine: Engine, grant: Callable[..., str]
) -> None:
    grant("alice", WS)
    _, alices = create_token(SqlTokenRecords(migrated_engine), "alice")
    _, bobs = create_token(SqlTokenRecords(migrated_engine), "bob")
    search = {"name": "notes_search", "arguments": {"workspaceUri": WS}}

    allowed = call(client, "tools/call", search, alices)
    denied = call(client, "tools/call", search, bobs)

    assert allowed.status_code == 200 and "result" in allowed.json()
    assert denied.status_code == 200
    assert workspace_refusal(denied.json()["error"])


def test_a_foreign_origin_is_refused_before_authentication(client: TestClient) -> None:
    body, headers = rpc("server/discover")
    response = client.post("/mcp", content=body, headers={**headers, "Origin": "http://evil.test"})

    assert response.status_code == 403


def test_authentication_comes_before_parsing(client: TestClient) -> None:
    response = client.post("/mcp", content=b"{oops", headers={"Content-Type": "application/json"})

    assert_unauthorized(response, presented=False)


@pytest.mark.parametrize(
    "path", ["/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"]
)
def test_protected_resource_metadata_names_the_endpoint_and_issuer(
    client: TestClient, path: str
) -> None:
    response = client.get(path)

    assert response.status_code == 200
    assert response.json() == {
        "resource": "http://127.0.0.1:8765/mcp",
        "bearer_methods_supported": ["header"],
        "resource_name": "notes-server",
        "authorization_servers": [ISSUER],
    }


# -- JWT ----------------------------------------------------------------------------------------


def mint(key: rsa.RSAPrivateKey, **overrides: Any) -> str:
    claims = {"sub": "carol", "iss": ISSUER, "aud": AUDIENCE, "exp": int(time.time()) + 300}
    claims.update(overrides)
    claims = {k: v for k, v in claims.items() if v is not None}
    return jwt.encode(claims, key, algorithm="RS256", headers={"kid": "k1"})


def test_a_valid_jwt_acts_as_its_issuer_qualified_subject(
    client: TestClient, signing_key: rsa.RSAPrivateKey
) -> None:
    assert principal_of(whoami(client, mint(signing_key))) == f"{ISSUER}|carol"


@pytest.mark.parametrize(
    "overrides",
    [
        {"aud": "https://other.example/mcp"},
        {"iss": "https://evil.example"},
        {"exp": int(time.time()) - 3600},
        {"sub": None},
        {"sub": ""},
    ],
    ids=["wrong-audience", "wrong-issuer", "expired", "no-subject", "empty-subject"],
)
def test_a_jwt_with_wrong_claims_is_401(
    client: TestClient, signing_key: rsa.RSAPrivateKey, overrides: dict[str, Any]
) -> None:
    assert_unauthorized(whoami(client, mint(signing_key, **overrides)), presented=True)


def test_a_jwt_signed_by_another_key_is_401(client: TestClient) -> None:
    impostor = rsa.generate_private_key(public_exponent=65537, key_size=2048)

    assert_unauthorized(whoami(client, mint(impostor)), presented=True)


def test_a_jwt_with_a_symmetric_algorithm_is_401(client: TestClient) -> None:
    """An HS256 token naming the RSA key's kid (the classic algorithm-confusion forgery)."""
    claims = {"sub": "carol", "iss": ISSUER, "aud": AUDIENCE, "exp": int(time.time()) + 300}
    forged = jwt.encode(claims, "a-guessable-secret-of-32-bytes!!", "HS256", {"kid": "k1"})

    assert_unauthorized(whoami(client, forged), presented=True)


def test_an_unsigned_jwt_is_401(client: TestClient) -> None:
    claims = {"sub": "carol", "iss": ISSUER, "aud": AUDIENCE, "exp": int(time.time()) + 300}
    unsigned = jwt.encode(claims, None, algorithm="none", headers={"kid": "k1"})

    assert_unauthorized(whoami(client, unsigned), presented=True)


def test_the_challenge_uses_the_public_url_when_configured(
    settings: Settings, services: Services
) -> None:
    http = HttpSettings(host="0.0.0.0", public_url="https://notes.example/")
    app = create_http_app(settings, http, Services(settings, engine=services.engine))
    with TestClient(app, base_url="http://10.1.2.3:8765") as client:
        response = whoami(client, None)
        metadata = client.get("/.well-known/oauth-protected-resource/mcp").json()

    assert response.headers["www-authenticate"] == (
        'Bearer resource_metadata="https://notes.example/.well-known/oauth-protected-resource/mcp"'
    )
    assert metadata["resource"] == "https://notes.example/mcp"
    assert "authorization_servers" not in metadata


def test_a_host_header_unfit_for_the_challenge_falls_back_to_the_bound_address(
    settings: Settings, services: Services
) -> None:
    app = create_http_app(settings, HttpSettings(host="0.0.0.0"), services)
    body, headers = rpc("server/discover")
    with TestClient(app, base_url="http://10.1.2.3:8765") as client:
        response = client.post("/mcp", content=body, headers={**headers, "Host": 'a"b'})

    assert response.status_code == 401
    assert response.headers["www-authenticate"] == (
        'Bearer resource_metadata="http://0.0.0.0:8765/.well-known/oauth-protected-resource/mcp"'
    )
