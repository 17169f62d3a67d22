"""The tree is the layer diagram, and the direction is a tested contract: cli -> app ->
compat_2025 -> transports -> protocol -> features -> tools -> (security | store) -> neutral
base modules; no import cycles between modules, nor between top-level packages.

The 2025-11-25 adapter sits above the transports: `app` hands it to them (a stdio connection
factory, an HTTP session handler), so no transport imports it, and it holds its conversations
with their stdio framing, worker threads and SSE relay.

A module's layer is the name of its top folder under `notes_server/`, nothing else: any other
top-level module or package is a neutral base module, which may import only neutral ones.
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
# rank but must not import each other (the store persists, security decides).
RANKS = {
    "cli": 8,
    "app": 7,
    "compat_2025": 6,
    "transports": 5,
    "protocol": 4,
    "features": 3,
    "tools": 2,
    "security": 1,
    "store": 1,
}
NEUTRAL = "neutral"
RANK_OF_NEUTRAL = 0


def top_of(module: str) -> str:
    """`notes_server.X....` -> X (the package itself is its own top)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def layer_of(module: str) -> str:
    head = top_of(module)
    if head == "__main__":  # `python -m notes_server` is the command line
        return "cli"
    return head if head in RANKS else NEUTRAL


def rank_of(layer: str) -> int:
    return RANK_OF_NEUTRAL if layer == NEUTRAL else RANKS[layer]


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
            upward = rank_of(target_layer) > rank_of(source_layer)
            sideways = rank_of(target_layer) == rank_of(source_layer)
            if upward or sideways:
                found.append(f"{module} ({source_layer}) imports {target} ({target_layer})")
    return found


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The module graph seen from the top: `notes_server.X -> notes_server.Y` when any module
    under X imports any module under Y (X != Y)."""
    packages: dict[str, set[str]] = {}
    for module, targets in graph.items():
        source = top_of(module)
        packages.setdefault(source, set())
        for target in targets:
            packages.setdefault(top_of(target), set())
            if top_of(target) != source:
                packages[source].add(top_of(target))
    return packages


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
    ("module", "layer"),
    [
        ("notes_server.__main__", "cli"),
        ("notes_server.cli.main", "cli"),
        ("notes_server.cli.client.session", "cli"),
        ("notes_server.app", "app"),
        ("notes_server.transports.stdio", "transports"),
        ("notes_server.compat_2025.translate", "compat_2025"),
        ("notes_server.protocol.server", "protocol"),
        ("notes_server.features.purge.tool", "features"),
        ("notes_server.features.extension", "features"),
        ("notes_server.tools.read", "tools"),
        ("notes_server.security.uri", "security"),
        ("notes_server.store.notes", "store"),
        ("notes_server.config", "neutral"),
        ("notes_server.markup.links", "neutral"),
        ("notes_server", "neutral"),
    ],
)
def test_a_module_is_in_the_layer_its_top_folder_names(module: str, layer: str) -> None:
    assert layer_of(module) == layer


@pytest.mark.parametrize(
    ("source", "target"),
    [
        ("security/a.py", "notes_server.store.b"),
        ("store/b.py", "notes_server.security.a"),
        ("tools/c.py", "notes_server.features.d"),
        ("transports/f.py", "notes_server.compat_2025.e"),
        ("values.py", "notes_server.store.b"),
        ("markup/g.py", "notes_server.tools.c"),
    ],
)
def test_an_import_sideways_or_up_the_layers_is_refused(
    tmp_path: Path, source: str, target: str
) -> None:
    files = {
        "security/a.py": "",
        "store/b.py": "",
        "tools/c.py": "",
        "features/d.py": "",
        "compat_2025/e.py": "",
        "transports/f.py": "",
        "values.py": "",
        "markup/g.py": "",
    }
    files[source] = f"import {target}\n"

    found = violations(import_graph(_package(tmp_path, files)))

    assert len(found) == 1
    assert found[0].startswith(f"notes_server.{source.removesuffix('.py').replace('/', '.')} (")


def test_a_neutral_module_may_import_another_neutral_one(tmp_path: Path) -> None:
    files = {"values.py": "from notes_server import jsontext\n", "jsontext.py": ""}

    assert violations(import_graph(_package(tmp_path, files))) == []


def test_a_cycle_between_top_level_packages_is_found_without_a_module_cycle(
    tmp_path: Path,
) -> None:
    root = _package(
        tmp_path,
        {
            "tools/a.py": "from notes_server.features import b\n",
            "features/b.py": "",
            "features/c.py": "from notes_server.tools import d\n",
            "tools/d.py": "",
        },
    )

    graph = import_graph(root)

    assert cycles(graph) == []
    assert package_graph(graph)["tools"] == {"features"}
    assert cycles(package_graph(graph)) == [["features", "tools"]]


def test_every_import_in_the_package_points_down_the_layers() -> None:
    graph = import_graph(PACKAGE)
    assert len(graph) > 60

    assert violations(graph) == []


def test_the_package_has_no_import_cycles() -> None:
    assert cycles(import_graph(PACKAGE)) == []


def test_the_top_level_packages_have_no_import_cycles() -> None:
    packages = package_graph(import_graph(PACKAGE))
    assert {"cli", "app", "features", "tools", "store"} <= set(packages)

    assert cycles(packages) == []
