"""The `test_*` tools the official conformance suite calls (see
docs/conformance-fixtures.md). Loaded only with `serve --tools-module
tests.conformance.fixture_tools`; never part of the shipped tool list.

Multi round-trip fixtures keep their round number as the phase of a `requestState` issued and
verified by the server's request-state boundary, so a tampered state is rejected exactly like a
real confirmation's (-32602).
"""

from __future__ import annotations

import time
from typing import Any

from notes_server.errors import MissingCapability
from notes_server.tools.base import CallContext, InputRequired, Tool, tool_hints

NO_ARGS: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}
# A 1x1 red PNG and a 44-byte silent WAV.
PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0g"
    "AAAABJRU5ErkJggg=="
)
WAV = "UklGRiQAAABXQVZFZm10IBAAAAABAAEARKwAAIhYAQACABAAZGF0YQAAAAA="


class Content:
    """A complete result with arbitrary content blocks (the shipped ToolResult is text-only)."""

    def __init__(self, *blocks: dict[str, Any], is_error: bool = False) -> None:
        self.blocks = list(blocks)
        self.is_error = is_error

    def to_wire(self) -> dict[str, Any]:
        return {"resultType": "complete", "content": self.blocks, "isError": self.is_error}


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def elicit(message: str, prop: str, prop_type: str = "string") -> dict[str, Any]:
    schema = {"type": "object", "properties": {prop: {"type": prop_type}}, "required": [prop]}
    return {
        "method": "elicitation/create",
        "params": {"mode": "form", "message": message, "requestedSchema": schema},
    }


def sample(prompt: str, max_tokens: int) -> dict[str, Any]:
    message = {"role": "user", "content": text(prompt)}
    return {
        "method": "sampling/createMessage",
        "params": {"messages": [message], "maxTokens": max_tokens},
    }


ROOTS: dict[str, Any] = {"method": "roots/list", "params": {}}


class Fixture(Tool):
    title = "Conformance fixture"
    description = "A fixture for the MCP conformance suite."
    input_schema = NO_ARGS
    tool_annotations = tool_hints("Conformance fixture", read_only=True)


class SimpleText(Fixture):
    name = "test_simple_text"

    def call(self, ctx: CallContext, args: dict[str, Any]) -> Any:
        return Content(text("This is a simple text response for testing."))


class ErrorHandling(Fixture):
    name = "test_error_handling"

    def call(self, ctx: CallContext, args: dict[str, Any]) -> Any:
        return Content(text("This tool intentionally returns an error for testing"), is_error=True)


class ImageContent(Fixture):
    name = "test_image_content"

    def call(self, ctx: CallContext, args: dict[str, Any]) -> Any:
        return Content({"type": "image", "data": PNG, "mimeType": "image/png"})


class AudioContent(Fixture):
    name = "test_audio_content"

    def call(self, ctx: CallContext, args: dict[str, Any]) -> Any:
        return Content({"type": "audio", "data": WAV, "mimeType": "audio/wav"})


class EmbeddedResource(Fixture):
    name = "test_embedded_resource"

    def call(self, ctx: CallContext, args: dict[str, Any]) -> Any:
        resource = {
            "uri": "test://embedded-resource",
            "mimeType": "text/plain",
            "text": "This is an embedded resource content.",
        }
        return Content({"type": "resource", "resource": resource})


class MultipleContentTypes(Fixture):
    name = "test_multiple_content_types"

    def call(self, ctx: CallContext, args: dict[str, Any]) -> Any:
        resource = {
            "uri": "test://mixed-content-resource",
            "mimeType": "application/json",
            "text": '{"test":"data","value":123}',
        }
        return Content(
            text("Multiple content types test:"),
            {"type": "image", "data": PNG, "mimeType": "image/png"},
            {"type": "resource", "resource": resource},
        )


