"""The admission webhook's wire: AdmissionReview v1 in and out, as the Kubernetes documentation
and the API types (k8s.io/api/admission/v1) shape it; bad reviews get a 4xx Status, never 500;
what it has nothing to do for passes unchanged; errors are counted."""

from __future__ import annotations

import base64
import copy
import ipaddress

import orjson
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from extender.access import Allowlist
from extender.holder import holder
from extender.tls import CLIENT_ALLOWED
from inventory.services import cluster_update
from policies.services import policy_create
from tests.extender.admission_support import call, pod, review, sample
from tests.extender.extender_support import extender, reload
from tests.factories import load_nodes, make_cluster, node_object

__all__ = ["extender"]

pytestmark = pytest.mark.django_db
URL = "/admission/prod/mutate"

# The request example of the Kubernetes documentation (Dynamic Admission Control, "Request"),
# comments left out: an UPDATE of a Deployment's scale subresource.
DOCS_REQUEST = {
    "apiVersion": "admission.k8s.io/v1",
    "kind": "AdmissionReview",
    "request": {
        "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
        "kind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
        "resource": {"group": "apps", "version": "v1", "resource": "deployments"},
        "subResource": "scale",
        "requestKind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
        "requestResource": {"group": "apps", "version": "v1", "resource": "deployments"},
        "requestSubResource": "scale",
        "name": "my-deployment",
        "namespace": "my-namespace",
        "operation": "UPDATE",
        "userInfo": {
            "username": "admin",
            "uid": "014fbff9a07c",
            "groups": ["system:authenticated", "my-admin-group"],
            "extra": {"some-key": ["some-value1", "some-value2"]},
        },
        "object": {"apiVersion": "autoscaling/v1", "kind": "Scale"},
        "oldObject": {"apiVersion": "autoscaling/v1", "kind": "Scale"},
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": "UpdateOptions"},
        "dryRun": False,
    },
}


@pytest.fixture
def prod(extender: None):
    cluster = make_cluster("prod", admission="mutate")
    load_nodes(
        cluster,
        [
            node_object("gpu-1", {"gpu": "A100", "zone": "a"}),
            node_object("gpu-2", {"gpu": "A10G", "zone": "b"}),
            node_object("cpu-1", {"zone": "a"}),
        ],
    )
    policy_create(
        actor=None,
        data={
            "name": "ml-on-gpu",
            "pod_selector": {"namespaces": ["ml"]},
            "filter_rules": [
                {"kind": "label", "key": "gpu", "operator": "In", "values": ["A100"]},
                {
                    "kind": "resource",
                    "resource": "memory",
                    "operator": "Gte",
                    "quantity": "8Gi",
                    "message": "min-memory",
                },
            ],
            "weight_rules": [{"kind": "label", "key": "zone", "operator": "In",
                              "values": ["a"], "weight": 40}],
        },
    )  # fmt: skip
    reload()
    return cluster


def test_the_documentation_example_passes_unchanged(prod) -> None:
    answer = call(URL, DOCS_REQUEST)
    assert answer.status == 200
    assert answer.json() == {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": "705ab4f5-6393-11e8-b7cc-42010a800002", "allowed": True},
    }


def test_a_pod_create_gets_the_patch_as_the_types_define_it(prod) -> None:
    body = review(pod(), uid="e911857d-c318-11e8-bbad-025000000001")
    answer = call(URL, body)
    assert answer.status == 200, answer.body
    assert answer.headers["Content-Type"] == "application/json"
    document = answer.json()
    assert (document["apiVersion"], document["kind"]) == ("admission.k8s.io/v1", "AdmissionReview")
    response = document["response"]
    assert set(response) == {"uid", "allowed", "patchType", "patch"}
    assert response["uid"] == "e911857d-c318-11e8-bbad-025000000001"
    assert response["allowed"] is True
    assert response["patchType"] == "JSONPatch"
    ops = orjson.loads(base64.b64decode(response["patch"], validate=True))
    assert ops[0] == {
        "op": "add",
        "path": "/spec/affinity",
        "value": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["A100"]}]}
                    ]
                },
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 40,
                        "preference": {
                            "matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]
                        },
                    }
                ],
            }
        },
    }
    assert ops[1] == {
        "op": "add",
        "path": "/metadata/annotations",
        "value": {
            "policy-portal.io/placement": "ml-on-gpu@v1; extender-only: ml-on-gpu/min-memory"
        },
    }


