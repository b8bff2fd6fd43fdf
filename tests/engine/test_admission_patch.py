"""The admission patch applies with a JSON Patch library to every shape of pod affinity, adds
exactly what the policies compile, and is idempotent: the patched pod reviewed again gives an
empty patch (reinvocationPolicy: IfNeeded)."""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
import pytest

from engine import admission
from engine.podspec import pod_spec_facts
from engine.policy import compile_policy

GPU = {"key": "gpu", "operator": "In", "values": ["A100"]}
SPOT = {"key": "spot", "operator": "DoesNotExist"}
ZONE_A = {"key": "zone", "operator": "In", "values": ["a"]}


def plan(*contents: dict[str, Any], unpushed: frozenset[str] = frozenset()):
    return admission.build_plan([compile_policy(c, version=3) for c in contents], unpushed)


ML = {
    "name": "ml-on-gpu",
    "filter_rules": [
        {"kind": "label", **GPU},
        {"kind": "label", "key": "spot", "operator": "DoesNotExist", "values": []},
        {"kind": "resource", "resource": "memory", "operator": "Gte", "quantity": "8Gi",
         "message": "min-memory"},
    ],
    "weight_rules": [{"kind": "label", **ZONE_A, "weight": 30}],
}  # fmt: skip


def pod(spec_extra: dict[str, Any] | None = None, **metadata: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ml", **metadata},
        "spec": {"containers": [{"name": "c", "image": "i"}], **(spec_extra or {})},
    }


def affinity(**node_affinity: Any) -> dict[str, Any]:
    return {"affinity": {"nodeAffinity": node_affinity}}


def required(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"nodeSelectorTerms": list(terms)}


def mutate(obj: dict[str, Any], the_plan, mode: str = admission.MUTATE) -> dict[str, Any]:
    ops = admission.pod_patch(obj, the_plan, mode)
    patched = jsonpatch.JsonPatch(ops).apply(copy.deepcopy(obj))
    assert admission.pod_patch(patched, the_plan, mode) == []  # a second review: nothing
    return patched


def node_affinity_of(obj: dict[str, Any]) -> dict[str, Any]:
    return obj["spec"]["affinity"]["nodeAffinity"]


REQ = admission.REQUIRED
PREF = admission.PREFERRED


def test_a_pod_without_affinity_gets_one_term_and_the_preferences() -> None:
    patched = mutate(pod(), plan(ML))
    assert node_affinity_of(patched) == {
        REQ: required({"matchExpressions": [GPU, SPOT]}),
        PREF: [{"weight": 30, "preference": {"matchExpressions": [ZONE_A]}}],
    }
    assert patched["metadata"]["annotations"] == {
        admission.ANNOTATION: "ml-on-gpu@v3; extender-only: ml-on-gpu/min-memory"
    }


def test_every_ored_term_carries_the_rules() -> None:
    own = [
        {"matchExpressions": [{"key": "arch", "operator": "In", "values": ["amd64"]}]},
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]},
        {"matchExpressions": [GPU]},  # already has one of them: only the other is added
    ]
    obj = pod(affinity(**{REQ: required(*copy.deepcopy(own))}))
    patched = mutate(obj, plan(ML))
    terms = node_affinity_of(patched)[REQ]["nodeSelectorTerms"]
    assert terms == [
        {"matchExpressions": [own[0]["matchExpressions"][0], GPU, SPOT]},
        {"matchFields": own[1]["matchFields"], "matchExpressions": [GPU, SPOT]},
        {"matchExpressions": [GPU, SPOT]},
    ]


def test_an_empty_term_still_matches_nothing() -> None:
    obj = pod(
        affinity(**{REQ: required({}, {"matchExpressions": []}, {"matchExpressions": [ZONE_A]})})
    )
    patched = mutate(obj, plan(ML))
    terms = node_affinity_of(patched)[REQ]["nodeSelectorTerms"]
    assert terms[:2] == [{}, {"matchExpressions": []}]
    assert terms[2] == {"matchExpressions": [ZONE_A, GPU, SPOT]}
    facts = pod_spec_facts(patched)
    assert facts.matches_node_selection({"zone": "a", "gpu": "A100"}, "n")
    assert not facts.matches_node_selection({"zone": "b", "gpu": "A100"}, "n")


def test_pod_preferences_are_kept_and_ours_added_once() -> None:
    theirs = {"weight": 5, "preference": {"matchExpressions": [SPOT]}}
    obj = pod(affinity(**{PREF: [theirs]}))
    patched = mutate(obj, plan(ML))
    assert node_affinity_of(patched)[PREF] == [
        theirs,
        {"weight": 30, "preference": {"matchExpressions": [ZONE_A]}},
    ]
    assert node_affinity_of(patched)[REQ] == required({"matchExpressions": [GPU, SPOT]})


