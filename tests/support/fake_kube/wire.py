"""Wire-level pieces of the fake API server: Status bodies, patches, continue tokens, discovery.

Everything here is pure (no I/O, no locks) so it can be unit-tested and reused by the handler.
"""

from __future__ import annotations

import base64
import binascii
import copy
import json
import uuid
from typing import Any

JSON = dict[str, Any]

# Reasons the real apiserver puts in Status.reason for each code (k8s.io/apimachinery
# pkg/apis/meta/v1 StatusReason*). Clients switch on these, so they must match.
REASONS: dict[int, str] = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}

EXPIRED_CONTINUE_MESSAGE = (
    "The provided continue parameter is too old to display a consistent list result. "
    "You can start a new list without the continue parameter, or use the continue value "
    "from the response to start a new list."
)

VERSION_INFO: JSON = {
    "major": "1",
    "minor": "31",
    "gitVersion": "v1.31.0-fake",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2024-08-13T00:00:00Z",
    "goVersion": "go1.22.5",
    "compiler": "gc",
    "platform": "linux/amd64",
}


def status_body(
    code: int, message: str, reason: str | None = None, details: JSON | None = None
) -> JSON:
    """Return a v1 Status object for a failed request, shaped like the apiserver's."""
    body: JSON = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason or REASONS.get(code, "Unknown"),
        "code": code,
    }
    if details is not None:
        body["details"] = details
    return body


def success_status(code: int = 201) -> JSON:
    """The Status the apiserver answers to a pods/binding POST."""
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": code}


def not_found(kind: str, name: str) -> JSON:
    """404 Status for a named object, e.g. `nodes "x" not found`."""
    return status_body(404, f'{kind} "{name}" not found', details={"name": name, "kind": kind})


_UID_NAMESPACE = uuid.UUID("0b5c0f6e-6a3c-4c55-9d1e-3f1f2b8f7a10")


def pod_uid(namespace: str, name: Any) -> str:
    """A stable uid for a pod created without one (the apiserver makes a random one)."""
    return str(uuid.uuid5(_UID_NAMESPACE, f"{namespace}/{name}"))


def dumps(obj: Any) -> bytes:
    """Compact JSON as the apiserver writes it (no spaces); a lone surrogate (hostile-object
    tests) goes out as its ``\\udXXX`` escape, which is how a client receives one."""
    try:
        return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()
    except UnicodeEncodeError:
        return json.dumps(obj, separators=(",", ":")).encode()


FORBIDDEN_USER = "system:serviceaccount:portal:scheduling-policy-portal"


def forbidden_message(method: str, path: str, watch: bool) -> str:
    """The RBAC denial message the apiserver gives for this request (clients show it as is)."""
    parts = path.strip("/").split("/")
    user = f'User "{FORBIDDEN_USER}"'
    verb = {"GET": "get", "PATCH": "patch", "POST": "create", "PUT": "update"}.get(method, "delete")
    if parts[:3] == ["api", "v1", "nodes"] and len(parts) in (3, 4):
        if len(parts) == 3:
            verb = "watch" if watch else "list"
        subject = "nodes" if len(parts) == 3 else f'nodes "{parts[3]}"'
        scope = "at the cluster scope"
        resource = "nodes"
    elif parts[:3] == ["api", "v1", "pods"] and len(parts) == 3:
        verb = "watch" if watch else "list"
        subject, resource, scope = "pods", "pods", "at the cluster scope"
    elif parts[:3] == ["api", "v1", "namespaces"] and len(parts) >= 5:
        pod = parts[5] if len(parts) > 5 else ""
        subject = f'pods "{pod}"' if pod else parts[4]
        if len(parts) == 5 and method == "GET":
            verb = "watch" if watch else "list"
        sub = f"/{parts[6]}" if len(parts) > 6 else ""
        resource = f"pods{sub}" if pod else parts[4]
        scope = f'in the namespace "{parts[3]}"'
    else:
        return f'forbidden: {user} cannot {verb} path "{path}"'
    denied = f'cannot {verb} resource "{resource}" in API group ""'
    return f"{subject} is forbidden: {user} {denied} {scope}"


