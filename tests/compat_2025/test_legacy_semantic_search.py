"""Hybrid search through a real `serve` over stdio, by a 2025-11-25 host: the background
indexer embeds what was written, and notes_search fuses keyword and semantic matches; a
missing embedding model is one line at start. Needs the `semantic` extra."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from notes_server.store import embedding
from tests.compat_2025.legacy_support import NOTES, Legacy
from tests.helpers import subprocess_env

pytestmark = pytest.mark.skipif(not embedding.installed(), reason="needs the semantic extra")


def test_a_note_is_found_by_meaning_once_the_background_indexer_embedded_it(
    legacy: Legacy,
) -> None:
    client = legacy()
    client.initialize()
    for title, body in [
        ("Finance sync", "# Q3\n\nQ3 spend review with the finance team."),
        ("Recipes", "# Pie\n\napple pie with cinnamon"),
    ]:
        made = client.tool(
            "notes_create",
            {"workspaceUri": NOTES, "title": title, "path": f"{title}.md", "body": body},
        )
        assert made["isError"] is False
    listed = client.result("tools/list", {})
    (tool,) = [t for t in listed["tools"] if t["name"] == "notes_search"]
    assert "hybrid" in tool["description"]
    # Wait for the indexer through the tool itself (a condition, bounded): semantic appears.
    deadline = time.monotonic() + 60
    while True:
        result = client.tool("notes_search", {"workspaceUri": NOTES, "query": "budget spending"})
        hits = result["structuredContent"]["notes"]
        if (hits and "semantic" in hits[0]["matchedBy"]) or time.monotonic() > deadline:
            break
    assert hits[0]["title"] == "Finance sync"
    assert hits[0]["matchedBy"] == ["semantic"]
    assert hits[0]["section"] == "Q3"
    assert isinstance(hits[0]["score"], float)
    keyword = client.tool(
        "notes_search", {"workspaceUri": NOTES, "query": "budget spending", "mode": "keyword"}
    )
    assert keyword["structuredContent"]["notes"] == []


def test_a_damaged_model_is_one_line_at_start(tmp_path: Path) -> None:
    fake = tmp_path / "site" / "static_model"
    (fake / "model").mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "model" / "config.json").write_text("{}")
    env = subprocess_env(tmp_path, {"PYTHONPATH": str(tmp_path / "site")})
    done = subprocess.run(
        [sys.executable, "-m", "notes_server", "serve", "--db", f"sqlite:///{tmp_path}/n.db"],
        env=env,
        input=b"",
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stdout == b""
    lines = done.stderr.decode().strip().splitlines()
    assert lines == [
        "notes-server: error: NOTES_SERVER_SEMANTIC: the embedding model of "
        "tokenlearn-static-model is incomplete (model.safetensors missing or empty): reinstall "
        "it; it is never downloaded at run time"
    ]


def test_semantic_required_but_not_installed_is_one_line_at_start(tmp_path: Path) -> None:
    blocker = tmp_path / "site"
    blocker.mkdir()
    # A module finder that hides the extra, as on a machine without it.
    (blocker / "sitecustomize.py").write_text(
        "import sys\n"
        "class _Hide:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'static_model':\n"
        "            raise ModuleNotFoundError(name)\n"
        "sys.meta_path.insert(0, _Hide())\n"
    )
    env = subprocess_env(tmp_path, {"PYTHONPATH": str(blocker), "NOTES_SERVER_SEMANTIC": "on"})
    done = subprocess.run(
        [sys.executable, "-m", "notes_server", "serve", "--db", f"sqlite:///{tmp_path}/n.db"],
        env=env,
        input=b"",
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "needs the 'semantic' extra" in done.stderr.decode()
