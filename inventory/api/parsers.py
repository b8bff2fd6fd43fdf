"""The NodeList upload's parsers: the API's bounded JSON and YAML parsers with room for a
whole cluster's nodes (``MAX_NODE_LIST_BYTES``)."""

from __future__ import annotations

from core import limits
from core.api.formats import YAMLParser
from core.api.parsers import BoundedJSONParser


class NodeListJSONParser(BoundedJSONParser):
    """A NodeList import: the nesting limit, and room for 5,000 whole node objects."""

    max_bytes = limits.MAX_NODE_LIST_BYTES
    limit_name = "MAX_NODE_LIST_BYTES"


class NodeListYAMLParser(YAMLParser):
    """A NodeList import in YAML: room for 5,000 whole node objects."""

    max_bytes = limits.MAX_NODE_LIST_BYTES
    limit_name = "MAX_NODE_LIST_BYTES"


class NodeListXYAMLParser(NodeListYAMLParser):
    media_type = "application/x-yaml"


class NodeListTextYAMLParser(NodeListYAMLParser):
    media_type = "text/yaml"
