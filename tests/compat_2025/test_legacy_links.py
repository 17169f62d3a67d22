"""The link and tag tools through the 2025-11-25 adapter, in a real `serve` process."""

from __future__ import annotations

from typing import Any

from tests.compat_2025.legacy_support import NOTES, Legacy


def structured(result: dict[str, Any]) -> dict[str, Any]:
    assert result["isError"] is False, result
    content: dict[str, Any] = result["structuredContent"]
    return content


def test_links_tags_and_a_rename_work_for_a_2025_host(legacy: Legacy) -> None:
    client = legacy()
    client.initialize()
    tools = {tool["name"]: tool for tool in client.result("tools/list")["tools"]}
    assert tools["notes_links"]["outputSchema"]["type"] == "object"
    assert "tags" in tools["notes_search"]["inputSchema"]["properties"]
    assert "updateLinks" in tools["notes_update"]["inputSchema"]["properties"]

    target = structured(
        client.tool("notes_create", {"workspaceUri": NOTES, "title": "Plan", "body": "#Q3"})
    )["note"]
    source = structured(
        client.tool("notes_create", {"workspaceUri": NOTES, "title": "Src", "body": "[[Plan]] #q3"})
    )["note"]
    renamed = structured(
        client.tool(
            "notes_update", {"workspaceUri": NOTES, "noteId": target["id"], "title": "Plan v2"}
        )
    )
    links = structured(client.tool("notes_links", {"workspaceUri": NOTES, "noteId": target["id"]}))
    tags = structured(client.tool("notes_tags", {"workspaceUri": NOTES}))

    assert [r["id"] for r in renamed["rewritten"]] == [source["id"]]
    assert [(i["id"], i["links"]) for i in links["incoming"]] == [(source["id"], 1)]
    assert "[[Plan v2]]" in links["incoming"][0]["context"]
    assert tags == {"tags": [{"tag": "Q3", "notes": 2}], "total": 1}
