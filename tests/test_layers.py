"""The dependency direction is a tested contract: cli -> app -> transports -> protocol -> tools
-> folders -> (security | store) -> neutral modules, and no import cycles anywhere in
`notes_server`.

Every import statement counts, lazy ones inside functions and typing-only ones included: each
says that one module needs another.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import notes_server

PACKAGE = Path(next(iter(notes_server.__path__)))
# Higher ranks may import lower ones; a layer may import itself. Security and store share a
# rank but must not import each other (the store persists, security decides). The legacy
# adapter and the `call` client live at the edge with the transports; MCP Apps and the
# extension seam they plug into are tools, and so are prompts (tools' sibling seam) and
# the built-in authorization server.
EDGE = {
    "compat_2025": "transports",
    "client": "transports",
    "apps": "tools",
    "extensions": "tools",
    "approval": "tools",
    "prompts": "tools",
    # The built-in authorization server: routes and pages like the approval page's.
    "oauth": "tools",
}
RANKS = {
    "cli": 7,
    "app": 6,
    "transports": 5,
    "protocol": 4,
    "tools": 3,
    "folders": 2,
    "security": 1,
    "store": 1,
    "neutral": 0,
}


def layer_of(module: str) -> str:
    parts = module.split(".")[1:]
    if not parts:
        return "neutral"
    head = parts[0]
    if head == "__main__" or head == "cli" or head.startswith("cli_"):
        return "cli"
    if head in EDGE:
        return EDGE[head]
    if head in RANKS:
        return head
    return "neutral"


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(path: Path, root: Path, known: set[str]) -> set[str]:
    """The package's own modules that `path` imports, anywhere in its body."""
    this = module_name(path, root)
    package = this if path.name == "__init__.py" else this.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        candidates: list[str] = []
        if isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            candidates = [f"{base}.{alias.name}" for alias in node.names] + [base]
        for name in candidates:
            while name and name not in known and "." in name:
                name = name.rsplit(".", 1)[0]
            if name in known and name != this:
                found.add(name)
                break
    return found


def import_graph(root: Path) -> dict[str, set[str]]:
    files = sorted(root.rglob("*.py"))
    known = {module_name(f, root) for f in files}
    return {module_name(f, root): imported_modules(f, root, known) for f in files}


def violations(graph: dict[str, set[str]]) -> list[str]:
    found = []
    for module, targets in sorted(graph.items()):
        for target in sorted(targets):
            source_layer, target_layer = layer_of(module), layer_of(target)
            if source_layer == target_layer:
                continue
            upward = RANKS[target_layer] > RANKS[source_layer]
            sideways = RANKS[target_layer] == RANKS[source_layer]
            if upward or sideways:
                found.append(f"{module} ({source_layer}) imports {target} ({target_layer})")
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    result: list[list[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    result.append(sorted(component))
    return result


def _package(tmp_path: Path, sources: dict[str, str]) -> Path:
    root = tmp_path / "notes_server"
    for name, source in {"__init__.py": "", **sources}.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.parent != root and not (path.parent / "__init__.py").exists():
            (path.parent / "__init__.py").write_text("", encoding="utf-8")
        path.write_text(source, encoding="utf-8")
    return root


def test_the_walker_sees_lazy_relative_and_typing_only_imports(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "tools/base.py": "def f():\n    from notes_server.protocol import envelope\n",
            "tools/other.py": "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n    from ..store import notes\n",
            "protocol/envelope.py": "from . import meta\n",
            "protocol/meta.py": "import notes_server.tools.base\n",
            "store/notes.py": "",
        },
    )

    graph = import_graph(root)

    assert graph["notes_server.tools.base"] == {"notes_server.protocol.envelope"}
    assert graph["notes_server.tools.other"] == {"notes_server.store.notes"}
    assert graph["notes_server.protocol.envelope"] == {"notes_server.protocol.meta"}
    assert violations(graph) == [
        "notes_server.tools.base (tools) imports notes_server.protocol.envelope (protocol)"
    ]
    assert cycles(graph) == [
        ["notes_server.protocol.envelope", "notes_server.protocol.meta", "notes_server.tools.base"]
    ]


@pytest.mark.parametrize(
    ("source", "target"),
    [("security/a.py", "notes_server.store.b"), ("store/b.py", "notes_server.security.a")],
)
def test_security_and_store_may_not_import_each_other(
    tmp_path: Path, source: str, target: str
) -> None:
    files = {"security/a.py": "", "store/b.py": ""}
    files[source] = f"import {target}\n"

    assert len(violations(import_graph(_package(tmp_path, files)))) == 1


def test_every_import_in_the_package_points_down_the_layers() -> None:
    graph = import_graph(PACKAGE)
    assert len(graph) > 60

    assert violations(graph) == []


def test_the_package_has_no_import_cycles() -> None:
    assert cycles(import_graph(PACKAGE)) == []
