"""Impact preview of one policy over 5,000 nodes, in-process (target: p50 <= 200 ms).

The engine part of ``POST /api/v1/policies/preview/`` (``engine.preview``): compile
the draft, judge it over every node's facts, and compute the warnings; then the same preview
with 20 expectations judged before and after the draft (what a save also checks). Writes
bench/results/preview.md.

    .venv/bin/python bench/preview.py
"""

from __future__ import annotations

import os
import platform
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine.expectations import evaluate_expectation, expectation_spec  # noqa: E402
from engine.facts import NodeFacts  # noqa: E402
from engine.policy import compile_policy  # noqa: E402
from engine.preview import impact, warnings  # noqa: E402

NODES = 5000
RUNS = 30
RESULTS = ROOT / "bench" / "results" / "preview.md"


def fleet() -> list[NodeFacts]:
    rng = random.Random(3)
    products = ["A100-SXM4-40GB", "A10G", "T4", "L4"]
    nodes = []
    for i in range(NODES):
        labels = {
            "topology.kubernetes.io/zone": f"zone-{rng.choice('abcdef')}",
            "node.kubernetes.io/instance-type": f"m{rng.randint(5, 7)}.{rng.randint(1, 24)}xlarge",
            "eks.amazonaws.com/capacityType": rng.choice(["ON_DEMAND", "SPOT"]),
        }
        if rng.random() < 0.3:
            labels["nvidia.com/gpu.product"] = rng.choice(products)
        nodes.append(
            NodeFacts(
                f"node-{i:05d}",
                labels,
                {"cpu": rng.randint(2, 96) * 1000, "memory": rng.randint(4, 768) << 30},
                {"Ready": rng.choice(["True", "True", "True", "False"])},
            )
        )
    return nodes


DRAFT = {
    "name": "payments-gpu",
    "pod_selector": {"namespaces": ["payments"]},
    "filter_rules": [
        {
            "kind": "label",
            "key": "nvidia.com/gpu.product",
            "operator": "In",
            "values": ["A100-SXM4-40GB", "A10G"],
        },
        {"kind": "condition", "condition": "Ready", "status": "True"},
        {"kind": "resource", "resource": "memory", "operator": "Gte", "quantity": "64Gi"},
    ],
    "weight_rules": [
        {
            "kind": "label",
            "key": "eks.amazonaws.com/capacityType",
            "operator": "In",
            "values": ["ON_DEMAND"],
            "weight": 10,
        },
        {"kind": "resource", "resource": "memory", "weight": 5},
    ],
}


EXPECTATIONS = 20


def expectations() -> list:
    kinds = ["can_land", "never_lands", "prefers"]
    specs = []
    for i in range(EXPECTATIONS):
        specs.append(
            expectation_spec(
                {
                    "name": f"case-{i}",
                    "kind": kinds[i % 3],
                    "pod": {"namespace": ["payments", "ml", "web"][i % 3], "labels": {}},
                    "node_selector": {
                        "match_expressions": [
                            {
                                "key": "topology.kubernetes.io/zone",
                                "operator": "In",
                                "values": [f"zone-{'abcdef'[i % 6]}"],
                            }
                        ]
                    },
                }
            )
        )
    return specs


def with_expectations(facts: list, specs: list, saved: list) -> None:
    """A save's check (policies.expectations.broken_by): the expectations whose pod the saved
    or the draft policy selects, judged before and after."""
    draft = [compile_policy({**DRAFT, "name": "payments-gpu"}, version=0)]
    touched = [s for s in specs if any(p.selects(s.pod) for p in (*saved, *draft))]
    for policies in (saved, draft):
        for spec in touched:
            evaluate_expectation(spec, policies, facts, cluster="bench")


def main() -> int:
    facts = fleet()
    times = []
    for _ in range(RUNS):
        started = time.perf_counter()
        result = impact(DRAFT, facts, cluster="bench")
        warnings(DRAFT, facts, result)
        times.append((time.perf_counter() - started) * 1000)
    p50 = statistics.median(times)
    p99 = max(times)
    specs = expectations()
    saved = [compile_policy({**DRAFT, "filter_rules": DRAFT["filter_rules"][:1]}, version=1)]
    checked = []
    for _ in range(RUNS // 3):
        started = time.perf_counter()
        result = impact(DRAFT, facts, cluster="bench")
        warnings(DRAFT, facts, result)
        with_expectations(facts, specs, saved)
        checked.append((time.perf_counter() - started) * 1000)
    checked_p50 = statistics.median(checked)
    RESULTS.write_text(
        "# Impact preview\n\n"
        f"One policy (3 filter rules, 2 weight rules) previewed over {NODES} nodes in-process: "
        "compile, judge every node, warnings. Produced by `bench/preview.py`.\n\n"
        f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}; {RUNS} runs.\n\n"
        "| measure | value | target |\n|---|---:|---:|\n"
        f"| p50 | {p50:.1f} ms | <= 200 ms |\n| max | {p99:.1f} ms | - |\n"
        f"| p50 with {EXPECTATIONS} expectations (7 whose pod the policy selects) judged "
        "before and after | "
        f"{checked_p50:.1f} ms | - |\n"
        f"| nodes rejected | {result.rejected} of {result.nodes} | - |\n"
    )
    print(RESULTS.read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
