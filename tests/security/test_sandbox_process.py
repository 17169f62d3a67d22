"""The sandbox layer, on real `serve` processes: a confined server can write only its database
(and -wal/-shm), change no file metadata and open no socket, even when (deliberately wrong)
extension code tries, from the first line it runs."""

from __future__ import annotations

import base64
import json
import os
import re
import socket
import stat
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from notes_server.security.sandbox import abi_version
from tests.helpers import ServerProcess

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}

WORKSPACE = "file:///home/alice/notes"

pytestmark = pytest.mark.skipif(
    abi_version() < 6, reason="needs Landlock ABI >= 6 (Linux 6.12+): TCP rules and scopes"
)


@dataclass
class Scene:
    """A $HOME holding the database directory, and targets outside what the server may write."""

    home: Path
    db: Path
    outside: Path
    import_dir: Path
    tcp: socket.socket
    udp: socket.socket
    unix: socket.socket

    def arguments(self) -> dict[str, object]:
        return {
            "path": str(self.outside / "escaped.txt"),
            "port": self.tcp.getsockname()[1],
            "beside_db": str(self.db.parent / "beside.txt"),
            "home": str(self.home / ".profile"),
            "chmod": str(self.outside / "mode.txt"),
            "utime": str(self.outside / "times.txt"),
            "udp_port": self.udp.getsockname()[1],
            "unix": str(self.unix.getsockname()),
        }

    def env(self, **extra: str) -> dict[str, str]:
        return {
            **os.environ,
            "HOME": str(self.home),
            "PYTHONPATH": str(FIXTURES),
            "ESCAPE_IMPORT_DIR": str(self.import_dir),
            **extra,
        }


@pytest.fixture
def scene(tmp_path: Path) -> Iterator[Scene]:
    home = tmp_path / "home"
    (home / "notes").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    for name in ("mode.txt", "times.txt"):
        (outside / name).write_text("x", encoding="utf-8")
        os.chmod(outside / name, 0o644)
    import_dir = tmp_path / "import"
    import_dir.mkdir()
    tcp = socket.socket()
    tcp.bind(("127.0.0.1", 0))
    tcp.listen(4)
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    unix.bind(str(tmp_path / "agent.sock"))
    unix.listen(4)
    yield Scene(home, home / "notes" / "notes.db", outside, import_dir, tcp, udp, unix)
    for sock in (tcp, udp, unix):
        sock.close()


def _database(scene: Scene) -> str:
    """Migrate the scene's database and grant alice the workspace; returns its URL."""
    url = f"sqlite:///{scene.db}"
    migrate = [sys.executable, "-m", "notes_server", "migrate", "--db", url]
    grant = [sys.executable, "-m", "notes_server", "workspace", "grant", "--db", url]
    grant += ["alice", WORKSPACE]
    for setup in (migrate, grant):
        subprocess.run(setup, capture_output=True, env=scene.env(), timeout=60, check=True)
    return url


def _serve(
    scene: Scene, sandbox: str, requests: list[dict[str, object]], *, cwd: Path | None = None
) -> list[dict[str, object]]:
    url = _database(scene)
    command = [sys.executable, "-m", "notes_server", "serve", "--db", url, "--principal", "alice"]
    command += ["--sandbox", sandbox, "--tools-module", "escape_tools"]
    lines = b"".join(json.dumps(request).encode() + b"\n" for request in requests)
    done = subprocess.run(
        command, input=lines, capture_output=True, env=scene.env(), timeout=60, check=True, cwd=cwd
    )
    return [json.loads(line) for line in done.stdout.decode().splitlines()]


def _call(request_id: int, name: str, arguments: dict[str, object]) -> dict[str, object]:
    params = {"name": name, "arguments": arguments, "_meta": META}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


