"""What is probably a mistake in a label assignment's node selector, given the nodes it sees.

The same safety net as a policy draft's warnings (``engine.preview.warnings``): a
label key or value no node carries (with the likeliest meant one), a name glob that matches no
node, and a selector that matches no node at all — an assignment that labels nothing, which is
almost always a typo (``karpenter.sh/capacity-typ``). The editor holds such a save until it is
confirmed; the dashboard lists saved assignments that have one. The selector sees *observed*
labels (docs/semantics.md, "Effective labels"), so so do these checks.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from engine.assignments import NodeSelector
from engine.globs import compile_glob
from engine.preview import DraftWarning, listed, suggestions

PATH = "node_selector"


class LabelIndex:
    """The label keys of some nodes, and (counted on first use, per key) the values each
    takes: a dashboard checks every assignment over the same 5,000 nodes, and needs the values
    of the few keys the selectors name, not of all of them."""

    def __init__(self, nodes: Sequence[tuple[str, Mapping[str, str]]]) -> None:
        self.nodes = nodes
        self.keys: set[str] = set().union(*(labels for _, labels in nodes))
        self._values: dict[str, Counter[str]] = {}

    def values(self, key: str) -> Counter[str]:
        """How many of the nodes carry each value of ``key``."""
        counted = self._values.get(key)
        if counted is None:
            counted = self._values[key] = Counter(
                labels[key] for _, labels in self.nodes if key in labels
            )
        return counted


def assignment_warnings(
    selector: NodeSelector,
    nodes: Sequence[tuple[str, Mapping[str, str]]],
    *,
    where: str = "",
    index: LabelIndex | None = None,
) -> list[DraftWarning]:
    """Warnings for ``selector`` over ``nodes`` (name, observed labels); none without nodes.

    ``where`` names the nodes' scope in the messages (`` of cluster demo``); ``index`` is a
    ``LabelIndex`` of ``nodes`` when the caller checks many selectors over the same nodes."""
    if not nodes:
        return []
    index = index or LabelIndex(nodes)
    found: list[DraftWarning] = []
    for i, requirement in enumerate(selector.match_expressions):
        path = f"{PATH}.match_expressions[{i}]"
        key = requirement.key
        if requirement.operator == "DoesNotExist":
            continue
        if key not in index.keys:
            close = suggestions(key, index.keys)
            hint = f"; did you mean {close[0]}?" if close else ""
            found.append(
                DraftWarning(
                    "unknown_key", f"No node{where} carries the label {key}{hint}", path, close
                )
            )
            continue
        if requirement.operator not in ("In", "NotIn"):
            continue
        carried = index.values(key)
        for value in requirement.values:
            if value in carried:
                continue
            close = suggestions(value, carried)
            hint = f"; did you mean {close[0]}?" if close else "."
            found.append(
                DraftWarning(
                    "unknown_value",
                    f"No node{where} has {key}={value}{hint} Values on the nodes: "
                    f"{listed(carried)}.",
                    path,
                    close,
                )
            )
    names = [name for name, _ in nodes]
    for i, pattern in enumerate(selector.node_names):
        matches = compile_glob(pattern)
        if not any(matches(name) for name in names):
            found.append(
                DraftWarning(
                    "unmatched_name",
                    f"No node name{where} matches {pattern}.",
                    f"{PATH}.node_names[{i}]",
                )
            )
    # The first match settles it: most selectors match early, and this runs for every
    # assignment on each dashboard view.
    if not any(selector.matches(name, labels) for name, labels in nodes):
        found.append(
            DraftWarning(
                "matches_no_nodes",
                f"The node selector matches 0 of {len(nodes)} nodes{where}: this assignment "
                "labels nothing.",
                PATH,
            )
        )
    return found