class ToolWithProgress(Fixture):
    """Reports 0, 50 and 100 of 100, about 50 ms apart (the work the suite asks to emulate);
    the transport sends them only when the request carried `_meta.progressToken`."""

    name = "test_tool_with_progress"

    def call(self, ctx: CallContext, args: dict[str, Any]) -> Any:
        for step in (0, 50, 100):
            if step:
                time.sleep(0.05)
            ctx.report_progress(step, 100)
        return Content(text("Progress tool finished: reported 0, 50 and 100 of 100."))


class LoggingTool(Fixture):
    """Logs at info; the message reaches the client only when the request set a log level
    (2026-07-28 `_meta`, or a 2025-11-25 session's `logging/setLevel`)."""

    name = "test_logging_tool"

    def call(self, ctx: CallContext, args: dict[str, Any]) -> Any:
        ctx.log_message("info", "test_logging_tool ran", "conformance")
        return Content(text("Done; a log message was sent if a log level was requested."))


class ToolWithLogging(Fixture):
    """Three info messages about 50 ms apart (the work the 2025-era scenario asks to
    emulate), on the request's own stream."""

    name = "test_tool_with_logging"

    def call(self, ctx: CallContext, args: dict[str, Any]) -> Any:
        steps = ("Tool execution started", "Tool processing data", "Tool execution completed")
        for n, step in enumerate(steps):
            if n:
                time.sleep(0.05)
            ctx.log_message("info", step, "conformance")
        return Content(text("Logging tool finished: sent three log messages."))


class MissingCapabilityTool(Fixture):
    name = "test_missing_capability"

    def call(self, ctx: CallContext, args: dict[str, Any]) -> Any:
        if not isinstance(ctx.capabilities.get("sampling"), dict):
            raise MissingCapability(
                "This tool requires the sampling capability",
                {"requiredCapabilities": {"sampling": {}}},
            )
        return Content(text("sampling is declared"))


class RoundTrip(Fixture):
    """A multi round-trip fixture: `rounds` lists what each round asks; the round number
    travels sealed in requestState. Missing answers re-ask the same round."""

    rounds: tuple[dict[str, Any], ...] = ()

    def call(self, ctx: CallContext, args: dict[str, Any]) -> Any:
        if ctx.request_state is None:
            return self.answered_without_state(ctx) or self.ask(ctx, 0)
        round_no = self.opened_round(ctx)
        responses = ctx.input_responses or {}
        if not set(self.asked(ctx, round_no)) <= set(responses):
            return self.ask(ctx, round_no)
        if round_no + 1 < len(self.rounds):
            return self.ask(ctx, round_no + 1)
        return Content(text(self.finish(responses)))

    def asked(self, ctx: CallContext, round_no: int) -> dict[str, Any]:
        return self.rounds[round_no]

    def answered_without_state(self, ctx: CallContext) -> Content | None:
        """A one-round fixture answered in full needs no state: the answers alone finish it
        (extra, unrecognised response keys are ignored, as SEP-2322 asks)."""
        responses = ctx.input_responses or {}
        if len(self.rounds) == 1 and responses and set(self.asked(ctx, 0)) <= set(responses):
            return Content(text(self.finish(responses)))
        return None

    def ask(self, ctx: CallContext, round_no: int) -> InputRequired:
        state = self.services.states.issue(
            principal=ctx.principal, tool=self.name, phase=f"round-{round_no}", arguments={}
        )
        return InputRequired(self.asked(ctx, round_no), state)

    def opened_round(self, ctx: CallContext) -> int:
        """The fixtures take no arguments (their schema allows none), so `{}` is what binds."""
        claims = self.services.states.verify(
            ctx.request_state or "",
            principal=ctx.principal,
            tool=self.name,
            phases=[f"round-{n}" for n in range(len(self.rounds))],
            arguments={},
        )
        return int(claims.phase.removeprefix("round-"))

    def finish(self, responses: dict[str, Any]) -> str:
        return "Completed."