def test_confined_server_denies_every_escape_yet_still_writes_its_database(scene: Scene) -> None:
    create = _call(2, "notes_create", {"workspaceUri": WORKSPACE, "title": "kept", "body": "b"})
    replies = _serve(scene, "require", [_call(1, "test_escape", scene.arguments()), create])
    result = replies[0]["result"]["structuredContent"]  # type: ignore[index]
    assert result == {
        "write": "denied EACCES",
        "connect": "denied EACCES",
        "write_beside_db": "denied EACCES",
        "write_home": "denied EACCES",
        "chmod": "denied EPERM",
        "utime": "denied EPERM",
        "udp_sendto": "denied EACCES",
        "unix_connect": "denied EACCES",
        "import_write": "denied EACCES",
        "thread_write": "denied EACCES",
    }
    assert sorted(p.name for p in scene.db.parent.iterdir()) == [
        "notes.db",
        "notes.db-shm",
        "notes.db-wal",
        "notes.db.state-keys",
    ]
    assert not any(scene.outside.glob("escaped*")) and not any(scene.import_dir.iterdir())
    assert stat.S_IMODE((scene.outside / "mode.txt").stat().st_mode) == 0o644
    assert (scene.outside / "times.txt").stat().st_mtime > 0
    created = replies[1]["result"]
    assert created["isError"] is False and created["structuredContent"]["note"]["title"] == "kept"  # type: ignore[index]


def test_the_same_escapes_succeed_without_the_sandbox(scene: Scene) -> None:
    replies = _serve(scene, "off", [_call(1, "test_escape", scene.arguments())])
    result = replies[0]["result"]["structuredContent"]  # type: ignore[index]
    assert result == {
        "write": "written",
        "connect": "connected",
        "write_beside_db": "written",
        "write_home": "written",
        "chmod": "changed",
        "utime": "changed",
        "udp_sendto": "sent",
        "unix_connect": "connected",
        "import_write": "written",
        "thread_write": "written",
    }
    scene.udp.settimeout(10)
    assert scene.udp.recvfrom(64)[0] == b"escaped"
    assert (scene.outside / "escaped.txt").read_text(encoding="utf-8") == "escaped"
    assert stat.S_IMODE((scene.outside / "mode.txt").stat().st_mode) == 0o600
    assert (scene.outside / "times.txt").stat().st_mtime == 0


def _serve_with_early_thread(
    scene: Scene, sandbox: str, kind: str
) -> subprocess.CompletedProcess[str]:
    url = _database(scene)
    command = [sys.executable, "-m", "notes_server", "serve", "--db", url, "--sandbox", sandbox]
    env = scene.env(EARLY_THREAD=kind, PYTHONPATH=str(FIXTURES / "early_thread"))
    return subprocess.run(command, input="", capture_output=True, text=True, env=env, timeout=60)


@pytest.mark.parametrize("kind", ["threading", "native"])
def test_require_refuses_to_serve_when_other_threads_already_exist(scene: Scene, kind: str) -> None:
    done = _serve_with_early_thread(scene, "require", kind)
    assert done.returncode == 2
    assert done.stderr == "notes-server: error: --sandbox require: other threads exist\n"
    assert done.stdout == ""


@pytest.mark.parametrize("kind", ["threading", "native"])
def test_auto_serves_unconfined_and_says_so_when_other_threads_exist(
    scene: Scene, kind: str
) -> None:
    done = _serve_with_early_thread(scene, "auto", kind)
    assert done.returncode == 0
    assert done.stderr.splitlines()[-1].endswith("| not confined: other threads exist")


def _http_post(port: int, message: dict[str, object]) -> dict[str, object]:
    params = message["params"]
    assert isinstance(params, dict)
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": str(message["method"]),
        "Mcp-Name": str(params["name"]),
    }
    body = json.dumps(message).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{port}/mcp", body, headers)
    with urllib.request.urlopen(request, timeout=60) as response:
        reply: dict[str, object] = json.loads(response.read())
    return reply


def _wait_for_workers(proc: subprocess.Popen[str], workers: int) -> int:
    """Read stderr until uvicorn reports its port and every worker has started; the port."""
    assert proc.stderr is not None
    port, started = 0, 0
    while not port or started < workers:
        line = proc.stderr.readline()
        assert line, f"server exited with {proc.wait()}"
        found = re.search(r"Uvicorn running on http://127\.0\.0\.1:(\d+)", line)
        port = int(found.group(1)) if found else port
        started += "Application startup complete" in line
    return port


