"""A 2025-11-25 stdio session's `resources/subscribe` / `unsubscribe` with a real `serve`
process: `{}` answers, `notifications/resources/updated` (no subscription id) for a note
changed by another process, `list_changed` for a note added, nothing after unsubscribing
or about another principal's note; bad URIs are -32602."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import Engine

from tests.compat_2025.legacy_support import NOTES, Legacy, LegacyClient
from tests.helpers import ServerProcess
from tests.transports.subscription_support import insert, touch

BOBS = "file:///home/bob/notes"


def test_a_session_hears_its_subscribed_note_and_list_changes(
    legacy: Legacy, migrated_engine: Engine
) -> None:
    note = insert(migrated_engine, NOTES, "plan.md")
    client = legacy()
    client.initialize()

    subscribed = client.result("resources/subscribe", {"uri": f"{NOTES}/plan.md"})
    touch(migrated_engine, note)
    changed = client.read()
    insert(migrated_engine, NOTES, "new.md")
    listed = client.read()

    assert subscribed == {}
    assert changed == {
        "jsonrpc": "2.0",
        "method": "notifications/resources/updated",
        "params": {"uri": f"{NOTES}/plan.md"},
    }
    assert listed == {"jsonrpc": "2.0", "method": "notifications/resources/list_changed"}


def test_after_unsubscribing_a_note_is_silent_and_others_are_never_heard(
    legacy: Legacy, migrated_engine: Engine, grant: object
) -> None:
    first, second = insert(migrated_engine, NOTES, "a.md"), insert(migrated_engine, NOTES, "b.md")
    bobs = insert(migrated_engine, BOBS, "secret.md")
    client = legacy()
    client.initialize()
    client.result("resources/subscribe", {"uri": f"{NOTES}/a.md"})
    client.result("resources/subscribe", {"uri": f"{NOTES}/b.md"})
    client.result("resources/subscribe", {"uri": f"{BOBS}/secret.md"})

    assert client.result("resources/unsubscribe", {"uri": f"{NOTES}/a.md"}) == {}
    touch(migrated_engine, first)
    touch(migrated_engine, bobs)
    touch(migrated_engine, second)  # the marker

    assert client.read()["params"] == {"uri": f"{NOTES}/b.md"}


def test_a_subscription_to_no_note_uri_is_invalid_params(legacy: Legacy) -> None:
    client = legacy()
    client.initialize()

    reply = client.request("resources/subscribe", {"uri": "https://example.com/x"})

    assert reply["error"]["code"] == -32602
    assert reply["error"]["message"] == "Invalid params: not a note URI"


@pytest.mark.usefixtures("migrated_engine")
def test_a_session_subscribes_to_a_uri_of_a_static_resource_scheme(
    spawn_server: Callable[..., ServerProcess],
) -> None:
    """A `--tools-module` whose `test:` resources never change (the conformance fixtures):
    their URIs are accepted, and nothing ever fires for them."""
    fixtures = ("--sandbox", "off", "--tools-module", "tests.conformance.fixture_resources")
    root = str(Path(__file__).resolve().parents[2])
    process = spawn_server(*fixtures, env={"PYTHONPATH": root})
    client = LegacyClient(process)
    client.initialize()

    subscribed = client.result("resources/subscribe", {"uri": "test://watched-resource"})
    unsubscribed = client.result("resources/unsubscribe", {"uri": "test://watched-resource"})
    refused = client.request("resources/subscribe", {"uri": "https://example.com/x"})

    assert subscribed == {} and unsubscribed == {}
    assert refused["error"]["message"] == "Invalid params: not a note URI"