def _content(responses: dict[str, Any], key: str) -> dict[str, Any]:
    answer = responses.get(key)
    content = answer.get("content") if isinstance(answer, dict) else None
    return content if isinstance(content, dict) else {}


class Elicitation(RoundTrip):
    name = "test_input_required_result_elicitation"
    rounds = ({"user_name": elicit("What is your name?", "name")},)

    def finish(self, responses: dict[str, Any]) -> str:
        return f"Hello, {_content(responses, 'user_name').get('name', 'stranger')}!"


class Sampling(RoundTrip):
    name = "test_input_required_result_sampling"
    rounds = ({"capital_question": sample("What is the capital of France?", 100)},)

    def finish(self, responses: dict[str, Any]) -> str:
        answer = responses.get("capital_question")
        block = answer.get("content") if isinstance(answer, dict) else None
        said = block.get("text") if isinstance(block, dict) else None
        return f"The model answered: {said}"


class ListRoots(RoundTrip):
    name = "test_input_required_result_list_roots"
    rounds = ({"client_roots": ROOTS},)

    def finish(self, responses: dict[str, Any]) -> str:
        answer = responses.get("client_roots")
        roots = answer.get("roots") if isinstance(answer, dict) else None
        uris = [r.get("uri") for r in roots or [] if isinstance(r, dict)]
        return f"Client roots: {', '.join(str(u) for u in uris) or 'none'}"


class RequestState(RoundTrip):
    name = "test_input_required_result_request_state"
    rounds = ({"confirm": elicit("Please confirm", "ok", "boolean")},)

    def finish(self, responses: dict[str, Any]) -> str:
        return "state-ok: the requestState was verified"


class MultipleInputs(RoundTrip):
    name = "test_input_required_result_multiple_inputs"
    rounds = (
        {
            "user_name": elicit("What is your name?", "name"),
            "greeting": sample("Generate a greeting", 50),
            "client_roots": ROOTS,
        },
    )


class MultiRound(RoundTrip):
    name = "test_input_required_result_multi_round"
    rounds = (
        {"step1": elicit("Step 1: What is your name?", "name")},
        {"step2": elicit("Step 2: What is your favorite color?", "color")},
    )


class StreamingElicitation(RoundTrip):
    """Needs user input: the answer is an input_required result, never a server request."""

    name = "test_streaming_elicitation"
    rounds = ({"user_name": elicit("What is your name?", "name")},)


class TamperedState(RoundTrip):
    name = "test_input_required_result_tampered_state"
    rounds = ({"confirm": elicit("Please confirm", "ok", "boolean")},)


class Capabilities(RoundTrip):
    """Asks only for what this request's capabilities allow."""

    name = "test_input_required_result_capabilities"
    rounds = ({},)

    def asked(self, ctx: CallContext, round_no: int) -> dict[str, Any]:
        caps = ctx.capabilities
        wanted: dict[str, Any] = {}
        if isinstance(caps.get("elicitation"), dict):
            wanted["user_name"] = elicit("What is your name?", "name")
        if isinstance(caps.get("sampling"), dict):
            wanted["greeting"] = sample("Generate a greeting", 50)
        if isinstance(caps.get("roots"), dict):
            wanted["client_roots"] = ROOTS
        if not wanted:
            raise MissingCapability(
                "This tool needs elicitation, sampling or roots",
                {"requiredCapabilities": {"elicitation": {}}},
            )
        return wanted


