"""A protocol-faithful fake Kubernetes API server for tests and benchmarks (standard library only).

It serves what the portal needs from the official ``kubernetes`` client: node and pod lists with
pagination, watches with bookmarks and 410s, get/patch node, get pod, pod bindings (which set
``spec.nodeName`` and PodScheduled), the Eviction subresource obeying PodDisruptionBudgets (429),
plus fault injection.
"""

from .server import FakeKubeServer
from .state import ApiError, RecordedBinding, RecordedEviction, RecordedPatch, RecordedRequest
from .wire import merge_patch, status_body

__all__ = [
    "ApiError",
    "FakeKubeServer",
    "RecordedBinding",
    "RecordedEviction",
    "RecordedPatch",
    "RecordedRequest",
    "merge_patch",
    "status_body",
]
