"""Differential: the node affinity the webhook writes agrees with the extender, node for node.

Generated clusters (observed labels, label assignments pushed to the nodes or not), policies
(label rules with every operator, exact and glob name rules, resource rules, dry-run, pod
selectors) and pods (with and without their own required terms and nodeSelector). For each pod
the webhook's patch is applied with a JSON Patch library and the patched pod's node selection is
judged with Kubernetes' semantics (``PodSpecFacts.matches_node_selection``, tested against the
upstream nodeaffinity cases) on every node's *observed* labels. When every rule of the enforce
policies that select the pod compiles, that passes exactly the nodes the extender's filter
passes (and the pod's own selection passes); otherwise it passes at least those (the rest of
the rules are the extender's alone).
"""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.pods import PodFacts
from engine.podspec import pod_spec_facts
from engine.policy import compile_policy
from engine.snapshot import ClusterSettings, NodeRecord, build_snapshot_from
from engine.sources import assignment_spec_from_content
from extender.admission.handler import decide
from extender.admission.review import decode
from extender.verbs import VERBS
from tests.extender.admission_support import pod, review

KEYS = ["zone", "tier", "gen"]
ASSIGNED_KEYS = ["team", "pool"]
VALUES = ["a", "b", "1", "2", "10"]
NODE_NAMES = [f"n{i}" for i in range(12)]
OPERATORS = ["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]


@st.composite
def label_rule(draw: st.DrawFn, keys: list[str]) -> dict[str, Any]:
    operator = draw(st.sampled_from(OPERATORS))
    if operator in ("Exists", "DoesNotExist"):
        values: list[str] = []
    elif operator in ("Gt", "Lt"):
        values = [draw(st.sampled_from(["0", "1", "2", "5"]))]
    else:
        values = draw(st.lists(st.sampled_from(VALUES), min_size=1, max_size=3, unique=True))
    return {"kind": "label", "key": draw(st.sampled_from(keys)), "operator": operator,
            "values": values}  # fmt: skip


name_rule = st.builds(
    lambda name, operator: {"kind": "name", "pattern": name, "operator": operator},
    st.sampled_from([*NODE_NAMES[:4], "n1*", "n?"]),
    st.sampled_from(["Matches", "NotMatches"]),
)
resource_rule = st.just(
    {"kind": "resource", "resource": "memory", "operator": "Gte", "quantity": "8Gi"}
)


@st.composite
def policy(draw: st.DrawFn, index: int) -> dict[str, Any]:
    compilable = draw(st.booleans())
    rule = label_rule(KEYS + ASSIGNED_KEYS)
    if not compilable:
        rule = st.one_of(rule, name_rule, resource_rule)
    else:
        rule = st.one_of(
            rule, name_rule.filter(lambda r: not any(c in r["pattern"] for c in "*?["))
        )
    selector = draw(st.sampled_from([{}, {"namespaces": ["ml"]}, {"match_labels": {"app": "web"}}]))
    return {
        "name": f"p{index}",
        "mode": draw(st.sampled_from(["enforce", "enforce", "dry-run"])),
        "pod_selector": selector,
        "filter_rules": draw(st.lists(rule, max_size=3)),
        "weight_rules": [
            {**r, "weight": w}
            for r, w in draw(
                st.lists(st.tuples(label_rule(KEYS), st.integers(-100, 100)), max_size=2)
            )
        ],
    }


@st.composite
def cluster_case(draw: st.DrawFn):
    nodes = []
    for name in NODE_NAMES:
        labels = {k: draw(st.sampled_from(VALUES)) for k in KEYS if draw(st.booleans())}
        nodes.append((name, labels))
    assignments = []
    pushed = {}
    for i in range(draw(st.integers(0, 2))):
        key = draw(st.sampled_from(ASSIGNED_KEYS))
        content = {
            "name": f"a{i}",
            "priority": i,
            "node_selector": {"node_names": [draw(st.sampled_from(["n1*", "n?", "n2", "*"]))]},
            "labels": {key: draw(st.sampled_from(VALUES))},
        }
        assignments.append(content)
        pushed[i] = draw(st.booleans())
    policies = [draw(policy(i)) for i in range(draw(st.integers(1, 3)))]
    return nodes, assignments, pushed, policies


@st.composite
def pod_case(draw: st.DrawFn) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "i"}]}
    if draw(st.booleans()):
        spec["nodeSelector"] = {"zone": draw(st.sampled_from(VALUES))}
    terms = draw(
        st.lists(
            st.one_of(
                st.builds(
                    lambda r: {
                        "matchExpressions": [
                            {k: v for k, v in r.items() if k != "kind" and (k != "values" or v)}
                        ]
                    },
                    label_rule(KEYS),
                ),
                st.just({}),
                st.builds(
                    lambda n: {
                        "matchFields": [{"key": "metadata.name", "operator": "In", "values": [n]}]
                    },
                    st.sampled_from(NODE_NAMES),
                ),
            ),
            max_size=3,
        )
    )
    if terms:
        spec["affinity"] = {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": terms}}
        }  # fmt: skip
    labels = {"app": draw(st.sampled_from(["web", "db"]))}
    return pod(namespace=draw(st.sampled_from(["ml", "web"])), labels=labels, spec=spec)


