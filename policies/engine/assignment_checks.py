"""What is probably a mistake in a label assignment's node selector, given the nodes it sees.

The same safety net as a policy draft's warnings (``policies.engine.preview.warnings``): a
label key or value no node carries (with the likeliest meant one), a name glob that matches no
node, and a selector that matches no node at all — an assignment that labels nothing, which is
almost always a typo (``karpenter.sh/capacity-typ``). The editor holds such a save until it is
confirmed; the dashboard lists saved assignments that have one. The selector sees *observed*
labels (docs/semantics.md, "Effective labels"), so so do these checks.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from policies.engine.assignments import NodeSelector
from policies.engine.globs import compile_glob
from policies.engine.preview import DraftWarning, listed, suggestions

PATH = "node_selector"


def label_values(nodes: Sequence[tuple[str, Mapping[str, str]]]) -> dict[str, Counter[str]]:
    """Every label key of ``nodes`` with how many carry each value."""
    values_by_key: dict[str, Counter[str]] = {}
    for _, labels in nodes:
        for key, value in labels.items():
            values_by_key.setdefault(key, Counter())[value] += 1
    return values_by_key


def assignment_warnings(
    selector: NodeSelector,
    nodes: Sequence[tuple[str, Mapping[str, str]]],
    *,
    where: str = "",
    values: Mapping[str, Counter[str]] | None = None,
) -> list[DraftWarning]:
    """Warnings for ``selector`` over ``nodes`` (name, observed labels); none without nodes.

    ``where`` names the nodes' scope in the messages (`` of cluster demo``); ``values`` is
    ``label_values(nodes)`` when the caller checks many selectors over the same nodes."""
    if not nodes:
        return []
    values_by_key = label_values(nodes) if values is None else values
    found: list[DraftWarning] = []
    for i, requirement in enumerate(selector.match_expressions):
        path = f"{PATH}.match_expressions[{i}]"
        key = requirement.key
        if requirement.operator == "DoesNotExist":
            continue
        if key not in values_by_key:
            close = suggestions(key, values_by_key)
            hint = f"; did you mean {close[0]}?" if close else ""
            found.append(
                DraftWarning(
                    "unknown_key", f"No node{where} carries the label {key}{hint}", path, close
                )
            )
            continue
        if requirement.operator not in ("In", "NotIn"):
            continue
        for value in requirement.values:
            if value in values_by_key[key]:
                continue
            close = suggestions(value, values_by_key[key])
            hint = f"; did you mean {close[0]}?" if close else "."
            found.append(
                DraftWarning(
                    "unknown_value",
                    f"No node{where} has {key}={value}{hint} Values on the nodes: "
                    f"{listed(values_by_key[key])}.",
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
    matched = sum(1 for name, labels in nodes if selector.matches(name, labels))
    if matched == 0:
        found.append(
            DraftWarning(
                "matches_no_nodes",
                f"The node selector matches 0 of {len(nodes)} nodes{where}: this assignment "
                "labels nothing.",
                PATH,
            )
        )
    return found
