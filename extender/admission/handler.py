"""The WSGI application kube-apiserver calls: ``POST /admission/<cluster>/mutate``.

Like the extender's verbs it is no Django view and reads only the snapshot in memory: no
database, Redis or settings lookups per review (a test counts the queries). Callers are held
to the same rules as the verbs: ``EXTENDER_ALLOWED_CIDRS`` here, the client certificate in
``extender.server``. A review the webhook cannot read is answered 4xx with a ``metav1.Status``;
nothing a caller sends makes it answer 500. Reviews it has nothing to do for — another
operation, a subresource, another kind, a cluster in ``admission: off``, a pod it never touches —
are allowed unchanged. Metrics are counted once the response is sent.

Bounds: a review over ``ADMISSION_MAX_BODY_BYTES`` is answered 413 before it is decoded (the
default, 2 MiB, is above anything kube-apiserver can store: etcd takes 1.5 MiB per object); a
pod whose patch would take more than ``ADMISSION_MAX_PATCH_OPS`` operations or
``ADMISSION_MAX_PATCH_BYTES`` bytes is *denied* with a message saying so — refused, not passed
through unpatched, so that no one can opt a pod out by bloating it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from engine import admission as engine
from engine.pods import PodFacts
from engine.snapshot import ClusterSnapshot, Snapshot
from extender import access
from extender.admission import metrics
from extender.admission.review import (
    AdmissionRequest,
    ReviewError,
    decode,
    decode_object,
    deny,
    encode,
)
from extender.admission.review import status as status_body
from extender.holder import holder

logger = logging.getLogger(__name__)

PREFIX = "/admission/"
VERB = "mutate"
# Read once: the hot path does not go through Django's settings object.
MAX_BODY_BYTES: int = settings.ADMISSION_MAX_BODY_BYTES
MAX_PATCH_OPS: int = settings.ADMISSION_MAX_PATCH_OPS
MAX_PATCH_BYTES: int = settings.ADMISSION_MAX_PATCH_BYTES
CALLERS = access.from_settings(settings.EXTENDER_ALLOWED_CIDRS, "")[0]
# Plans kept per cluster snapshot (one per distinct set of policies pods select).
MAX_CACHED_PLANS = 256
_READ_CHUNK = 1 << 16

# Why a review passes through unchanged before the pod is looked at.
SKIP_OFF = "admission_off"
SKIP_OPERATION = "not_create"
SKIP_SUBRESOURCE = "subresource"
SKIP_KIND = "not_a_pod"

StartResponse = Callable[..., object]
_HEADERS = [("Content-Type", "application/json")]


class Denied(ReviewError):
    """A pod the webhook refuses (answered 200 with ``allowed: false``, counted as an error)."""


def _patch_too_large(what: str) -> Denied:
    return Denied(
        400,
        "patch_too_large",
        f"policy-portal admission: {what}; the webhook refuses the pod rather than admit it "
        "without its placement rules (simplify its node affinity)",
    )


@dataclass(slots=True)
class Decision:
    """What one review decided: the outcome for the metrics, why it skipped, the patch."""

    outcome: str
    reason: str = ""
    patch: list[dict[str, Any]] = field(default_factory=list)


def _route(path: str) -> str:
    parts = path[len(PREFIX) :].split("/") if path.startswith(PREFIX) else []
    if len(parts) == 2 and parts[0] and parts[1] == VERB:
        return parts[0]
    raise ReviewError(
        404, "not_found", f"no admission endpoint at {path!r}: use POST /admission/<cluster>/mutate"
    )


def _too_large(size: str) -> ReviewError:
    return ReviewError(
        413,
        "too_large",
        f"AdmissionReview of {size} is over the webhook's limit of {MAX_BODY_BYTES} bytes "
        "(ADMISSION_MAX_BODY_BYTES)",
    )


def _read_body(environ: Mapping[str, Any]) -> bytes:
    stream = environ["wsgi.input"]
    declared = environ.get("CONTENT_LENGTH") or ""
    if declared:
        if not (declared.isascii() and declared.isdigit()):
            raise ReviewError(400, "bad_request", f"invalid Content-Length {declared!r}")
        length = int(declared)
        if length > MAX_BODY_BYTES:
            raise _too_large(f"{length} bytes")
        body: bytes = stream.read(length) if length else b""
        if len(body) < length:
            raise ReviewError(
                400, "bad_request", f"request body ended after {len(body)} of {length} bytes"
            )
        return body
    if not environ.get("wsgi.input_terminated"):
        return b""
    chunks: list[bytes] = []
    total = 0
    while True:
        chunk = stream.read(min(_READ_CHUNK, MAX_BODY_BYTES + 1 - total))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        total += len(chunk)
        if total > MAX_BODY_BYTES:
            raise _too_large(f"more than {MAX_BODY_BYTES} bytes")


def _snapshot() -> Snapshot:
    snapshot = holder.snapshot or holder.restore()
    if snapshot is None:
        raise ReviewError(
            503,
            "no_snapshot",
            "no policy snapshot loaded yet (the webhook never reads the database itself); "
            "see the portal's log",
        )
    return snapshot


def _plan(cluster: ClusterSnapshot, positions: tuple[int, ...]) -> engine.AdmissionPlan:
    plans = cluster.admission_plans
    plan: engine.AdmissionPlan | None = plans.get(positions)
    if plan is None:
        policies = [cluster.evaluator.policies[p] for p in positions]
        plan = engine.build_plan(policies, cluster.unpushed_keys)
        if len(plans) >= MAX_CACHED_PLANS:
            plans.clear()
        plans[positions] = plan
    return plan


def _labels(pod: Mapping[str, Any]) -> dict[str, str]:
    metadata = pod.get("metadata")
    labels = metadata.get("labels") if isinstance(metadata, Mapping) else None
    if labels is None:
        return {}
    if not isinstance(labels, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in labels.items()
    ):
        raise ReviewError(400, "bad_request", "metadata.labels must map strings to strings")
    return labels


def decide(cluster: ClusterSnapshot, request: AdmissionRequest) -> Decision:
    """What the webhook does with one review, from the cluster's snapshot alone."""
    if cluster.admission == engine.OFF:
        return Decision(metrics.SKIPPED, SKIP_OFF)
    if request.operation != "CREATE":
        return Decision(metrics.SKIPPED, SKIP_OPERATION)
    if request.subResource:
        return Decision(metrics.SKIPPED, SKIP_SUBRESOURCE)
    kind, resource = request.kind, request.resource
    if (
        kind is None
        or (kind.group, kind.kind) != ("", "Pod")
        or resource is None
        or (resource.group, resource.resource) != ("", "pods")
    ):
        return Decision(metrics.SKIPPED, SKIP_KIND)
    pod = decode_object(request)
    labels = _labels(pod)
    metadata = pod.get("metadata")
    namespace = request.namespace
    if not namespace and isinstance(metadata, Mapping):
        namespace = str(metadata.get("namespace") or "")
    user = request.userInfo
    try:
        reason = engine.skip_reason(
            pod,
            namespace,
            cluster.admission_excluded_namespaces,
            username=user.username if user is not None else "",
            groups=user.groups if user is not None else (),
        )
        if reason is not None:
            return Decision(metrics.SKIPPED, reason)
        facts = PodFacts(namespace=namespace, name=request.name, labels=labels)
        plan = _plan(cluster, cluster.evaluator.active(facts))
        patch = engine.pod_patch(pod, plan, cluster.admission, max_ops=MAX_PATCH_OPS)
    except engine.PodShapeError as exc:
        raise ReviewError(400, "bad_request", f"request.object: {exc}") from None
    except engine.PatchTooLarge as exc:
        raise _patch_too_large(f"{exc} (ADMISSION_MAX_PATCH_OPS)") from None
    if not patch:
        why = engine.SKIP_UNCHANGED if plan.selects else engine.SKIP_NO_POLICY
        return Decision(metrics.SKIPPED, why)
    outcome = metrics.MUTATED if engine.changes_spec(patch) else metrics.ANNOTATED
    return Decision(outcome, "", patch)