class AskOnce(Fixture):
    """The 2025-era fixtures: ask the client one thing (as an embedded input request, which
    the 2025-11-25 adapter sends as a real server request), then report the answer."""

    needs: str = "elicitation"

    def question(self, args: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def report(self, answer: dict[str, Any]) -> str:
        content = answer.get("content")
        return f"Elicitation completed: action={answer.get('action')}, content={content}"

    def call(self, ctx: CallContext, args: dict[str, Any]) -> Any:
        if not isinstance(ctx.capabilities.get(self.needs), dict):
            raise MissingCapability(
                f"This tool requires the {self.needs} capability",
                {"requiredCapabilities": {self.needs: {}}},
            )
        answer = (ctx.input_responses or {}).get("answer")
        if isinstance(answer, dict):
            return Content(text(self.report(answer)))
        state = self.services.states.issue(
            principal=ctx.principal, tool=self.name, phase="ask", arguments=args
        )
        return InputRequired({"answer": self.question(args)}, state)


def _form(message: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    schema = {"type": "object", "properties": properties, "required": required}
    return {
        "method": "elicitation/create",
        "params": {"mode": "form", "message": message, "requestedSchema": schema},
    }


def _with_args(**properties: Any) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


class LegacyElicitation(AskOnce):
    name = "test_elicitation"
    input_schema = _with_args(message={"type": "string"})

    def question(self, args: dict[str, Any]) -> dict[str, Any]:
        properties = {
            "username": {"type": "string", "description": "User's response"},
            "email": {"type": "string", "description": "User's email address"},
        }
        return _form(args["message"], properties, ["username", "email"])

    def report(self, answer: dict[str, Any]) -> str:
        action, content = answer.get("action"), answer.get("content")
        return f"User response: <action: {action}, content: {content}>"


class LegacySampling(AskOnce):
    name = "test_sampling"
    needs = "sampling"
    input_schema = _with_args(prompt={"type": "string"})

    def question(self, args: dict[str, Any]) -> dict[str, Any]:
        return sample(args["prompt"], 100)

    def report(self, answer: dict[str, Any]) -> str:
        block = answer.get("content")
        said = block.get("text") if isinstance(block, dict) else None
        return f"LLM response: {said}"


class ElicitationDefaults(AskOnce):
    name = "test_elicitation_sep1034_defaults"

    def question(self, args: dict[str, Any]) -> dict[str, Any]:
        properties = {
            "name": {"type": "string", "default": "John Doe"},
            "age": {"type": "integer", "default": 30},
            "score": {"type": "number", "default": 95.5},
            "status": {
                "type": "string",
                "enum": ["active", "inactive", "pending"],
                "default": "active",
            },
            "verified": {"type": "boolean", "default": True},
        }
        return _form("Please review your details", properties, [])


def _titled(prefix: str, titles: list[str]) -> list[dict[str, str]]:
    return [{"const": f"{prefix}{n}", "title": title} for n, title in enumerate(titles, 1)]


class ElicitationEnums(AskOnce):
    name = "test_elicitation_sep1330_enums"

    def question(self, args: dict[str, Any]) -> dict[str, Any]:
        options = ["option1", "option2", "option3"]
        properties = {
            "untitledSingle": {"type": "string", "enum": options},
            "titledSingle": {
                "type": "string",
                "oneOf": _titled("value", ["First Option", "Second Option", "Third Option"]),
            },
            "legacyEnum": {
                "type": "string",
                "enum": ["opt1", "opt2", "opt3"],
                "enumNames": ["Option One", "Option Two", "Option Three"],
            },
            "untitledMulti": {"type": "array", "items": {"type": "string", "enum": options}},
            "titledMulti": {
                "type": "array",
                "items": {
                    "anyOf": _titled("value", ["First Choice", "Second Choice", "Third Choice"])
                },
            },
        }
        return _form("Please pick your options", properties, [])


TOOLS: list[type[Tool]] = [
    ToolWithLogging,
    SimpleText,
    ErrorHandling,
    ImageContent,
    AudioContent,
    EmbeddedResource,
    MultipleContentTypes,
    ToolWithProgress,
    LoggingTool,
    MissingCapabilityTool,
    Elicitation,
    Sampling,
    ListRoots,
    RequestState,
    MultipleInputs,
    MultiRound,
    StreamingElicitation,
    TamperedState,
    Capabilities,
    LegacyElicitation,
    LegacySampling,
    ElicitationDefaults,
    ElicitationEnums,
]
