"""The `test_*` prompts the official conformance suite gets (see docs/conformance-fixtures.md).
Loaded only with `serve --tools-module tests.conformance.fixture_prompts`, the same seam as
the fixture tools; never part of the shipped prompts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from notes_server.features.prompts.base import Prompt, PromptArgument, PromptResult, text_message
from notes_server.tools.base import CallContext
from notes_server.tools.completion import Completion, bounded
from notes_server.tools.services import Services

# A 1x1 red PNG.
PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0g"
    "AAAABJRU5ErkJggg=="
)
CITIES = ("paris", "park", "party", "prague", "porto")


class Fixture(Prompt):
    title = "Conformance fixture"
    description = "A fixture prompt for the MCP conformance suite."


class SimplePrompt(Fixture):
    name = "test_simple_prompt"

    def get(self, ctx: CallContext, args: dict[str, str]) -> PromptResult:
        return PromptResult([text_message("This is a simple prompt for testing.")])


def _cities(
    services: Services, ctx: CallContext, prefix: str, context: Mapping[str, str]
) -> Completion:
    return bounded([city for city in CITIES if city.startswith(prefix)])


class PromptWithArguments(Fixture):
    name = "test_prompt_with_arguments"
    arguments = (
        PromptArgument("arg1", "First test argument", True, _cities),
        PromptArgument("arg2", "Second test argument", True),
    )

    def get(self, ctx: CallContext, args: dict[str, str]) -> PromptResult:
        said = f"Prompt with arguments: arg1='{args['arg1']}', arg2='{args['arg2']}'"
        return PromptResult([text_message(said)])


class PromptWithEmbeddedResource(Fixture):
    name = "test_prompt_with_embedded_resource"
    arguments = (PromptArgument("resourceUri", "URI of the resource to embed", True),)

    def get(self, ctx: CallContext, args: dict[str, str]) -> PromptResult:
        resource = {
            "uri": args["resourceUri"],
            "mimeType": "text/plain",
            "text": "Embedded resource content for testing.",
        }
        return PromptResult(
            [
                {"role": "user", "content": {"type": "resource", "resource": resource}},
                text_message("Please process the embedded resource above."),
            ]
        )


class PromptWithImage(Fixture):
    name = "test_prompt_with_image"

    def get(self, ctx: CallContext, args: dict[str, str]) -> PromptResult:
        image = {"type": "image", "data": PNG, "mimeType": "image/png"}
        return PromptResult(
            [{"role": "user", "content": image}, text_message("Please analyze the image above.")]
        )


class AskContext:
    """Round 1 of the MRTR prompt: an elicitation, no state (the answer alone finishes it)."""

    def to_wire(self) -> dict[str, Any]:
        schema = {
            "type": "object",
            "properties": {"context": {"type": "string"}},
            "required": ["context"],
        }
        question = {
            "method": "elicitation/create",
            "params": {
                "mode": "form",
                "message": "What context should the prompt use?",
                "requestedSchema": schema,
            },
        }
        return {"resultType": "input_required", "inputRequests": {"user_context": question}}


class InputRequiredPrompt(Fixture):
    name = "test_input_required_result_prompt"

    def get(self, ctx: CallContext, args: dict[str, str]) -> Any:
        answer = (ctx.input_responses or {}).get("user_context")
        if not isinstance(answer, dict):
            return AskContext()
        content = answer.get("content")
        said = content.get("context") if isinstance(content, dict) else None
        return PromptResult([text_message(f"Prompt context: {said}")])


PROMPTS: list[type[Prompt]] = [
    SimplePrompt,
    PromptWithArguments,
    PromptWithEmbeddedResource,
    PromptWithImage,
    InputRequiredPrompt,
]