def test_confined_http_workers_deny_writes_metadata_and_outgoing_tcp(scene: Scene) -> None:
    """HTTP keeps sockets (it serves over TCP): UDP and Unix connect stay open, as documented;
    outgoing TCP is Landlock's to deny. Two workers: spawned workers inherit the sandbox."""
    url = _database(scene)
    command = [sys.executable, "-m", "notes_server", "serve", "--transport", "http", "--db", url]
    command += ["--port", "0", "--workers", "2", "--auth", "none", "--principal", "alice"]
    command += ["--sandbox", "require", "--tools-module", "escape_tools"]
    with subprocess.Popen(
        command, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=scene.env()
    ) as proc:
        try:
            port = _wait_for_workers(proc, 2)
            reply = _http_post(port, _call(1, "test_escape", scene.arguments()))
        finally:
            proc.terminate()
    assert reply["result"]["structuredContent"] == {  # type: ignore[index]
        "write": "denied EACCES",
        "connect": "denied EACCES",
        "write_beside_db": "denied EACCES",
        "write_home": "denied EACCES",
        "chmod": "denied EPERM",
        "utime": "denied EPERM",
        "udp_sendto": "sent",
        "unix_connect": "connected",
        "import_write": "denied EACCES",
        "thread_write": "denied EACCES",
    }


def _mirror(scene: Scene, url: str, folder: Path) -> None:
    command = [sys.executable, "-m", "notes_server", "workspace", "mirror", "--db", url]
    command += ["alice", WORKSPACE, str(folder)]
    subprocess.run(command, capture_output=True, env=scene.env(), timeout=60, check=True)


def _read_probe(scene: Scene, vault: Path) -> dict[str, object]:
    """Reads of a secret in $HOME, one beside the mirrored folder and a file inside it, and an
    import of a standard module nothing has loaded yet."""
    (scene.home / ".ssh").mkdir()
    (scene.home / ".ssh" / "id_ed25519").write_text("home secret", "utf-8")
    (scene.outside / "secret.txt").write_text("sibling secret", "utf-8")
    paths = {
        "home secret": str(scene.home / ".ssh" / "id_ed25519"),
        "sibling secret": str(scene.outside / "secret.txt"),
        "mirrored file": str(vault / "a.md"),
    }
    writes = {"write into the mirrored folder": str(vault / "new.md")}
    return _call(1, "test_read", {"paths": paths, "writes": writes, "module": "xml.dom.minidom"})


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    folder = tmp_path / "vault"
    folder.mkdir()
    (folder / "a.md").write_text("# Alpha\n", "utf-8")
    return folder


def test_a_server_with_a_mirrored_folder_reads_only_that_folder_and_what_it_runs_on(
    scene: Scene, vault: Path
) -> None:
    url = _database(scene)
    _mirror(scene, url, vault)
    imported = _call(2, "notes_import", {"workspaceUri": WORKSPACE})
    # A confirmation seals its state with the key file, read after confinement.
    delete = _call(3, "notes_delete", {"workspaceUri": WORKSPACE, "title": "Alpha"})
    delete["params"]["_meta"] = {  # type: ignore[index]
        **META,
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
    }

    # From $HOME: `python -m` puts the working directory first on sys.path; it stays unreadable.
    replies = _serve(
        scene, "require", [_read_probe(scene, vault), imported, delete], cwd=scene.home
    )

    assert replies[0]["result"]["structuredContent"] == {  # type: ignore[index]
        "home secret": "denied EACCES",
        "sibling secret": "denied EACCES",
        "mirrored file": "read",
        "write into the mirrored folder": "denied EACCES",
        "late import": "imported",
    }
    assert replies[1]["result"]["structuredContent"] == {  # type: ignore[index]
        "imported": 1,
        "unchanged": 0,
        "skipped": 0,
        "refused": 0,
        "problems": [],
    }
    assert replies[2]["result"]["resultType"] == "input_required"  # type: ignore[index]
    assert replies[2]["result"]["requestState"]  # type: ignore[index]


def test_a_server_without_mirrored_folders_leaves_reads_open(scene: Scene, vault: Path) -> None:
    """Plain `serve` confines writes only (documented): its reads are as before."""
    replies = _serve(scene, "require", [_read_probe(scene, vault)])

    assert replies[0]["result"]["structuredContent"] == {  # type: ignore[index]
        "home secret": "read",
        "sibling secret": "read",
        "mirrored file": "read",
        "write into the mirrored folder": "denied EACCES",
        "late import": "imported",
    }


