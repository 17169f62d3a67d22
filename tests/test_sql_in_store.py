"""SQL and driver knowledge live in `store/` only, and the layers under the transports never look
at the backend: a tested contract, so a Core statement, a PRAGMA or an `if sqlite` cannot creep
back into a tool, the protocol, a feature or security.

Outside `notes_server/store/` no module imports a database driver or SQLAlchemy (except the
`Connection` and `Engine` names, which tools receive from `store.engine` helpers and annotate),
holds SQL text, or executes statements itself. In the protocol, the tools, the features and
security, no code reads which backend is configured (`sqlite_path`, `dialect`, ...): those ask
the store (`store.engine.runs_on_loop`, `store.faults.database_fault`, ...).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import notes_server

PACKAGE = Path(next(iter(notes_server.__path__)))
DRIVERS = frozenset({"sqlite3", "psycopg", "psycopg2", "sqlalchemy"})
# What tools may name from SQLAlchemy: the objects `store.engine` hands them, for annotations.
HANDED_OUT = frozenset({"Connection", "Engine"})
EXECUTING = frozenset({"execute", "executemany", "executescript", "exec_driver_sql"})
# A string that is a statement: starts with a SQL verb, or names a PRAGMA anywhere.
SQL_TEXT = re.compile(
    r"^\s*(SELECT|INSERT|UPDATE|DELETE|PRAGMA|BEGIN|COMMIT|ROLLBACK|CREATE|DROP|ALTER|WITH"
    r"|VACUUM|SAVEPOINT|SET)\s|\bPRAGMA\s"
)
# Attributes that tell which backend is configured or how it connects.
BACKEND = frozenset({"sqlite_path", "is_sqlite", "backend", "dialect", "driver_connection"})
# Top folders that must never look at the backend (the layers below the transports, features
# under their current names and under features/).
BACKEND_BLIND = frozenset(
    {
        "protocol",
        "tools",
        "features",
        "apps",
        "approval",
        "folders",
        "oauth",
        "prompts",
        "extensions",
        "security",
    }
)
# Files outside store/ that may still hold driver knowledge, and why. An entry whose file is
# clean fails the test (remove it); a file that moved is checked at its new place.
KNOWN = {
    # The database URL grammar for `config` (a neutral module the store cannot serve): SQLAlchemy's
    # `make_url` for server URLs. No statement, no connection.
    "dburl.py": "URL parsing",
}


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def findings(source: str, *, backend_blind: bool) -> list[str]:
    """What in `source` (one module outside store/) is SQL, driver or backend knowledge."""
    tree = ast.parse(source)
    docstrings = _docstrings(tree)
    found: list[str] = []
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Import):
            found += [
                f"{line}: imports {alias.name}"
                for alias in node.names
                if alias.name.split(".")[0] in DRIVERS
            ]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names = {alias.name for alias in node.names}
            handed_out = node.module == "sqlalchemy" and names <= HANDED_OUT
            if node.module.split(".")[0] in DRIVERS and not handed_out:
                found.append(f"{line}: imports {', '.join(sorted(names))} from {node.module}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if id(node) not in docstrings and SQL_TEXT.search(node.value):
                found.append(f"{line}: SQL text {node.value[:40]!r}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in EXECUTING:
                found.append(f"{line}: runs a statement (.{node.func.attr})")
        elif isinstance(node, ast.Attribute) and backend_blind and node.attr in BACKEND:
            found.append(f"{line}: looks at the backend (.{node.attr})")
    return found


def package_findings(root: Path) -> dict[str, list[str]]:
    """Per module path (relative to the package) outside store/, its findings."""
    result = {}
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root).as_posix()
        top = relative.split("/")[0]
        if top == "store":
            continue
        found = findings(path.read_text(encoding="utf-8"), backend_blind=top in BACKEND_BLIND)
        if found:
            result[relative] = found
    return result


def test_no_module_outside_the_store_holds_sql_driver_or_backend_knowledge() -> None:
    found = package_findings(PACKAGE)

    unexpected = {path: lines for path, lines in found.items() if path not in KNOWN}
    assert unexpected == {}
    stale = [path for path in KNOWN if (PACKAGE / path).exists() and path not in found]
    assert stale == []


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from sqlalchemy import select\n", ["1: imports select from sqlalchemy"]),
        ("from sqlalchemy.sql import text\n", ["1: imports text from sqlalchemy.sql"]),
        ("import sqlite3\n", ["1: imports sqlite3"]),
        ("import psycopg.errors\n", ["1: imports psycopg.errors"]),
        ("def f(conn):\n    conn.execute(q)\n", ["2: runs a statement (.execute)"]),
        ("Q = 'SELECT id FROM notes'\n", ["1: SQL text 'SELECT id FROM notes'"]),
        ("Q = 'pragma: PRAGMA data_version'\n", ["1: SQL text 'pragma: PRAGMA data_version'"]),
        (
            "def f(s):\n    return s.sqlite_path is None\n",
            ["2: looks at the backend (.sqlite_path)"],
        ),
        ("def f(c):\n    return c.dialect.name\n", ["2: looks at the backend (.dialect)"]),
    ],
)
def test_the_check_finds_statements_drivers_sql_text_and_backend_branches(
    source: str, expected: list[str]
) -> None:
    assert findings(source, backend_blind=True) == expected


def test_the_check_allows_handed_out_connections_docstrings_and_words() -> None:
    source = (
        '"""Reads the PRAGMA data_version through the store."""\n'
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from sqlalchemy import Connection, Engine\n"
        "def f(conn: 'Connection') -> str:\n"
        '    """SELECT nothing here: a docstring."""\n'
        "    return 'Select a workspace, then update the note'\n"
    )

    assert findings(source, backend_blind=True) == []


def test_only_the_layers_below_the_transports_are_blind_to_the_backend(tmp_path: Path) -> None:
    root = tmp_path / "notes_server"
    branch = "def f(settings):\n    return settings.sqlite_path\n"
    for module in ("tools/read.py", "cli/sandbox.py", "store/engine.py"):
        (root / module).parent.mkdir(parents=True, exist_ok=True)
        (root / module).write_text(branch, encoding="utf-8")

    assert package_findings(root) == {"tools/read.py": ["2: looks at the backend (.sqlite_path)"]}