def build(nodes, assignments, pushed, policies):
    """The snapshot, with each pushed assignment's labels copied onto the nodes it selects."""
    specs = [assignment_spec_from_content(a) for a in assignments]
    observed = {name: dict(labels) for name, labels in nodes}
    for i, spec in enumerate(specs):
        if pushed[i]:
            for name, labels in nodes:
                if spec.selector.matches(name, labels):
                    observed[name].update(spec.labels)
    records = [
        NodeRecord(
            name, observed[name], {"memory": 16 << 30}, [{"type": "Ready", "status": "True"}]
        )
        for name, _ in nodes
    ]
    snapshot = build_snapshot_from(
        revision=1,
        clusters=[ClusterSettings("c", admission="mutate", admission_excluded_namespaces=())],
        nodes_by_cluster={"c": records},
        policies=[compile_policy(p, version=2) for p in policies],
        assignments=[(None, spec) for spec in specs],
    )
    return snapshot, observed


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=cluster_case(), pods=st.lists(pod_case(), min_size=1, max_size=4))
def test_mutated_affinity_passes_exactly_what_the_extender_passes(case, pods) -> None:
    snapshot, observed = build(*case)
    cluster = snapshot.clusters["c"]
    for obj in pods:
        request = decode(orjson.dumps(review(obj)))
        decision = decide(cluster, request)
        patched = jsonpatch.JsonPatch(decision.patch).apply(copy.deepcopy(obj))
        again = decide(cluster, decode(orjson.dumps(review(patched))))
        assert again.patch == []  # reinvocation changes nothing

        body = orjson.dumps({"Pod": obj, "NodeNames": NODE_NAMES})
        passed = set(orjson.loads(VERBS["filter"](snapshot, cluster, body).body)["NodeNames"])
        original = pod_spec_facts(obj)
        own = {n for n in NODE_NAMES if original.matches_node_selection(observed[n], n)}
        mutated = pod_spec_facts(patched)
        judged = {n for n in NODE_NAMES if mutated.matches_node_selection(observed[n], n)}

        metadata = obj["metadata"]
        facts = PodFacts(namespace=metadata["namespace"], labels=metadata["labels"])
        positions = cluster.evaluator.active(facts)
        table = cluster.evaluator.table(positions)
        placements = cluster.admission_plans[positions]
        enforce = [p for p in placements.placements if p.enforce]
        assert {p.name for p in enforce} == {p.name for p in table.enforce}
        if all(p.all_compile for p in enforce):
            assert judged == passed & own, (obj, decision.patch)
        else:
            assert judged >= passed & own, (obj, decision.patch)
        assert judged <= own  # the pod's own selection is never widened