def _respond(start_response: StartResponse, code: int, body: bytes) -> list[bytes]:
    reason = {200: "OK", 404: "Not Found", 413: "Content Too Large"}.get(code, "Error")
    start_response(f"{code} {reason}", [*_HEADERS, ("Content-Length", str(len(body)))])
    return [body]


def _known(snapshot: Snapshot | None) -> Iterable[str]:
    return snapshot.clusters if snapshot is not None else ()


def application(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
    """Serve one admission review."""
    started = time.perf_counter()
    name = ""
    try:
        name = _route(environ.get("PATH_INFO", ""))
        caller = environ.get("REMOTE_ADDR", "")
        if CALLERS.networks is not None and not CALLERS.allows(caller):
            raise ReviewError(
                403, "forbidden", f"{caller or 'this caller'} is not in EXTENDER_ALLOWED_CIDRS"
            )
        method = environ.get("REQUEST_METHOD", "")
        if method != "POST":
            raise ReviewError(405, "method_not_allowed", f"method {method} is not allowed: POST")
        content_type = environ.get("CONTENT_TYPE", "").split(";", 1)[0].strip().lower()
        if content_type != "application/json":
            raise ReviewError(
                415,
                "unsupported_media_type",
                f"Content-Type {content_type or '(none)'} is not application/json",
            )
        request = decode(_read_body(environ))
        snapshot = _snapshot()
        cluster = snapshot.clusters.get(name)
        if cluster is None:
            raise ReviewError(404, "unknown_cluster", f"unknown cluster {name!r}")
        decision = decide(cluster, request)
        body = encode(request.uid, decision.patch)
        if len(body) > MAX_PATCH_BYTES:
            raise _patch_too_large(
                f"the response with this pod's patch would be {len(body)} bytes, over "
                f"ADMISSION_MAX_PATCH_BYTES ({MAX_PATCH_BYTES})"
            )
    except Denied as exc:
        metrics.observe_error(name, exc.kind, _known(holder.snapshot))
        return _respond(start_response, 200, deny(request.uid, exc.status, exc.message))
    except ReviewError as exc:
        metrics.observe_error(name, exc.kind, _known(holder.snapshot))
        return _respond(start_response, exc.status, status_body(exc.status, exc.message))
    except Exception as exc:
        logger.exception("admission review for cluster %r failed", name)
        metrics.observe_error(name, "internal", _known(holder.snapshot))
        message = f"internal error in the admission webhook ({type(exc).__name__}); see its log"
        return _respond(start_response, 500, status_body(500, message))
    start_response("200 OK", [*_HEADERS, ("Content-Length", str(len(body)))])
    return _Answered(body, cluster.name, decision, time.perf_counter() - started)


class _Answered(list[bytes]):
    """The response body; the review is counted when the server closes the response."""

    __slots__ = ("cluster", "decision", "seconds")

    def __init__(self, body: bytes, cluster: str, decision: Decision, seconds: float) -> None:
        super().__init__((body,))
        self.cluster = cluster
        self.decision = decision
        self.seconds = seconds

    def close(self) -> None:
        try:
            metrics.observe(self.cluster, self.decision.outcome, self.decision.reason, self.seconds)
        except Exception:  # counting must never cost the API server its answer
            logger.exception("counting an admission review failed")
