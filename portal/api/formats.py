"""YAML in and out, for ``apply``/``export``, node imports and scheduler configuration."""

from __future__ import annotations

from typing import Any

import yaml
from rest_framework.exceptions import ParseError
from rest_framework.parsers import BaseParser
from rest_framework.renderers import BaseRenderer


class YAMLParser(BaseParser):
    """``application/yaml`` (and the older ``application/x-yaml``, ``text/yaml``) bodies."""

    media_type = "application/yaml"

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        try:
            return yaml.safe_load(stream.read())
        except yaml.YAMLError as exc:
            raise ParseError(f"YAML parse error - {str(exc).splitlines()[0]}") from None


class XYAMLParser(YAMLParser):
    media_type = "application/x-yaml"


class TextYAMLParser(YAMLParser):
    media_type = "text/yaml"


def yaml_dump(data: Any) -> str:
    """Block-style YAML with keys in the given order."""
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=False, allow_unicode=True)


def yaml_dump_all(documents: list[Any]) -> str:
    return yaml.safe_dump_all(
        documents, sort_keys=False, default_flow_style=False, allow_unicode=True
    )


class YAMLRenderer(BaseRenderer):
    media_type = "application/yaml"
    format = "yaml"
    charset = "utf-8"

    def render(
        self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None
    ) -> bytes:
        if data is None:
            return b""
        if isinstance(data, str):
            return data.encode()
        return yaml_dump(data).encode()
