"""The admission webhook against a direct caller and a pod's author (docs/admission.md):
reviews and patches are bounded with a clear answer, and nothing written into a pod opts it out
(only its namespace's label, which kube-apiserver applies before sending, does)."""

from __future__ import annotations

import pytest

from tests.extender.admission_support import call, pod, review, sample
from tests.extender.extender_support import extender
from tests.extender.test_admission_wire import URL, prod

__all__ = ["extender", "prod"]

pytestmark = pytest.mark.django_db

DS_OWNER = {
    "apiVersion": "apps/v1",
    "kind": "DaemonSet",
    "name": "agent",
    "uid": "6f0d0b8e-2d2b-4b9e-9a51-0d6f3c1d2f10",
    "controller": True,
    "blockOwnerDeletion": True,
}


def as_user(body: dict, username: str, groups: list[str]) -> dict:
    body["request"]["userInfo"] = {"username": username, "uid": "u", "groups": groups}
    return body


def mutated(answer) -> bool:
    assert answer.status == 200, answer.body
    return any(op["path"].startswith("/spec/") for op in answer.patch)


@pytest.mark.parametrize(
    "claim",
    [
        {"labels": {"app": "web", "policy-portal.io/admission": "skip"}},
        {"ownerReferences": [DS_OWNER]},
        {"annotations": {"kubernetes.io/config.mirror": "d41d8cd98f00b204e9800998ecf8427e"}},
    ],
    ids=["opt-out-label", "daemonset-owner", "mirror-annotation"],
)
def test_a_pod_author_cannot_opt_a_pod_out(prod, claim: dict) -> None:
    """A user (or a controller acting for one) creating the pod: the claim changes nothing."""
    body = as_user(
        review(pod(**claim)), "alice", ["system:authenticated", "developers", "system:nodes"]
    )
    assert mutated(call(URL, body))


def test_a_kubelets_mirror_pod_and_the_daemonset_controllers_pods_are_left_alone(prod) -> None:
    mirror = pod(annotations={"kubernetes.io/config.mirror": "d41d8cd98f00b204e9800998ecf8427e"})
    kubelet = as_user(review(mirror), "system:node:gpu-1", ["system:nodes", "system:authenticated"])
    answer = call(URL, kubelet)
    assert answer.status == 200
    assert answer.patch == []
    controller = as_user(
        review(pod(ownerReferences=[DS_OWNER])),
        "system:serviceaccount:kube-system:daemon-set-controller",
        ["system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"],
    )
    answer = call(URL, controller)
    assert answer.status == 200
    assert answer.patch == []


def test_an_oversize_review_is_refused_before_it_is_decoded(prod) -> None:
    """The default bound (2 MiB): a 3.6 MB review is 413 with the setting's name."""
    padding = "x" * (3_600_000)
    answer = call(URL, review(pod(annotations={"padding": padding})))
    assert answer.status == 413
    status = answer.json()
    assert status["kind"] == "Status"
    assert "ADMISSION_MAX_BODY_BYTES" in status["message"]


def many_terms(count: int) -> dict:
    terms = [
        {"matchExpressions": [{"key": f"rack-{i}", "operator": "Exists"}]} for i in range(count)
    ]
    spec = {
        "containers": [{"name": "app", "image": "nginx"}],
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}
            }
        },
    }
    return pod(spec=spec)


def test_a_pod_whose_patch_is_too_large_is_refused_with_a_message(prod) -> None:
    """Each of the pod's terms gets the rules: 20,000 terms would be a patch of megabytes.
    The pod is refused (allowed: false) whatever the failure policy, not admitted unpatched."""
    before = sample("admission_errors_total", {"cluster": "prod", "kind": "patch_too_large"})
    body = review(many_terms(20_000))
    answer = call(URL, body)
    assert answer.status == 200
    response = answer.response
    assert response["uid"] == body["request"]["uid"]
    assert response["allowed"] is False
    assert "patch" not in response
    assert response["status"]["code"] == 400
    assert "ADMISSION_MAX_PATCH_OPS" in response["status"]["message"]
    assert "20000 node selector terms" in response["status"]["message"]
    after = sample("admission_errors_total", {"cluster": "prod", "kind": "patch_too_large"})
    assert after == before + 1


def test_the_patch_byte_bound_refuses_too(prod, monkeypatch) -> None:
    monkeypatch.setattr("extender.admission.handler.MAX_PATCH_BYTES", 2_000)
    answer = call(URL, review(many_terms(40)))
    assert answer.status == 200
    assert answer.response["allowed"] is False
    assert "ADMISSION_MAX_PATCH_BYTES (2000)" in answer.response["status"]["message"]


def test_an_ordinary_pod_with_a_few_terms_is_patched(prod) -> None:
    answer = call(URL, review(many_terms(5)))
    assert answer.response["allowed"] is True
    assert len(answer.patch) >= 5
