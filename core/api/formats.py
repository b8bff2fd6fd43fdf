"""YAML in and out, for ``apply``/``export``, node imports and scheduler configuration, and the
choice between YAML and JSON for the routes that answer either (docs/scheduler-config.md)."""

from __future__ import annotations

from typing import Any

import yaml
from rest_framework.exceptions import NotAcceptable, ParseError, ValidationError
from rest_framework.parsers import BaseParser
from rest_framework.renderers import BaseRenderer

from core import limits
from core.api.parsers import check_text, read_bounded


class _NoAliasLoader(yaml.SafeLoader):
    """Safe YAML without anchors and aliases: a few aliased lines can stand for billions of
    nodes ("billion laughs"), and no policy document needs them."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(
                None, None, "aliases (*name) are not accepted", event.start_mark
            )
        return super().compose_node(parent, index)


def _yaml_depth_error(text: str | bytes) -> str | None:
    """Walk the event stream (no recursion, no objects built) and measure the nesting."""
    depth = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > limits.MAX_DEPTH:
                return (
                    f"The document nests deeper than {limits.MAX_DEPTH} levels (limit MAX_DEPTH)."
                )
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
        elif isinstance(event, yaml.AliasEvent):
            return "YAML aliases (*name) are not accepted."
    return None


def yaml_load(text: str | bytes) -> Any:
    """One YAML document, safely, without aliases and within ``MAX_DEPTH``.

    Raises ``yaml.YAMLError`` for bad YAML, aliases and documents nested too deep.
    """
    problem = _yaml_depth_error(text)
    if problem:
        raise yaml.YAMLError(problem)
    return yaml.load(text, Loader=_NoAliasLoader)  # a SafeLoader subclass: safe


def yaml_error_text(exc: yaml.YAMLError) -> str:
    """A YAML error as people read it: "line 3, column 7: mapping values are not allowed
    here" (1-based, where the parser stopped), or the first line of its message."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    if mark is None:
        return str(problem)
    return f"line {mark.line + 1}, column {mark.column + 1}: {problem}"


class YAMLParser(BaseParser):
    """``application/yaml`` (and the older ``application/x-yaml``, ``text/yaml``) bodies."""

    media_type = "application/yaml"

    max_bytes = limits.MAX_DOCUMENT_BYTES
    limit_name = "MAX_DOCUMENT_BYTES"

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        data = read_bounded(stream, self.max_bytes, self.limit_name)
        try:
            document = yaml_load(data)
        except yaml.YAMLError as exc:
            raise ParseError(f"YAML parse error - {yaml_error_text(exc)}") from None
        return check_text(document)


class XYAMLParser(YAMLParser):
    media_type = "application/x-yaml"


class TextYAMLParser(YAMLParser):
    media_type = "text/yaml"


class _BlockDumper(yaml.SafeDumper):
    """Multi-line strings (an embedded config file) as ``|`` blocks, the way people write them.

    Never anchors and aliases (``&id001``/``*id001``) for objects that appear twice: every
    consumer reads plain YAML, and some (kubectl's strict decoding, people) stumble on them.
    """

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = "|" if "\n" in value and not value.endswith((" ", "\t")) else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_BlockDumper.add_representer(str, _represent_str)


def yaml_dump(data: Any) -> str:
    """Block-style YAML with keys in the given order."""
    return yaml.dump(
        data, Dumper=_BlockDumper, sort_keys=False, default_flow_style=False, allow_unicode=True
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


class JSONUnlessYAMLMixin:
    """Views whose YAML output is built by hand: DRF renders everything else (errors, the
    ``?format=json`` answer) as JSON, whatever ``Accept`` or ``format`` say."""

    def perform_content_negotiation(self, request: Any, force: bool = False) -> tuple:
        from rest_framework.renderers import JSONRenderer

        renderer = JSONRenderer()
        return renderer, renderer.media_type


YAML = "yaml"
JSON = "json"
# What the YAML-or-JSON routes can produce; with no Accept header (or */*), the first: YAML.
_MEDIA_TYPES = {
    "application/yaml": YAML,
    "application/x-yaml": YAML,
    "text/yaml": YAML,
    "application/json": JSON,
}


def response_format(request: Any) -> str:
    """``yaml`` or ``json`` for a DRF request: ``?format=`` when given (400 if it is neither),
    else the preferred type of the ``Accept`` header (q-values honoured), else YAML; 406 when
    ``Accept`` names only types the route cannot produce."""
    fmt = request.query_params.get("format")
    if fmt:
        if fmt not in (YAML, JSON):
            raise ValidationError({"format": ["Must be yaml or json."]})
        return fmt
    preferred = request._request.get_preferred_type(list(_MEDIA_TYPES))
    if preferred is None:
        raise NotAcceptable(
            f"Cannot answer {request.headers.get('Accept')!r}: this route produces "
            "application/yaml (the default) or application/json; or pass ?format=yaml|json."
        )
    return _MEDIA_TYPES[preferred]
