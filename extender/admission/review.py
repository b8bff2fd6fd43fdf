"""``admission.k8s.io/v1`` AdmissionReview: decoding the request, encoding the response.

Only what the webhook reads is decoded (msgspec Structs skip the rest, ``oldObject`` and
``options`` included; of ``userInfo`` the username and groups, which say whether a kubelet or
the DaemonSet controller made the request); the object under review is kept as raw JSON and
decoded only for a pod CREATE. Keys are the Kubernetes JSON names (camelCase, case-sensitive,
as kube-apiserver writes them). Errors are answered as a ``metav1.Status``, which kube-apiserver
decodes and quotes in its own error ("failed calling webhook ...: <message>").
"""

from __future__ import annotations

import base64
from typing import Any

import msgspec
import orjson
from msgspec import Raw, Struct

API_VERSION = "admission.k8s.io/v1"
KIND = "AdmissionReview"
JSON_PATCH = "JSONPatch"


class ReviewError(Exception):
    """A review the webhook refuses: HTTP ``status`` with a Status body; ``kind`` labels the
    error metric (bad_json, bad_request, unknown_cluster, too_large, ...)."""

    def __init__(self, status: int, kind: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind
        self.message = message


class GroupVersionKind(Struct):
    group: str = ""
    version: str = ""
    kind: str = ""


class GroupVersionResource(Struct):
    group: str = ""
    version: str = ""
    resource: str = ""


class UserInfo(Struct):
    username: str = ""
    groups: list[str] = []


class AdmissionRequest(Struct):
    uid: str
    kind: GroupVersionKind | None = None
    resource: GroupVersionResource | None = None
    subResource: str = ""  # Kubernetes spells the fields so
    name: str = ""
    namespace: str = ""
    operation: str = ""
    object: Raw = Raw(b"null")  # raw: decoded only for a pod CREATE
    dryRun: bool | None = None
    userInfo: UserInfo | None = None


class AdmissionReview(Struct):
    apiVersion: str = ""
    kind: str = ""
    request: AdmissionRequest | None = None


_REVIEW = msgspec.json.Decoder(AdmissionReview)


def _plain(exc: Exception) -> str:
    return str(exc).replace("`", "")


def decode(body: bytes) -> AdmissionRequest:
    """The request of a v1 AdmissionReview; ReviewError (400) naming what is wrong."""
    if not body:
        raise ReviewError(400, "bad_json", "request body is empty: expected an AdmissionReview")
    try:
        review = _REVIEW.decode(body)
    except msgspec.ValidationError as exc:
        raise ReviewError(400, "bad_request", f"not an AdmissionReview: {_plain(exc)}") from None
    except msgspec.DecodeError as exc:
        raise ReviewError(400, "bad_json", f"request body is not valid JSON: {exc}") from None
    except RecursionError:
        raise ReviewError(400, "bad_json", "request body is nested too deeply") from None
    if review.apiVersion != API_VERSION or review.kind != KIND:
        got = f"{review.apiVersion or '(no apiVersion)'} {review.kind or '(no kind)'}"
        raise ReviewError(
            400,
            "bad_request",
            f"expected apiVersion {API_VERSION} kind {KIND}, got {got}: the webhook "
            "configuration must say admissionReviewVersions: [v1]",
        )
    request = review.request
    if request is None:
        raise ReviewError(400, "bad_request", "the AdmissionReview has no request")
    if not request.uid:
        raise ReviewError(400, "bad_request", "request.uid is empty: the response must echo it")
    return request


def decode_object(request: AdmissionRequest) -> dict[str, Any]:
    """``request.object`` as a dict; ReviewError (400) when it is missing or not an object."""
    raw = bytes(request.object)
    if raw == b"null":
        raise ReviewError(400, "bad_request", "request.object is missing: a CREATE carries the pod")
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:  # msgspec has checked it already; kept for safety
        raise ReviewError(400, "bad_json", f"request.object is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ReviewError(400, "bad_request", "request.object must be a JSON object (the pod)")
    return value


def encode(uid: str, patch: list[dict[str, Any]] | None = None) -> bytes:
    """The response: allowed, with the JSON Patch (base64) when there is one."""
    response: dict[str, Any] = {"uid": uid, "allowed": True}
    if patch:
        response["patchType"] = JSON_PATCH
        response["patch"] = base64.b64encode(orjson.dumps(patch)).decode("ascii")
    return orjson.dumps({"apiVersion": API_VERSION, "kind": KIND, "response": response})


def deny(uid: str, code: int, message: str) -> bytes:
    """The response refusing the pod itself (whatever the webhook's failurePolicy): kube-apiserver
    answers the pod's creator with ``message``."""
    response = {
        "uid": uid,
        "allowed": False,
        "status": {"code": code, "message": message, "reason": _REASONS.get(code, "Unknown")},
    }
    return orjson.dumps({"apiVersion": API_VERSION, "kind": KIND, "response": response})


_REASONS = {
    400: "BadRequest",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    413: "RequestEntityTooLarge",
    415: "UnsupportedMediaType",
    500: "InternalError",
    503: "ServiceUnavailable",
}


def status(code: int, message: str) -> bytes:
    """A ``metav1.Status`` failure body."""
    return orjson.dumps(
        {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": _REASONS.get(code, "Unknown"),
            "code": code,
        }
    )
