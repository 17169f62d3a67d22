"""The one hole `--auth oauth` opens in the HTTP sandbox: outgoing TCP to the metadata
document port (443), nothing else; `--oauth-dev-addresses` opens outgoing TCP entirely."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from notes_server.security.sandbox import abi_version, policy_for

PROBE = """
import json, socket, sys
from notes_server.security import landlock
allowed, other = int(sys.argv[1]), int(sys.argv[2])
landlock.restrict([], deny_bind=False, deny_connect=True, connect_ports=(allowed,))
seen = {}
for name, port in (("allowed", allowed), ("other", other)):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
        seen[name] = "connected"
    except PermissionError:
        seen[name] = "denied"
print(json.dumps(seen))
"""


@pytest.mark.skipif(abi_version() < 4, reason="needs Landlock ABI >= 4 (TCP rules)")
def test_a_connect_port_rule_opens_that_port_only() -> None:
    listeners = []
    for _ in range(2):
        server = socket.socket()
        server.bind(("127.0.0.1", 0))
        server.listen(2)
        listeners.append(server)
    ports = [str(s.getsockname()[1]) for s in listeners]
    try:
        done = subprocess.run(
            [sys.executable, "-c", PROBE, *ports], capture_output=True, timeout=60, check=True
        )
    finally:
        for server in listeners:
            server.close()
    assert json.loads(done.stdout) == {"allowed": "connected", "other": "denied"}


def test_the_http_policy_opens_only_the_ports_it_is_given() -> None:
    db = Path("/tmp/notes.db")
    plain = policy_for(db, transport="http")
    assert (plain.tcp_connect, plain.connect_ports) == (False, ())
    oauth = policy_for(db, transport="http", connect_ports=(443,))
    assert (oauth.tcp_connect, oauth.connect_ports) == (False, (443,))
    dev = policy_for(db, transport="http", connect_ports=None)
    assert dev.tcp_connect is True