def test_a_node_selector_is_left_as_it_is() -> None:
    obj = pod({"nodeSelector": {"kubernetes.io/arch": "amd64"}})
    patched = mutate(obj, plan(ML))
    assert patched["spec"]["nodeSelector"] == {"kubernetes.io/arch": "amd64"}
    facts = pod_spec_facts(patched)
    assert facts.matches_node_selection({"kubernetes.io/arch": "amd64", "gpu": "A100"}, "n")
    assert not facts.matches_node_selection({"kubernetes.io/arch": "arm64", "gpu": "A100"}, "n")
    assert not facts.matches_node_selection({"kubernetes.io/arch": "amd64", "gpu": "A10G"}, "n")


@pytest.mark.parametrize(
    "spec_extra",
    [
        {"affinity": {}},
        {"affinity": None},
        {"affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}}},
        {"affinity": {"nodeAffinity": {}}},
        {"affinity": {"nodeAffinity": None}},
        affinity(**{REQ: {}}),
        affinity(**{REQ: required()}),
        affinity(**{REQ: {"nodeSelectorTerms": None}}),
        affinity(**{PREF: []}),
    ],
)
def test_missing_parents_are_created(spec_extra) -> None:
    obj = pod(copy.deepcopy(spec_extra))
    patched = mutate(obj, plan(ML))
    assert node_affinity_of(patched)[REQ] == required({"matchExpressions": [GPU, SPOT]})
    assert node_affinity_of(patched)[PREF] == [
        {"weight": 30, "preference": {"matchExpressions": [ZONE_A]}}
    ]
    other = (spec_extra.get("affinity") or {}).get("podAntiAffinity")
    if other is not None:
        assert patched["spec"]["affinity"]["podAntiAffinity"] == other


def test_annotation_keys_are_escaped_and_others_kept() -> None:
    annotations = {"example.com/a~b": "1", "x": "y"}
    obj = pod(annotations=dict(annotations))
    ops = admission.pod_patch(obj, plan(ML), admission.MUTATE)
    assert ops[-1]["path"] == "/metadata/annotations/policy-portal.io~1placement"
    patched = mutate(obj, plan(ML))
    assert patched["metadata"]["annotations"] == {
        **annotations,
        admission.ANNOTATION: "ml-on-gpu@v3; extender-only: ml-on-gpu/min-memory",
    }
    assert admission.pointer("a/b", "c~d", "~1") == "/a~1b/c~0d/~01"


def test_a_stale_annotation_is_replaced_or_removed() -> None:
    obj = pod(annotations={admission.ANNOTATION: "copied from another pod"})
    patched = mutate(obj, plan(ML))
    assert patched["metadata"]["annotations"][admission.ANNOTATION].startswith("ml-on-gpu@v3")
    nothing = admission.build_plan([], frozenset())
    cleaned = mutate(obj, nothing)
    assert cleaned["metadata"]["annotations"] == {}


def test_exact_node_names_are_match_fields() -> None:
    the_plan = plan(
        {
            "name": "pinned",
            "filter_rules": [
                {"kind": "name", "pattern": "gpu-1", "operator": "NotMatches"},
                {"kind": "name", "pattern": "gpu-*", "operator": "Matches"},
            ],
        }
    )
    patched = mutate(pod(), the_plan)
    field = {"key": "metadata.name", "operator": "NotIn", "values": ["gpu-1"]}
    assert node_affinity_of(patched)[REQ] == required({"matchFields": [field]})
    note = patched["metadata"]["annotations"][admission.ANNOTATION]
    assert note == "pinned@v3; extender-only: pinned/name: Matches gpu-*"
    facts = pod_spec_facts(patched)
    assert facts.matches_node_selection({}, "gpu-2")
    assert not facts.matches_node_selection({}, "gpu-1")


def test_annotate_mode_and_dry_run_write_only_the_annotation() -> None:
    dry = {**ML, "name": "trial", "mode": "dry-run"}
    the_plan = plan(ML, dry)
    annotated = mutate(pod(), the_plan, admission.ANNOTATE)
    assert "affinity" not in annotated["spec"]
    assert annotated["metadata"]["annotations"][admission.ANNOTATION] == (
        "ml-on-gpu@v3; would write: ml-on-gpu/label: gpu In [A100], "
        "ml-on-gpu/label: spot DoesNotExist, ml-on-gpu/label: zone In [a]; "
        "extender-only: ml-on-gpu/min-memory; dry-run: trial@v3; "
        "dry-run would write: trial/label: gpu In [A100], trial/label: spot DoesNotExist, "
        "trial/label: zone In [a]; dry-run extender-only: trial/min-memory"
    )
    only_dry = mutate(pod(), plan(dry))
    assert "affinity" not in only_dry["spec"]
    assert only_dry["metadata"]["annotations"][admission.ANNOTATION].startswith("dry-run: trial@v3")


def test_rules_on_unpushed_labels_stay_with_the_extender() -> None:
    patched = mutate(pod(), plan(ML, unpushed=frozenset({"gpu"})))
    assert node_affinity_of(patched)[REQ] == required({"matchExpressions": [SPOT]})
    assert patched["metadata"]["annotations"][admission.ANNOTATION] == (
        "ml-on-gpu@v3; extender-only: ml-on-gpu/label: gpu In [A100], ml-on-gpu/min-memory"
    )


def test_two_policies_with_the_same_rule_write_it_once() -> None:
    other = {"name": "also-gpu", "filter_rules": [{"kind": "label", **GPU}]}
    patched = mutate(pod(), plan(ML, other))
    assert node_affinity_of(patched)[REQ] == required({"matchExpressions": [GPU, SPOT]})
    assert patched["metadata"]["annotations"][admission.ANNOTATION].startswith(
        "also-gpu@v3, ml-on-gpu@v3;"
    )


def test_a_huge_annotation_is_cut() -> None:
    rules = [
        {"kind": "resource", "resource": "memory", "operator": "Gte", "quantity": f"{i}Mi",
         "message": f"rule-{i:04d}-" + "x" * 40}
        for i in range(1, 200)
    ]  # fmt: skip
    the_plan = plan({"name": "many", "filter_rules": rules})
    value = the_plan.annotation(admission.MUTATE)
    assert len(value) <= admission.MAX_ANNOTATION_CHARS
    assert value.endswith("characters left out)")


KUBELET = {"username": "system:node:node-1", "groups": ["system:nodes", "system:authenticated"]}
DS_CONTROLLER = {"username": "system:serviceaccount:kube-system:daemon-set-controller"}
DS_OWNER = [
    {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "uid": "u", "controller": True}
]


@pytest.mark.parametrize(
    ("obj", "namespace", "user", "reason"),
    [
        (pod({"nodeName": "n1"}), "ml", {}, admission.SKIP_BOUND),
        (pod(annotations={"kubernetes.io/config.mirror": "abc"}), "ml", KUBELET,
         admission.SKIP_MIRROR),
        (pod(ownerReferences=DS_OWNER), "ml", DS_CONTROLLER, admission.SKIP_DAEMONSET),
        (pod(ownerReferences=DS_OWNER), "ml", {"username": "system:kube-controller-manager"},
         admission.SKIP_DAEMONSET),
        (pod(), "kube-system", {}, admission.SKIP_NAMESPACE),
    ],
)  # fmt: skip
def test_pods_never_touched(obj, namespace, user, reason) -> None:
    assert admission.skip_reason(obj, namespace, frozenset({"kube-system"}), **user) == reason


@pytest.mark.parametrize(
    ("obj", "user"),
    [
        # The opt-out label on the pod itself: its author set it.
        (pod(labels={"policy-portal.io/admission": "skip"}), {}),
        # A mirror annotation from anyone but a kubelet (or a node name without the group).
        (pod(annotations={"kubernetes.io/config.mirror": "abc"}), {"username": "alice"}),
        (pod(annotations={"kubernetes.io/config.mirror": "abc"}),
         {"username": "system:node:n1", "groups": []}),
        # A DaemonSet owner claimed by whoever created the pod.
        (pod(ownerReferences=DS_OWNER), {"username": "alice", "groups": ["system:nodes"]}),
        (pod(ownerReferences=DS_OWNER), KUBELET),
    ],
)  # fmt: skip
def test_nothing_a_pod_author_writes_opts_it_out(obj, user) -> None:
    assert admission.skip_reason(obj, "ml", frozenset({"kube-system"}), **user) is None


def test_a_patch_past_its_bound_stops_with_patch_too_large() -> None:
    terms = [{"matchExpressions": [{"key": f"k{i}", "operator": "Exists"}]} for i in range(50)]
    big = pod({"affinity": {"nodeAffinity": {admission.REQUIRED: {"nodeSelectorTerms": terms}}}})
    the_plan = plan(ML)
    assert len(admission.pod_patch(big, the_plan, admission.MUTATE, max_ops=1000)) > 50
    with pytest.raises(admission.PatchTooLarge, match="50 node selector terms"):
        admission.pod_patch(big, the_plan, admission.MUTATE, max_ops=20)


def test_pods_that_are_touched() -> None:
    replica = pod(
        ownerReferences=[
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "r", "controller": True},
            {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "d", "controller": False},
        ],
        labels={"policy-portal.io/admission": "yes"},
    )
    assert admission.skip_reason(replica, "ml", frozenset({"kube-system"})) is None