def test_a_pod_the_policies_do_not_select_passes_unchanged(prod) -> None:
    answer = call(URL, review(pod(namespace="web")))
    assert answer.status == 200
    assert "patch" not in answer.response
    assert answer.response["allowed"] is True


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"operation": "UPDATE"}, "not_create"),
        ({"operation": "DELETE", "object": None}, "not_create"),
        ({"subResource": "binding"}, "subresource"),
        ({"subResource": "eviction"}, "subresource"),
        ({"kind": {"group": "apps", "version": "v1", "kind": "Deployment"}}, "not_a_pod"),
    ],
)
def test_other_operations_and_subresources_pass_unchanged(prod, changes, reason) -> None:
    body = review(pod())
    body["request"].update(changes)
    before = sample("admission_skipped_total", {"cluster": "prod", "reason": reason})
    answer = call(URL, body)
    assert answer.status == 200
    assert answer.response == {"uid": body["request"]["uid"], "allowed": True}
    after = sample("admission_skipped_total", {"cluster": "prod", "reason": reason})
    assert after == before + 1


def test_admission_off_allows_without_a_patch(prod) -> None:
    cluster_update(actor=None, cluster=prod, data={"admission": "off"})
    reload()
    before = sample("admission_reviews_total", {"cluster": "prod", "outcome": "skipped"})
    answer = call(URL, review(pod()))
    assert answer.status == 200
    assert "patch" not in answer.response
    assert sample("admission_reviews_total", {"cluster": "prod", "outcome": "skipped"}) == (
        before + 1
    )


def test_annotate_writes_only_the_annotation(prod) -> None:
    cluster_update(actor=None, cluster=prod, data={"admission": "annotate"})
    reload()
    answer = call(URL, review(pod()))
    assert answer.patch == [
        {
            "op": "add",
            "path": "/metadata/annotations",
            "value": {
                "policy-portal.io/placement": "ml-on-gpu@v1; would write: ml-on-gpu/label: gpu "
                "In [A100], ml-on-gpu/label: zone In [a]; extender-only: ml-on-gpu/min-memory"
            },
        }
    ]


def status_of(answer) -> dict:
    document = answer.json()
    assert document["kind"] == "Status"
    assert document["status"] == "Failure"
    assert document["code"] == answer.status
    return document


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        (b"", "empty"),
        (b"{not json", "not valid JSON"),
        (b"[]", "not an AdmissionReview"),
        (b'"review"', "not an AdmissionReview"),
        (b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}', "no request"),
        (b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{}}', "uid"),
        (
            b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":5}}',
            "request.uid",
        ),
        (
            b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":""}}',
            "uid is empty",
        ),
        (
            b'{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview",'
            b'"request":{"uid":"u"}}',
            "admissionReviewVersions: [v1]",
        ),
        (b"\xff\xfe", "not valid JSON"),
        (b"[" * 100_000, "AdmissionReview"),
        (
            b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u",'
            b'"operation":"CREATE","kind":{"kind":"Pod","version":"v1"},'
            b'"resource":{"resource":"pods","version":"v1"},"object":'
            + b"[" * 100_000
            + b"]" * 100_000
            + b"}}",
            "nested too deeply",
        ),
    ],
)
def test_malformed_reviews_are_400_with_a_status(prod, body, fragment) -> None:
    before = sample("admission_reviews_total", {"cluster": "prod", "outcome": "error"})
    answer = call(URL, body)
    assert answer.status == 400, answer.body
    assert fragment in status_of(answer)["message"]
    assert sample("admission_reviews_total", {"cluster": "prod", "outcome": "error"}) == before + 1


@pytest.mark.parametrize(
    ("mutate", "fragment"),
    [
        (lambda r: r["request"].update(object=None), "request.object is missing"),
        (lambda r: r["request"].update(object=["pod"]), "must be a JSON object"),
        (lambda r: r["request"]["object"]["metadata"].update(labels={"a": 1}), "labels"),
        (lambda r: r["request"]["object"]["metadata"].update(labels=["a"]), "labels"),
        (lambda r: r["request"]["object"].update(spec="x"), "spec"),
        (lambda r: r["request"]["object"]["spec"].update(affinity=[]), "spec.affinity"),
        (
            lambda r: r["request"]["object"]["spec"].update(
                affinity={"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": {}}}
            ),
            "must be a list",
        ),
        (lambda r: r["request"].update(kind="Pod"), "request.kind"),
    ],
)
def test_reviews_of_pods_that_are_not_pods_are_400(prod, mutate, fragment) -> None:
    body = copy.deepcopy(review(pod()))
    mutate(body)
    answer = call(URL, body)
    assert answer.status == 400, answer.body
    assert fragment in status_of(answer)["message"]


