"""A `--tools-module` with the resources the conformance suite's resources scenarios name:
`test://static-text`, `test://static-binary` (a 1x1 PNG) and the template
`test://template/{id}/data`, all under the `test:` scheme, which a subscription may name
(`resources-subscribe` / `resources-unsubscribe` use `test://watched-resource`). The shipped
server never serves these: only `scripts/conformance` and the tests load this module."""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from typing import Any

from notes_server.errors import InvalidParams, resource_not_found
from notes_server.tools.base import CallContext
from notes_server.tools.completion import NOTHING, Completion
from notes_server.tools.services import Services

STATIC_TEXT = "test://static-text"
STATIC_BINARY = "test://static-binary"
TEMPLATE = "test://template/{id}/data"
TEMPLATED = re.compile(r"test://template/([A-Za-z0-9_-]{1,64})/data")
TEXT = "This is the content of the static text resource."
# The smallest valid PNG: one transparent pixel.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)


class FixtureResources:
    """The `test:` scheme's provider: two static resources and the template's instances."""

    def __init__(self, services: Services) -> None:
        self.services = services

    def list_resources(
        self, ctx: CallContext, cursor: str | None
    ) -> tuple[list[dict[str, Any]], str | None]:
        if cursor is not None:
            raise InvalidParams("Invalid cursor")
        listed = [
            {"uri": STATIC_TEXT, "name": "static-text", "mimeType": "text/plain"},
            {"uri": STATIC_BINARY, "name": "static-binary", "mimeType": "image/png"},
        ]
        return listed, None

    def read_resource(self, ctx: CallContext, uri: str) -> list[dict[str, Any]]:
        if uri == STATIC_TEXT:
            return [{"uri": uri, "mimeType": "text/plain", "text": TEXT}]
        if uri == STATIC_BINARY:
            blob = base64.b64encode(PNG).decode("ascii")
            return [{"uri": uri, "mimeType": "image/png", "blob": blob}]
        match = TEMPLATED.fullmatch(uri)
        if match is None:
            raise resource_not_found(uri)
        text = f"Data for ID: {match.group(1)}"
        return [{"uri": uri, "mimeType": "text/plain", "text": text}]


class FixtureTemplate:
    """`test://template/{id}/data`; `id` has nothing to complete."""

    uri_template = TEMPLATE

    def __init__(self, services: Services) -> None:
        self.services = services

    def describe(self) -> dict[str, Any]:
        return {
            "uriTemplate": TEMPLATE,
            "name": "template-data",
            "title": "Data by id",
            "description": "A fixture resource whose text names the id in its URI",
            "mimeType": "text/plain",
        }

    def complete(
        self, ctx: CallContext, argument: str, value: str, context: Mapping[str, str]
    ) -> Completion:
        if argument != "id":
            raise InvalidParams(f"Invalid params: the template has no variable {argument[:64]!r}")
        return NOTHING


RESOURCES = {"test": FixtureResources}
RESOURCE_TEMPLATES = [FixtureTemplate]
STATIC_RESOURCE_SCHEMES = ["test"]