def test_confined_http_workers_with_a_mirrored_folder_read_only_that_folder(
    scene: Scene, vault: Path
) -> None:
    """Spawned workers start a new interpreter under the inherited sandbox: it must find
    everything it loads among the places left readable."""
    url = _database(scene)
    _mirror(scene, url, vault)
    command = [sys.executable, "-m", "notes_server", "serve", "--transport", "http", "--db", url]
    command += ["--port", "0", "--workers", "2", "--auth", "none", "--principal", "alice"]
    command += ["--sandbox", "require", "--tools-module", "escape_tools"]
    with subprocess.Popen(
        command, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=scene.env()
    ) as proc:
        try:
            port = _wait_for_workers(proc, 2)
            read = _http_post(port, _read_probe(scene, vault))
            imported = _http_post(port, _call(2, "notes_import", {"workspaceUri": WORKSPACE}))
        finally:
            proc.terminate()
    assert read["result"]["structuredContent"] == {  # type: ignore[index]
        "home secret": "denied EACCES",
        "sibling secret": "denied EACCES",
        "mirrored file": "read",
        "write into the mirrored folder": "denied EACCES",
        "late import": "imported",
    }
    assert imported["result"]["structuredContent"]["imported"] == 1  # type: ignore[index]


def test_a_folder_mirrored_after_the_server_started_is_refused_until_a_restart(
    scene: Scene, vault: Path, tmp_path: Path
) -> None:
    """Reads are confined to the folders mirrored at start (documented): a later mirror is not
    readable by the running server, and is once it restarts."""
    url = _database(scene)
    _mirror(scene, url, vault)
    later = tmp_path / "later"
    later.mkdir()
    (later / "b.md").write_text("# Beta\n", "utf-8")
    other = "file:///home/alice/other"
    grant = [sys.executable, "-m", "notes_server", "workspace", "grant", "--db", url]
    subprocess.run([*grant, "alice", other], env=scene.env(), timeout=60, check=True)
    command = [sys.executable, "-m", "notes_server", "serve", "--db", url, "--principal", "alice"]
    command += ["--sandbox", "require"]
    first = _call(1, "notes_import", {"workspaceUri": WORKSPACE})
    imported = _call(2, "notes_import", {"workspaceUri": other})
    with (tmp_path / "stderr.log").open("wb") as stderr:
        proc = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, env=scene.env()
        )
    server = ServerProcess(proc, tmp_path / "stderr.log")
    try:
        # A reply means the server is serving, so it confined itself before reading stdin.
        server.send(first)
        assert server.read()["result"]["structuredContent"]["imported"] == 1
        move = [sys.executable, "-m", "notes_server", "workspace", "mirror", "--db", url]
        subprocess.run([*move, "alice", other, str(later)], env=scene.env(), timeout=60, check=True)
        server.send(imported)
        refused = server.read()
    finally:
        assert server.close() == 0
    after_restart = _serve(scene, "require", [imported])
    banner = server.stderr_text().splitlines()[0]
    assert banner.endswith("+ seccomp | reads: 1 mirrored folder(s) as of start"), banner

    assert refused["result"]["isError"] is True
    assert "readable once the server restarts" in refused["result"]["content"][0]["text"]
    assert after_restart[0]["result"]["structuredContent"]["imported"] == 1  # type: ignore[index]


def test_a_confined_http_server_with_mirrors_still_reads_its_jwks_file(
    scene: Scene, vault: Path, tmp_path: Path
) -> None:
    """The JWKS file is loaded when a worker builds the app, after confinement."""
    from cryptography.hazmat.primitives.asymmetric import rsa

    numbers = rsa.generate_private_key(public_exponent=65537, key_size=2048).public_key()
    n, e = numbers.public_numbers().n, numbers.public_numbers().e

    def b64(value: int) -> str:
        raw = value.to_bytes((value.bit_length() + 7) // 8, "big")
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    jwks = tmp_path / "keys" / "jwks.json"
    jwks.parent.mkdir()
    jwks.write_text(json.dumps({"keys": [{"kty": "RSA", "n": b64(n), "e": b64(e)}]}), "utf-8")
    url = _database(scene)
    _mirror(scene, url, vault)
    command = [sys.executable, "-m", "notes_server", "serve", "--transport", "http", "--db", url]
    command += ["--port", "0", "--auth", "token", "--sandbox", "require"]
    command += ["--jwt-issuer", "https://issuer.example", "--jwt-audience", "notes"]
    command += ["--jwt-jwks", str(jwks)]
    with subprocess.Popen(
        command, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=scene.env()
    ) as proc:
        try:
            port = _wait_for_workers(proc, 1)
            with pytest.raises(urllib.error.HTTPError) as refused:
                _http_post(port, _call(1, "notes_search", {"workspaceUri": WORKSPACE}))
        finally:
            proc.terminate()
    refused.value.close()
    assert refused.value.code == 401
