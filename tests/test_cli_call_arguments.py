"""`notes-server call --arg KEY=VALUE` converts each value by the tool's inputSchema (a real
`call` process that spawns a real `serve`): string properties keep what was typed, numbers and
booleans are parsed strictly, arrays and objects need JSON, `--json` is sent as written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import default_db_url
from tests.test_cli_call import OLDER, WS, prepare, run_call


@pytest.fixture
def url(tmp_path: Path) -> str:
    url = default_db_url(tmp_path)
    prepare(url)
    return url


def call(tmp_path: Path, url: str, tool: str, *argv: str) -> tuple[int, str, str]:
    run = run_call(tmp_path, tool, "--db", url, "--principal", "alice", *argv)
    return run.returncode, run.stdout, run.stderr


@pytest.mark.parametrize("typed", ["2024", "true", "null", "[1]", "{}", "-7"])
def test_a_string_property_keeps_what_was_typed(tmp_path: Path, url: str, typed: str) -> None:
    status, out, err = call(
        tmp_path, url, "notes_create", "--arg", f"workspaceUri={WS}", "--arg", f"title={typed}"
    )

    assert status == 0, err
    assert json.loads(out)["note"]["title"] == typed


def test_a_query_of_digits_searches_for_the_digits(tmp_path: Path, url: str) -> None:
    prepare(url, ("Budget 2024", "budget.md", OLDER))

    status, out, err = call(
        tmp_path, url, "notes_search", "--arg", f"workspaceUri={WS}", "--arg", "query=2024"
    )

    assert status == 0, err
    assert [hit["title"] for hit in json.loads(out)["notes"]] == ["Budget 2024"]


def test_integer_and_boolean_properties_are_parsed(tmp_path: Path, url: str) -> None:
    prepare(url, ("One", "one.md", OLDER), ("Two", "two.md", OLDER))

    status, out, err = call(
        tmp_path,
        url,
        "notes_search",
        "--arg",
        f"workspaceUri={WS}",
        "--arg",
        "limit=1",
        "--arg",
        "includeArchived=false",
    )

    assert status == 0, err
    found = json.loads(out)
    assert len(found["notes"]) == 1 and "nextCursor" in found


@pytest.mark.parametrize(
    ("arg", "message"),
    [
        ("limit=ten", "Error: Invalid value for --arg: limit must be an integer, got 'ten'"),
        ("limit=1.0", "Error: Invalid value for --arg: limit must be an integer, got '1.0'"),
        ("limit= 1", "Error: Invalid value for --arg: limit must be an integer, got ' 1'"),
        (
            "includeArchived=yes",
            "Error: Invalid value for --arg: includeArchived must be true or false, got 'yes'",
        ),
    ],
    ids=["word", "decimal", "space", "yes"],
)
def test_a_value_that_does_not_fit_the_schema_is_refused_before_the_call(
    tmp_path: Path, url: str, arg: str, message: str
) -> None:
    status, out, err = call(
        tmp_path, url, "notes_search", "--arg", f"workspaceUri={WS}", "--arg", arg
    )

    assert status == 2
    assert out == ""
    assert message in err
    assert "Traceback" not in err


def test_json_is_sent_as_written_and_an_arg_wins_over_it(tmp_path: Path, url: str) -> None:
    status, out, err = call(
        tmp_path,
        url,
        "notes_create",
        "--json",
        json.dumps({"workspaceUri": WS, "title": "from json", "body": "kept"}),
        "--arg",
        "title=2025",
    )

    assert status == 0, err
    created = json.loads(out)["note"]
    assert (created["title"], created["path"]) == ("2025", "2025.md")


def test_json_with_a_number_for_a_string_gets_the_servers_schema_error(
    tmp_path: Path, url: str
) -> None:
    status, out, err = call(
        tmp_path, url, "notes_create", "--json", json.dumps({"workspaceUri": WS, "title": 2024})
    )

    assert status == 1
    assert out == ""
    assert (
        "Error: error -32602: Invalid arguments for notes_create: "
        "arguments.title must be of type string"
    ) in err


def test_array_and_object_properties_need_json() -> None:
    from notes_server.cli.client.arguments import ArgumentTypeError, convert_arguments

    schema = {
        "properties": {
            "tags": {"type": "array"},
            "opts": {"type": "object"},
            "ratio": {"type": "number"},
            "maybe": {"type": ["integer", "null"]},
        }
    }

    assert convert_arguments(
        {"tags": '["a", 1]', "opts": '{"k": true}', "ratio": "-1.5e3", "maybe": "null"}, schema
    ) == {"tags": ["a", 1], "opts": {"k": True}, "ratio": -1500.0, "maybe": None}
    with pytest.raises(ArgumentTypeError, match=r"^tags must be a JSON array, got 'a,b'$"):
        convert_arguments({"tags": "a,b"}, schema)
    with pytest.raises(ArgumentTypeError, match=r"^opts must be a JSON object, got '\[\]'$"):
        convert_arguments({"opts": "[]"}, schema)
    with pytest.raises(ArgumentTypeError, match=r"^ratio must be a number, got 'NaN'$"):
        convert_arguments({"ratio": "NaN"}, schema)
    with pytest.raises(ArgumentTypeError, match=r"^maybe must be an integer or null, got ''$"):
        convert_arguments({"maybe": ""}, schema)


def test_help_says_how_arg_values_are_converted(tmp_path: Path) -> None:
    run = run_call(tmp_path, "--help")

    text = " ".join(run.stdout.split())
    assert "converted by the tool's inputSchema" in text
    assert "title=2024 is the text 2024" in text
    assert "array and object properties need JSON" in text
