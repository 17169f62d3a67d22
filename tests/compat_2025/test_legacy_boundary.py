"""Nothing legacy leaks inward: only the composition root (stdio connections and HTTP sessions)
composes the adapter into the server."""

from __future__ import annotations

import ast
from pathlib import Path

import notes_server

PACKAGE = Path(next(iter(notes_server.__path__)))
ALLOWED = {PACKAGE / "app.py"}


def imports_adapter(path: Path) -> bool:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            names = [base, *(f"{base}.{alias.name}" for alias in node.names)]
            if node.level:
                names += [alias.name for alias in node.names]
        if any(name == "compat_2025" or ".compat_2025" in name for name in names):
            return True
    return False


def test_the_walker_sees_absolute_and_relative_imports(tmp_path: Path) -> None:
    samples = {
        "a.py": "from notes_server.compat_2025.connection import X\n",
        "b.py": "def f():\n    from .. import compat_2025\n",
        "c.py": "import notes_server.compat_2025\n",
        "d.py": "from notes_server.protocol import dispatch\n",
    }
    for name, source in samples.items():
        (tmp_path / name).write_text(source, encoding="utf-8")

    found = {name for name in samples if imports_adapter(tmp_path / name)}

    assert found == {"a.py", "b.py", "c.py"}


def test_only_the_command_line_imports_the_legacy_adapter() -> None:
    outside = [
        path
        for path in sorted(PACKAGE.rglob("*.py"))
        if "compat_2025" not in path.relative_to(PACKAGE).parts and path not in ALLOWED
    ]
    assert len(outside) > 20

    assert [str(p.relative_to(PACKAGE)) for p in outside if imports_adapter(p)] == []
