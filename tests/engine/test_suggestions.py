"""What the editors suggest for a label key or value no node carries (engine.preview):
the start of a long name before anything one edit away."""

from __future__ import annotations

from collections import Counter

import pytest

from engine.facts import node_facts
from engine.preview import listed, suggestions, warnings

GPU_VALUES = ["A100-SXM4-40GB", "A10G", "T4", "H100-80GB-HBM3"]
KEYS = ["nvidia.com/gpu.product", "nvidia.com/gpu.count", "karpenter.sh/capacity-type"]


@pytest.mark.parametrize(
    ("word", "candidates", "first"),
    [
        pytest.param("A100", GPU_VALUES, "A100-SXM4-40GB", id="prefix-before-one-edit-away"),
        pytest.param("a100", GPU_VALUES, "A100-SXM4-40GB", id="case-insensitive"),
        pytest.param("SXM4", GPU_VALUES, "A100-SXM4-40GB", id="substring"),
        pytest.param("A100-SXM4-40GB-x", GPU_VALUES, "A100-SXM4-40GB", id="longer-than-value"),
        pytest.param("A10O", ["A100", "T4"], "A100", id="edit-distance-last"),
        pytest.param("gpu.product", KEYS, "nvidia.com/gpu.product", id="key-substring"),
        pytest.param("karpenter.sh/capacity-typ", KEYS, "karpenter.sh/capacity-type", id="key"),
    ],
)
def test_the_likeliest_meaning_comes_first(word: str, candidates: list[str], first: str) -> None:
    assert suggestions(word, candidates)[0] == first


def test_prefix_matches_rank_shortest_first_and_are_bounded() -> None:
    values = ["A100-SXM4-80GB", "A100-SXM4-40GB", "A100-PCIE-40GB", "A100", "A10G"]
    # The exact-length prefix first, then the shorter names; one edit away only after them.
    assert suggestions("A10", values) == ["A100", "A10G", "A100-PCIE-40GB"]


def test_short_values_are_not_suggested_because_they_are_inside_the_word() -> None:
    assert suggestions("A1000", ["A1", "T4"]) == []


def test_nothing_alike_suggests_nothing() -> None:
    assert suggestions("zzz", GPU_VALUES) == []


def test_the_existing_values_are_listed_most_common_first() -> None:
    assert listed(Counter({"A10G": 6, "A100-SXM4-40GB": 3})) == "A10G, A100-SXM4-40GB"
    many = Counter({f"v{i:02d}": 1 for i in range(12)})
    assert listed(many, limit=3) == "v00, v01, v02 (+9 more)"


def test_an_unknown_value_warning_suggests_the_prefix_and_lists_the_values() -> None:
    facts = [
        node_facts(f"n{i}", labels={"nvidia.com/gpu.product": product})
        for i, product in enumerate(["A10G"] * 6 + ["A100-SXM4-40GB"] * 3)
    ]
    draft = {
        "pod_selector": {"namespaces": ["ml"]},
        "filter_rules": [
            {"kind": "label", "key": "nvidia.com/gpu.product", "operator": "In", "values": ["A100"]}
        ],
    }
    (warning,) = [w for w in warnings(draft, facts, None) if w.code == "unknown_value"]
    assert warning.suggestions[0] == "A100-SXM4-40GB"
    assert warning.message == (
        "No node has nvidia.com/gpu.product=A100; did you mean A100-SXM4-40GB? "
        "Values on the nodes: A10G, A100-SXM4-40GB."
    )


def test_edit_distance_keeps_the_most_similar_first() -> None:
    keys = ["nvidia.com/gpu.count", "nvidia.com/gpu.product", "kubernetes.io/os"]
    assert suggestions("nvidia.com/gpu.prodcut", keys)[0] == "nvidia.com/gpu.product"
