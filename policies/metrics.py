"""Metrics of the policies' requeue (``policies.requeue``), exported by the watcher that runs it.

The names keep the ``inventory_`` prefix they were published under (dashboards and alerts read
them; docs/operations.md lists them): the nudges are about the inventory's Pending pods.
"""

from __future__ import annotations

from prometheus_client import Counter

REQUEUE_NUDGES = Counter(
    "inventory_requeue_nudges",
    "Node annotations sent so kube-scheduler retries Pending pods a change freed, by outcome "
    "(sent, failed) and by what held one back (disabled, static).",
    ["cluster", "outcome"],
)
REQUEUE_PODS = Counter(
    "inventory_requeue_pods",
    "Pending pods that a published change gave a passing node they did not have.",
    ["cluster"],
)
