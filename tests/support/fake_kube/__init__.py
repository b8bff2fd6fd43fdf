"""A protocol-faithful fake Kubernetes API server for tests and benchmarks (standard library only).

It serves what the portal needs from the official ``kubernetes`` client: node list with
pagination, node watch with bookmarks and 410s, get/patch node, pod bindings, plus fault injection.
"""

from .server import FakeKubeServer
from .state import ApiError, RecordedBinding, RecordedPatch, RecordedRequest
from .wire import merge_patch, status_body

__all__ = [
    "ApiError",
    "FakeKubeServer",
    "RecordedBinding",
    "RecordedPatch",
    "RecordedRequest",
    "merge_patch",
    "status_body",
]