def test_oversize_reviews_are_413(prod, settings, monkeypatch) -> None:
    monkeypatch.setattr("extender.admission.handler.MAX_BODY_BYTES", 10_000)
    big = review(pod(labels={"app": "x" * 60}, annotations={"blob": "y" * 20_000}))
    declared = call(URL, big)
    assert declared.status == 413
    assert "ADMISSION_MAX_BODY_BYTES" in status_of(declared)["message"]
    chunked = call(URL, big, chunked=True)
    assert chunked.status == 413
    lying = call(URL, b"{}", content_length="99999999")
    assert lying.status == 413
    assert call(URL, b"{}", content_length="12abc").status == 400
    assert call(URL, b"{}", content_length="100").status == 400  # the body ended early


def test_unknown_cluster_wrong_method_and_media_type(prod) -> None:
    before = sample("admission_errors_total", {"cluster": "other", "kind": "unknown_cluster"})
    unknown = call("/admission/nope/mutate", review(pod()))
    assert unknown.status == 404
    assert "unknown cluster 'nope'" in status_of(unknown)["message"]
    assert sample("admission_errors_total", {"cluster": "other", "kind": "unknown_cluster"}) == (
        before + 1
    )
    assert call("/admission/prod/validate", review(pod())).status == 404
    assert call("/admission/prod", review(pod())).status == 404
    assert call(URL, b"", method="GET").status == 405
    assert call(URL, review(pod()), content_type="text/plain").status == 415
    assert call(URL, review(pod()), content_type="application/json; charset=utf-8").status == 200


def test_no_snapshot_is_503_without_touching_the_database(prod, monkeypatch) -> None:
    holder.snapshot = None
    monkeypatch.setattr(holder, "restore", lambda: None)
    with CaptureQueriesContext(connection) as queries:
        answer = call(URL, review(pod()))
    assert answer.status == 503
    assert len(queries) == 0


def test_an_internal_error_is_500_and_counted(prod, monkeypatch) -> None:
    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr("engine.admission.pod_patch", broken)
    before = sample("admission_errors_total", {"cluster": "prod", "kind": "internal"})
    answer = call(URL, review(pod()))
    assert answer.status == 500
    assert "boom" not in answer.body.decode()  # the log has it, the caller gets the type
    assert sample("admission_errors_total", {"cluster": "prod", "kind": "internal"}) == before + 1


def test_no_database_queries_per_review(prod) -> None:
    bodies = [
        review(pod()),
        review(pod(namespace="web")),
        review(pod(spec={"containers": [{"name": "a", "image": "b"}], "nodeName": "gpu-1"})),
        DOCS_REQUEST,
        b"not json",
    ]
    for body in bodies:  # warm-up
        call(URL, body)
    with CaptureQueriesContext(connection) as queries:
        statuses = [call(URL, body).status for body in bodies]
        statuses.append(call("/admission/nope/mutate", bodies[0]).status)
    assert statuses == [200, 200, 200, 200, 400, 404]
    assert len(queries) == 0, [q["sql"] for q in queries]


def test_callers_are_held_to_the_verbs_rules(prod, monkeypatch) -> None:
    allowlist = Allowlist([ipaddress.ip_network("10.1.0.0/16")])
    monkeypatch.setattr("extender.admission.handler.CALLERS", allowlist)
    outside = call(URL, review(pod()), remote_addr="10.0.0.1")
    assert outside.status == 403
    assert "EXTENDER_ALLOWED_CIDRS" in status_of(outside)["message"]
    assert call(URL, review(pod()), remote_addr="10.1.2.3").status == 200
    # Over TLS with a client CA, a connection without an allowed certificate is refused
    # before the review is read (extender.server, as for the verbs).
    refused = call(URL, review(pod()), remote_addr="10.1.2.3",
                   environ_extra={CLIENT_ALLOWED: False})  # fmt: skip
    assert refused.status == 403
    assert "client certificate" in refused.json()["Error"]
