"""JWT identities over HTTP, with real signed tokens: a JWT user is `<issuer>|<sub>`, never the
local principal of the same name; every JWKS key is kept (kid-less ones too) and tried; `typ`
and (with --jwt-client-id) `azp`/`client_id` are checked. Every refusal is the same fixed 401.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from sqlalchemy import Engine
from starlette.testclient import TestClient

from notes_server.app import create_http_app
from notes_server.config import HttpSettings, Settings
from notes_server.security.tokens import create_token
from notes_server.store.tokens import SqlTokenRecords
from notes_server.tools.services import Services
from notes_server.transports.http.server import (
    StartupError,
    prepare,
    startup_problem,
)
from tests.helpers import workspace_refusal
from tests.transports.http_support import LOOPBACK_URL, rpc

ISSUER = "https://idp.example"
AUDIENCE = "https://notes.example/mcp"
LOCAL_WS = "file:///home/alice/notes"
IDP_WS = "file:///srv/idp-alice"
CHALLENGE = (
    'Bearer resource_metadata="http://127.0.0.1:8765/.well-known/oauth-protected-resource/mcp",'
    ' error="invalid_token"'
)
Key = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey
MakeClient = Callable[..., TestClient]


@pytest.fixture(scope="module")
def rsa_a() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(scope="module")
def rsa_b() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def public_jwk(key: Key, **members: str) -> dict[str, Any]:
    """The public JWK of `key`, plus members such as kid and alg."""
    if isinstance(key, rsa.RSAPrivateKey):
        text = jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key())
    elif isinstance(key, ec.EllipticCurvePrivateKey):
        text = jwt.algorithms.ECAlgorithm.to_jwk(key.public_key())
    else:
        text = jwt.algorithms.OKPAlgorithm.to_jwk(key.public_key())
    return {**json.loads(text), **members}


@pytest.fixture
def make_client(tmp_path: Path, settings: Settings, services: Services) -> Iterator[MakeClient]:
    """make_client(*jwks entries, client_ids=()) -> a TestClient accepting JWTs from ISSUER."""
    settings = dataclasses.replace(settings, tools_modules=("tests.transports.http_support",))
    clients: list[TestClient] = []

    def _make(*entries: dict[str, Any], client_ids: tuple[str, ...] = ()) -> TestClient:
        path = tmp_path / f"jwks{len(clients)}.json"
        path.write_text(json.dumps({"keys": list(entries)}))
        http = HttpSettings(
            jwt_issuer=ISSUER, jwt_audience=AUDIENCE, jwt_jwks=str(path), jwt_client_ids=client_ids
        )
        app = create_http_app(settings, http, Services(settings, engine=services.engine))
        clients.append(TestClient(app, base_url=LOOPBACK_URL).__enter__())
        return clients[-1]

    yield _make
    for client in clients:
        client.__exit__(None, None, None)


def mint(key: Key, alg: str = "RS256", headers: dict[str, Any] | None = None, **claims: Any) -> str:
    payload = {"sub": "alice", "iss": ISSUER, "aud": AUDIENCE, "exp": int(time.time()) + 300}
    payload.update(claims)
    return jwt.encode(payload, key, algorithm=alg, headers=headers)


def call(client: TestClient, credential: str, name: str, arguments: dict[str, Any]) -> Any:
    body, headers = rpc("tools/call", {"name": name, "arguments": arguments})
    headers["Authorization"] = f"Bearer {credential}"
    return client.post("/mcp", content=body, headers=headers)


def whoami(client: TestClient, credential: str) -> httpx.Response:
    return call(client, credential, "test_whoami", {})


def principal_of(response: httpx.Response) -> str:
    assert response.status_code == 200, response.text
    principal: str = response.json()["result"]["structuredContent"]["principal"]
    return principal


def search(client: TestClient, credential: str, workspace: str) -> dict[str, Any]:
    response = call(client, credential, "notes_search", {"workspaceUri": workspace})
    assert response.status_code == 200, response.text
    message: dict[str, Any] = response.json()
    return message


def assert_refused(response: httpx.Response) -> None:
    """The fixed 401 every refused credential gets: the reason is never told to the client."""
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == CHALLENGE
    assert response.json() == {
        "error": "invalid_token",
        "error_description": "Missing or invalid access token",
    }


# -- principals -------------------------------------------------------------------------------


def test_a_jwt_subject_does_not_get_the_grants_of_the_local_principal_of_that_name(
    make_client: MakeClient, rsa_a: rsa.RSAPrivateKey, grant: Callable[..., str]
) -> None:
    client = make_client(public_jwk(rsa_a, kid="k1"))
    grant("alice", LOCAL_WS)

    denied = search(client, mint(rsa_a, headers={"kid": "k1"}, sub="alice"), LOCAL_WS)

    assert workspace_refusal(denied["error"])
    assert denied["error"]["data"] == {"usableWorkspaces": []}  # not the local alice's


def test_a_jwt_user_gets_exactly_the_grants_of_its_issuer_qualified_principal(
    make_client: MakeClient,
    rsa_a: rsa.RSAPrivateKey,
    grant: Callable[..., str],
    migrated_engine: Engine,
) -> None:
    client = make_client(public_jwk(rsa_a, kid="k1"))
    grant("alice", LOCAL_WS)
    grant(f"{ISSUER}|alice", IDP_WS)
    token = mint(rsa_a, headers={"kid": "k1"}, sub="alice")
    _, local_secret = create_token(SqlTokenRecords(migrated_engine), "alice")

    assert principal_of(whoami(client, token)) == "https://idp.example|alice"
    assert "result" in search(client, token, IDP_WS)
    assert search(client, token, LOCAL_WS)["error"]["data"] == {"usableWorkspaces": [IDP_WS]}
    assert "result" in search(client, local_secret, LOCAL_WS)
    assert search(client, local_secret, IDP_WS)["error"]["data"] == {"usableWorkspaces": [LOCAL_WS]}


def test_a_stored_token_whose_principal_has_the_separator_is_refused(
    make_client: MakeClient, rsa_a: rsa.RSAPrivateKey, migrated_engine: Engine
) -> None:
    """A token made before names were checked must not pass for the JWT user it spells."""
    client = make_client(public_jwk(rsa_a, kid="k1"))
    _, secret = create_token(SqlTokenRecords(migrated_engine), f"{ISSUER}|alice")

    assert_refused(whoami(client, secret))


@pytest.mark.parametrize("sub", ["alice\nINFO forged log line", "a" * 201], ids=["newline", "long"])
def test_an_unusable_subject_is_refused(
    make_client: MakeClient, rsa_a: rsa.RSAPrivateKey, sub: str
) -> None:
    client = make_client(public_jwk(rsa_a, kid="k1"))

    assert_refused(whoami(client, mint(rsa_a, headers={"kid": "k1"}, sub=sub)))


# -- keys ---------------------------------------------------------------------------------------


def test_two_jwks_keys_without_kid_both_verify_tokens_without_kid(
    make_client: MakeClient, rsa_a: rsa.RSAPrivateKey, rsa_b: rsa.RSAPrivateKey
) -> None:
    client = make_client(public_jwk(rsa_a, alg="RS256"), public_jwk(rsa_b, alg="RS256"))

    assert principal_of(whoami(client, mint(rsa_a))) == f"{ISSUER}|alice"
    assert principal_of(whoami(client, mint(rsa_b))) == f"{ISSUER}|alice"


def test_a_token_naming_a_kid_is_checked_only_with_that_kid(
    make_client: MakeClient, rsa_a: rsa.RSAPrivateKey, rsa_b: rsa.RSAPrivateKey
) -> None:
    client = make_client(public_jwk(rsa_a, kid="a"), public_jwk(rsa_b, kid="b"))

    assert principal_of(whoami(client, mint(rsa_b, headers={"kid": "b"})))
    assert_refused(whoami(client, mint(rsa_b, headers={"kid": "a"})))
    assert_refused(whoami(client, mint(rsa_b, headers={"kid": "c"})))


def test_a_token_without_kid_is_tried_with_every_key_of_its_algorithm(
    make_client: MakeClient, rsa_a: rsa.RSAPrivateKey, rsa_b: rsa.RSAPrivateKey
) -> None:
    client = make_client(public_jwk(rsa_a, kid="a"), public_jwk(rsa_b, kid="b"))

    assert principal_of(whoami(client, mint(rsa_b)))
    assert_refused(whoami(client, mint(rsa.generate_private_key(65537, 2048))))


@pytest.mark.parametrize("alg", ["RS256", "RS512", "PS256", "PS384"])
def test_an_rsa_key_without_alg_verifies_any_rsa_algorithm(
    make_client: MakeClient, rsa_a: rsa.RSAPrivateKey, alg: str
) -> None:
    client = make_client(public_jwk(rsa_a))

    assert principal_of(whoami(client, mint(rsa_a, alg)))


def test_ec_and_okp_keys_verify_their_own_algorithms(make_client: MakeClient) -> None:
    p256, p384 = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP384R1())
    edwards = ed25519.Ed25519PrivateKey.generate()
    client = make_client(public_jwk(p256), public_jwk(p384), public_jwk(edwards))

    assert principal_of(whoami(client, mint(p256, "ES256")))
    assert principal_of(whoami(client, mint(p384, "ES384")))
    assert principal_of(whoami(client, mint(edwards, "EdDSA")))


def test_an_algorithm_that_does_not_fit_the_key_is_refused(
    make_client: MakeClient, rsa_a: rsa.RSAPrivateKey
) -> None:
    p256 = ec.generate_private_key(ec.SECP256R1())
    client = make_client(public_jwk(rsa_a, kid="r", alg="RS256"), public_jwk(p256, kid="e"))

    assert_refused(whoami(client, mint(rsa_a, "PS256", headers={"kid": "r"})))
    assert_refused(whoami(client, mint(rsa_a, "RS256", headers={"kid": "e"})))
    assert_refused(whoami(client, mint(p256, "ES256", headers={"kid": "r"})))
    assert_refused(whoami(client, jwt.encode({"sub": "alice"}, None, algorithm="none")))
    assert_refused(whoami(client, mint("a-guessable-secret-of-32-bytes!!", "HS256")))  # type: ignore[arg-type]


# -- typ and azp ----------------------------------------------------------------------------------


@pytest.mark.parametrize("typ", ["JWT", "jwt", "at+jwt", "AT+JWT", "application/at+jwt", None])
def test_a_jwt_or_access_token_typ_is_accepted(
    make_client: MakeClient, rsa_a: rsa.RSAPrivateKey, typ: str | None
) -> None:
    client = make_client(public_jwk(rsa_a, kid="k1"))

    assert principal_of(whoami(client, mint(rsa_a, headers={"kid": "k1", "typ": typ})))


@pytest.mark.parametrize("typ", ["dpop+jwt", "JOSE", "logout+jwt", "application/jwt+json", 1])
def test_any_other_typ_is_refused(
    make_client: MakeClient,
    rsa_a: rsa.RSAPrivateKey,
    typ: object,
    caplog: pytest.LogCaptureFixture,
) -> None:
    client = make_client(public_jwk(rsa_a, kid="k1"))

    with caplog.at_level(logging.INFO, logger="notes_server.auth"):
        assert_refused(whoami(client, mint(rsa_a, headers={"kid": "k1", "typ": typ})))

    assert "JWT rejected: typ header is neither JWT nor at+jwt" in caplog.messages


@pytest.mark.parametrize(
    "claims",
    [{"azp": "notes-app"}, {"client_id": "notes-app"}, {"azp": "cli", "client_id": "cli"}],
)
def test_a_configured_client_is_accepted(
    make_client: MakeClient, rsa_a: rsa.RSAPrivateKey, claims: dict[str, str]
) -> None:
    client = make_client(public_jwk(rsa_a, kid="k1"), client_ids=("notes-app", "cli"))

    assert principal_of(whoami(client, mint(rsa_a, headers={"kid": "k1"}, **claims)))


@pytest.mark.parametrize(
    "claims",
    [{"azp": "other-app"}, {}, {"client_id": "other-app"}, {"azp": "cli", "client_id": "x"}],
    ids=["azp-mismatch", "no-client", "client_id-mismatch", "one-of-two-mismatches"],
)
def test_a_client_that_is_not_configured_is_refused(
    make_client: MakeClient,
    rsa_a: rsa.RSAPrivateKey,
    claims: dict[str, str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    client = make_client(public_jwk(rsa_a, kid="k1"), client_ids=("notes-app", "cli"))

    with caplog.at_level(logging.INFO, logger="notes_server.auth"):
        assert_refused(whoami(client, mint(rsa_a, headers={"kid": "k1"}, **claims)))

    assert any(m.startswith("JWT rejected: ") and "client" in m for m in caplog.messages)


def test_without_configured_clients_azp_is_not_restricted(
    make_client: MakeClient, rsa_a: rsa.RSAPrivateKey
) -> None:
    client = make_client(public_jwk(rsa_a, kid="k1"))

    assert principal_of(whoami(client, mint(rsa_a, headers={"kid": "k1"}, azp="any-app")))


@pytest.mark.parametrize(
    ("changes", "problem"),
    [
        (
            {"jwt_client_ids": ("app",)},
            "--jwt-client-id needs --jwt-issuer, --jwt-audience and --jwt-jwks",
        ),
        (
            {"jwt_issuer": "https://a|b", "jwt_audience": "a", "jwt_jwks": "f"},
            "--jwt-issuer must not contain '|'",
        ),
    ],
)
def test_unusable_jwt_options_are_named_at_start(
    settings: Settings, changes: dict[str, Any], problem: str
) -> None:
    assert startup_problem(settings, HttpSettings(**changes)) == problem


def test_a_jwks_file_with_private_key_material_is_refused_at_start(
    tmp_path: Path, settings: Settings, rsa_a: rsa.RSAPrivateKey
) -> None:
    private = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(rsa_a))
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps({"keys": [public_jwk(rsa_a, kid="pub"), private]}))
    http = HttpSettings(jwt_issuer=ISSUER, jwt_audience=AUDIENCE, jwt_jwks=str(path))

    with pytest.raises(StartupError, match=r'holds private key material \("d"\)'):
        prepare(settings, http)
