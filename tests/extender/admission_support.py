"""Calling the admission webhook through the extender server's own WSGI application in-process,
and building AdmissionReviews the way kube-apiserver sends them."""

from __future__ import annotations

import base64
import io
import uuid
from dataclasses import dataclass
from typing import Any

import orjson
from prometheus_client import REGISTRY

from extender.server import application


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return orjson.loads(self.body)

    @property
    def response(self) -> dict[str, Any]:
        return self.json()["response"]

    @property
    def patch(self) -> list[dict[str, Any]]:
        """The JSON Patch, decoded ([] when the response carries none)."""
        response = self.response
        if "patch" not in response:
            return []
        assert response["patchType"] == "JSONPatch"
        return orjson.loads(base64.b64decode(response["patch"]))


def call(
    path: str,
    body: bytes | Any,
    *,
    method: str = "POST",
    content_type: str = "application/json",
    content_length: str | None = None,
    chunked: bool = False,
    remote_addr: str = "10.0.0.1",
    environ_extra: dict[str, Any] | None = None,
) -> Answer:
    data = body if isinstance(body, bytes) else orjson.dumps(body)
    captured: dict[str, Any] = {}

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> None:
        captured["status"] = int(status.split(" ", 1)[0])
        captured["headers"] = dict(headers)

    environ: dict[str, Any] = {
        "REQUEST_METHOD": method,
        "PATH_INFO": path,
        "SERVER_NAME": "testserver",
        "SERVER_PORT": "8001",
        "CONTENT_TYPE": content_type,
        "wsgi.input": io.BytesIO(data),
        "wsgi.url_scheme": "https",
        "REMOTE_ADDR": remote_addr,
        **(environ_extra or {}),
    }
    if chunked:
        environ["wsgi.input_terminated"] = True
    else:
        environ["CONTENT_LENGTH"] = str(len(data)) if content_length is None else content_length
    result = application(environ, start_response)
    out = b"".join(result)
    if hasattr(result, "close"):
        result.close()
    return Answer(captured["status"], captured["headers"], out)


def pod(
    name: str = "web-1",
    namespace: str = "ml",
    labels: dict[str, str] | None = None,
    spec: dict[str, Any] | None = None,
    **metadata: Any,
) -> dict[str, Any]:
    """A v1 Pod as kube-apiserver puts it in a CREATE review (defaults applied)."""
    return {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": labels if labels is not None else {"app": "web"},
            "creationTimestamp": None,
            **metadata,
        },
        "spec": spec
        if spec is not None
        else {
            "containers": [{"name": "app", "image": "nginx", "resources": {}}],
            "restartPolicy": "Always",
            "dnsPolicy": "ClusterFirst",
            "schedulerName": "default-scheduler",
        },
        "status": {},
    }


def review(
    obj: dict[str, Any] | None,
    *,
    operation: str = "CREATE",
    sub_resource: str = "",
    kind: tuple[str, str, str] = ("", "v1", "Pod"),
    resource: tuple[str, str, str] = ("", "v1", "pods"),
    namespace: str | None = None,
    uid: str | None = None,
) -> dict[str, Any]:
    """An admission.k8s.io/v1 AdmissionReview with every field the API types define."""
    metadata = (obj or {}).get("metadata") or {}
    gvk = dict(zip(("group", "version", "kind"), kind, strict=True))
    gvr = dict(zip(("group", "version", "resource"), resource, strict=True))
    request: dict[str, Any] = {
        "uid": uid or str(uuid.uuid4()),
        "kind": gvk,
        "resource": gvr,
        "requestKind": gvk,
        "requestResource": gvr,
        "name": metadata.get("name", ""),
        "namespace": namespace if namespace is not None else metadata.get("namespace", ""),
        "operation": operation,
        "userInfo": {
            "username": "system:serviceaccount:kube-system:replicaset-controller",
            "uid": "2b8d4ea9-5a8c-4a3e-9d46-2bcc1d1c3b5f",
            "groups": ["system:serviceaccounts", "system:authenticated"],
        },
        "object": obj,
        "oldObject": None,
        "dryRun": False,
        "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"},
    }
    if sub_resource:
        request["subResource"] = sub_resource
        request["requestSubResource"] = sub_resource
    return {"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1", "request": request}


def sample(name: str, labels: dict[str, str]) -> float:
    """A counter's current value (0 when the series does not exist yet)."""
    return REGISTRY.get_sample_value(name, labels) or 0.0
