"""What a prompt is: its wire description, argument checks, completion, and what `get` returns.

A prompt is to `prompts/get` what a tool is to `tools/call`: one class per prompt, contributed
by an extension. Arguments are strings (the spec's `{[key]: string}`); `get` receives them
checked against the declared ones (unknown or missing required: -32602), and each argument may
name a completer (`tools.completion`) that `completion/complete` uses for it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

from notes_server.errors import InvalidParams
from notes_server.tools.base import CallContext, InputRequired
from notes_server.tools.completion import NOTHING, Completer, Completion

if TYPE_CHECKING:
    from notes_server.tools.services import Services

MAX_ARGUMENT = 4096
MAX_NAME_ECHO = 64


class PromptArgument(NamedTuple):
    name: str
    description: str
    required: bool = False
    completer: Completer | None = None

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "required": self.required}


class PromptResult(NamedTuple):
    """A complete `prompts/get` result."""

    messages: list[dict[str, Any]]
    description: str | None = None

    def to_wire(self) -> dict[str, Any]:
        body: dict[str, Any] = {"resultType": "complete"}
        if self.description is not None:
            body["description"] = self.description
        body["messages"] = self.messages
        return body


def text_message(text: str, role: str = "user") -> dict[str, Any]:
    return {"role": role, "content": {"type": "text", "text": text}}


def resource_message(uri: str, text: str, mime_type: str, role: str = "user") -> dict[str, Any]:
    resource = {"uri": uri, "mimeType": mime_type, "text": text}
    return {"role": role, "content": {"type": "resource", "resource": resource}}


class Prompt(ABC):
    """One MCP prompt. Subclasses declare name, title, description and arguments."""

    name: ClassVar[str]
    title: ClassVar[str]
    description: ClassVar[str]
    arguments: ClassVar[tuple[PromptArgument, ...]] = ()

    def __init__(self, services: Services) -> None:
        self.services = services

    def describe(self) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "name": self.name,
            "title": self.title,
            "description": self.description,
        }
        if self.arguments:
            entry["arguments"] = [argument.describe() for argument in self.arguments]
        return entry

    def checked(self, arguments: object) -> dict[str, str]:
        """The request's arguments, or -32602 naming what is wrong."""
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise InvalidParams("Invalid params: arguments must be an object")
        known = {argument.name for argument in self.arguments}
        for key, value in arguments.items():
            if key not in known:
                raise InvalidParams(
                    f"Invalid arguments for prompt {self.name}: unknown argument "
                    f"{key[:MAX_NAME_ECHO]!r}"
                )
            if not isinstance(value, str) or len(value) > MAX_ARGUMENT:
                raise InvalidParams(
                    f"Invalid arguments for prompt {self.name}: {key} must be a string of at "
                    f"most {MAX_ARGUMENT} characters"
                )
        missing = [a.name for a in self.arguments if a.required and not arguments.get(a.name)]
        if missing:
            raise InvalidParams(
                f"Invalid arguments for prompt {self.name}: missing required argument "
                f"{', '.join(missing)}"
            )
        return dict(arguments)

    def complete(
        self, ctx: CallContext, argument: str, value: str, context: Mapping[str, str]
    ) -> Completion:
        """Values for `argument` starting with `value`; -32602 for an argument not declared."""
        for declared in self.arguments:
            if declared.name == argument:
                if declared.completer is None:
                    return NOTHING
                return declared.completer(self.services, ctx, value, context)
        raise InvalidParams(
            f"Invalid params: prompt {self.name} has no argument {argument[:MAX_NAME_ECHO]!r}"
        )

    @abstractmethod
    def get(self, ctx: CallContext, args: dict[str, str]) -> PromptResult | InputRequired:
        """The prompt's messages for checked `args`; McpError for protocol errors."""


class PromptRegistry:
    """Prompts by name, in contribution order."""

    def __init__(self, prompts: list[Prompt]) -> None:
        self._prompts: dict[str, Prompt] = {}
        for prompt in prompts:
            if prompt.name in self._prompts:
                raise ValueError(f"duplicate prompt name {prompt.name!r}")
            self._prompts[prompt.name] = prompt
        self._listing = [prompt.describe() for prompt in self._prompts.values()]

    def __bool__(self) -> bool:
        return bool(self._prompts)

    def get(self, name: str) -> Prompt | None:
        return self._prompts.get(name)

    def listing(self) -> list[dict[str, Any]]:
        return self._listing

    def names(self) -> list[str]:
        return list(self._prompts)
