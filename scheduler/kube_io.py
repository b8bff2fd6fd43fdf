"""The own scheduler's writes to the API server: Bindings, the PodScheduled condition, Events.

Made with the official client on the cluster's checked credentials (``inventory.kube``); the
Binding itself is step 2 of ``resources.binding`` (reserve, Binding, confirm or give back), the
protocol the extender's bind follows too;
the other replies are read raw (``_preload_content=False``) as it does.
"""

from __future__ import annotations

import os
import socket
import threading
import uuid
from datetime import UTC, datetime
from itertools import count
from typing import Any

from inventory.binding import BindingFailed
from inventory.kube import REQUEST_TIMEOUT, classify, core_v1_for
from inventory.models import Cluster
from resources import binding
from resources.binding import PodRef
from scheduler.queue import QueuedPod

STRATEGIC_MERGE = "application/strategic-merge-patch+json"


class BindFailed(Exception):
    """The binding was not created. ``conflict``: the pod is already bound (by another
    scheduler, or by a previous leader) or was replaced — do not retry it. ``failure``: the API
    server's answer, which says whether a reservation goes back (``resources.binding.settle``);
    None when the call never got one of its own."""

    def __init__(
        self, message: str, *, conflict: bool = False, failure: BindingFailed | None = None
    ) -> None:
        super().__init__(message)
        self.conflict = conflict
        self.failure = failure


def pod_ref(pod: QueuedPod) -> PodRef:
    """The pod as the reservation protocol names it."""
    return PodRef(pod.namespace, pod.name, pod.uid, dict(pod.spec.requests))


def _now() -> str:
    return datetime.now(tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _micro_now() -> str:
    return datetime.now(tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class ClusterClient:
    """One cluster's API calls for the scheduler (thread-safe: the client's pool is)."""

    def __init__(self, cluster: Cluster, scheduler_name: str) -> None:
        self.api = core_v1_for(cluster)
        self.scheduler_name = scheduler_name
        self.instance = f"{scheduler_name}-{socket.gethostname()}-{os.getpid()}"
        # Event names must not repeat across processes (replicas in containers share pid 1).
        self._prefix = uuid.uuid4().hex[:8]
        self._events = count()
        self._lock = threading.Lock()

    def close(self) -> None:
        self.api.api_client.close()

    def bind(self, pod: QueuedPod, node: str) -> None:
        try:
            binding.create(self.api, pod_ref(pod), node)
        except BindingFailed as exc:
            raise BindFailed(str(exc), conflict=exc.conflict, failure=exc) from None

    def mark_unschedulable(self, pod: QueuedPod, message: str) -> None:
        """``PodScheduled=False, reason=Unschedulable`` with kube-scheduler's message."""
        body = {
            "status": {
                "conditions": [
                    {
                        "type": "PodScheduled",
                        "status": "False",
                        "reason": "Unschedulable",
                        "message": message,
                        "lastProbeTime": None,
                        "lastTransitionTime": _now(),
                    }
                ]
            }
        }
        self._call(
            self.api.patch_namespaced_pod_status,
            pod.name,
            pod.namespace,
            body,
            _content_type=STRATEGIC_MERGE,
        )

    def event(self, pod: QueuedPod, *, kind: str, reason: str, message: str) -> None:
        """A core v1 Event about the pod, as kube-scheduler's recorder writes one."""
        with self._lock:
            number = next(self._events)
        now = _now()
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "name": f"{pod.name}.{self._prefix}{number:08x}",
                "namespace": pod.namespace,
            },
            "involvedObject": {
                "apiVersion": "v1",
                "kind": "Pod",
                "namespace": pod.namespace,
                "name": pod.name,
                "uid": pod.uid,
            },
            "reason": reason,
            "message": message,
            "type": kind,
            "source": {"component": self.scheduler_name},
            "reportingComponent": self.scheduler_name,
            "reportingInstance": self.instance,
            "action": "Scheduling" if reason == "FailedScheduling" else "Binding",
            "firstTimestamp": now,
            "lastTimestamp": now,
            "eventTime": _micro_now(),
            "count": 1,
        }
        self._call(self.api.create_namespaced_event, pod.namespace, body)

    def _call(self, method: Any, *args: Any, **kwargs: Any) -> None:
        try:
            response = method(
                *args, _preload_content=False, _request_timeout=REQUEST_TIMEOUT, **kwargs
            )
            response.data  # noqa: B018
            response.release_conn()
        except Exception as exc:
            raise classify(exc) from None