def merge_patch(target: Any, patch: Any) -> Any:
    """Apply an RFC 7386 JSON merge patch and return the result; inputs are not modified.

    A strategic merge patch without directives is applied the same way, which is exact for the
    maps (labels, annotations) that this project patches; lists are replaced whole.
    """
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


class PatchError(ValueError):
    """A JSON patch operation that cannot be applied (answered with 422)."""


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _walk(doc: Any, parts: list[str]) -> Any:
    for part in parts:
        if isinstance(doc, list):
            doc = doc[int(part)]
        elif isinstance(doc, dict):
            doc = doc[part]
        else:
            raise PatchError(f"cannot traverse into {part!r}")
    return doc


def json_patch(target: JSON, operations: list[JSON]) -> JSON:
    """Apply an RFC 6902 JSON patch (add, remove, replace, test) to a copy of ``target``.

    The client sends this content type when ``patch_node`` is given a list body.
    """
    doc = copy.deepcopy(target)
    for op in operations:
        try:
            parts = _pointer(op["path"])
            if not parts:
                raise PatchError("patching the document root is not supported")
            parent, last = _walk(doc, parts[:-1]), parts[-1]
            kind = op["op"]
            if kind == "test":
                if _walk(doc, parts) != op.get("value"):
                    raise PatchError(f"test operation failed at {op['path']}")
            elif kind == "remove":
                del parent[int(last) if isinstance(parent, list) else last]
            elif kind in ("add", "replace"):
                if isinstance(parent, list):
                    index = len(parent) if last == "-" else int(last)
                    if kind == "add":
                        parent.insert(index, op["value"])
                    else:
                        parent[index] = op["value"]
                else:
                    if kind == "replace" and last not in parent:
                        raise PatchError(f"replace of missing path {op['path']}")
                    parent[last] = op["value"]
            else:
                raise PatchError(f"unsupported JSON patch op {kind!r}")
        except (KeyError, IndexError, ValueError, TypeError) as exc:
            if isinstance(exc, PatchError):
                raise
            raise PatchError(f"cannot apply {op!r}: {exc!r}") from exc
    return doc


def encode_continue(rv: int, last_name: str, next_page: int) -> str:
    """Continue token in the apiserver's format (base64 JSON with version, rv and start key).

    ``page`` is an extension of the fake, so a fault can target "page 3" of a list.
    """
    token = {"v": "meta.k8s.io/v1", "rv": rv, "start": last_name + "\x00", "page": next_page}
    return base64.urlsafe_b64encode(json.dumps(token).encode()).decode().rstrip("=")


def decode_continue(token: str) -> tuple[int, str, int]:
    """Return (rv, start-after name, page) from a continue token; ValueError when malformed."""
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        data = json.loads(raw)
        rv, start = int(data["rv"]), str(data["start"])
        page = int(data.get("page", 2))
    except (binascii.Error, ValueError, KeyError, TypeError) as exc:
        raise ValueError("continue key is not valid") from exc
    return rv, start.removesuffix("\x00"), page


def api_versions(host: str) -> JSON:
    """`GET /api`: the legacy core group versions."""
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": host}],
    }


def _resource(name: str, kind: str, namespaced: bool, verbs: list[str]) -> JSON:
    return {
        "name": name,
        "singularName": "" if "/" in name else name.rstrip("s"),
        "namespaced": namespaced,
        "kind": kind,
        "verbs": verbs,
    }


API_V1_RESOURCES: JSON = {
    "kind": "APIResourceList",
    "groupVersion": "v1",
    "resources": [
        _resource("bindings", "Binding", True, ["create"]),
        _resource(
            "nodes",
            "Node",
            False,
            ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"],
        ),
        _resource(
            "pods",
            "Pod",
            True,
            ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"],
        ),
        _resource("pods/binding", "Binding", True, ["create"]),
        _resource("pods/eviction", "Eviction", True, ["create"]),
    ],
}
