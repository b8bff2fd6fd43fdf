"""How the inventory's freshness is shown to people (the admin's cluster pages, the console's
dashboard); the age itself is ``inventory.sync.inventory_age_seconds``."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.utils import timezone

from inventory import sources
from inventory.models import Cluster, PodInventory, SyncState
from inventory.sync import inventory_age_seconds


def format_age(seconds: float) -> str:
    """12 s, 5 min, 3 h, 2 d."""
    if seconds < 120:
        return f"{int(seconds)} s"
    if seconds < 7200:
        return f"{int(seconds // 60)} min"
    if seconds < 172800:
        return f"{int(seconds // 3600)} h"
    return f"{int(seconds // 86400)} d"


def describe_inventory_age(cluster: Cluster, *, now: datetime | None = None) -> str:
    """ "inventory age: 12 s (last successful sync 2026-12-02 16:00:00 UTC)", or why unknown."""
    age = inventory_age_seconds(cluster, now=now)
    if age is None or cluster.last_success_at is None:
        return "no successful sync yet"
    stamp = cluster.last_success_at.strftime("%Y-%m-%d %H:%M:%S UTC")
    how = sources.of(cluster).arrives_by
    return f"inventory age: {format_age(age)} (last successful {how} {stamp})"


# What a stored error starts with (inventory.kube.classify's messages) -> what to do about it.
_ERROR_ADVICE = (
    (
        "cannot reach the API server",
        "The portal cannot reach the cluster's API server. Check that it is running and that "
        "the kubeconfig's server address is right; the watch reconnects on its own.",
    ),
    (
        "API server timed out",
        "The cluster's API server did not answer in time. It may be overloaded or the network "
        "slow; the watch retries on its own.",
    ),
    (
        "credentials rejected",
        "The cluster's API server rejects the portal's credentials. Renew the token or "
        "certificate in the cluster's kubeconfig.",
    ),
    (
        "access denied",
        "The cluster's API server denies the portal access. Check the RBAC role bound to the "
        "credentials in the cluster's kubeconfig.",
    ),
    (
        "TLS error",
        "The cluster's API server certificate is not trusted. Check the certificate authority "
        "in the cluster's kubeconfig.",
    ),
    (
        "API server error",
        "The cluster's API server answered with an error. It may be restarting; the watch "
        "retries on its own.",
    ),
)


def plain_error(error: str) -> str:
    """A stored sync or watch error as a sentence that says what to do (the technical text is
    kept apart, for the curious: :func:`error_detail`)."""
    text = (error or "").strip()
    if not text:
        return ""
    for start, advice in _ERROR_ADVICE:
        if text.startswith(start):
            return advice
    first = text.splitlines()[0]
    first = first[:1].upper() + first[1:]
    return first if first.endswith((".", "!", "?")) else f"{first}."


def error_detail(error: str, limit: int = 300) -> str:
    """The technical first line of an error, cut at a word, never mid-word."""
    first = (error or "").strip().splitlines()[0] if (error or "").strip() else ""
    if len(first) <= limit:
        return first
    cut = first[:limit].rsplit(" ", 1)[0]
    return f"{cut} …"


def stale_after(cluster: Cluster) -> float:
    """Seconds after which a live cluster's inventory is called stale: two sync intervals and a
    minute (the watch refreshes it much more often while it is connected)."""
    return 2 * max(cluster.sync_interval_seconds, 60) + 60


@dataclass(frozen=True)
class Freshness:
    """How current a page built on a cluster's inventory is, as the page says it."""

    cluster: str
    live: bool
    as_of: datetime | None
    age: str  # "12 s", or "" when never known
    stale: bool
    error: str  # a sentence that says what to do; "" when connected
    detail: str  # the technical error, cut at a word

    @property
    def state(self) -> str:
        """connected | unreachable | static | never."""
        if not self.live:
            return "static"
        if self.error:
            return "unreachable"
        return "never" if self.as_of is None else "connected"

    @property
    def warn(self) -> bool:
        """The page shows a banner: the data may no longer be true."""
        return self.live and (self.stale or bool(self.error) or self.as_of is None)

    @property
    def api_blocked(self) -> str:
        """Why an action that needs the cluster's API (evict) is off now; "" when it is not."""
        if not self.live:
            return f"Cluster {self.cluster} is static (uploaded): there is no API server to ask."
        if self.error:
            return (
                "Evicting needs the cluster's API server, and the portal cannot reach it now; "
                "try again once the page says connected."
            )
        if self.as_of is None:
            return "The portal has not listed this cluster's pods yet; wait for the first sync."
        return ""


def freshness(cluster: Cluster, *, pods: bool, now: datetime | None = None) -> Freshness:
    """The freshness of ``cluster``'s pod inventory (``pods``) or node inventory.

    The pods are as of the watch's last word (``PodInventory.current_at``: a change or a
    bookmark), the nodes as of the last complete sync or live watch (``last_success_at``). An
    error the watch or the sync stored since is the connection's state."""
    now = now or timezone.now()
    live = sources.of(cluster).live
    error = ""
    if pods:
        inventory = PodInventory.objects.filter(cluster=cluster).first()
        as_of = (inventory.current_at or inventory.listed_at) if inventory else None
        error = inventory.error if inventory else ""
    else:
        as_of = cluster.last_success_at
    if not error and cluster.sync_state == SyncState.ERROR:
        error = cluster.sync_error
    seconds = max(0.0, (now - as_of).total_seconds()) if as_of else None
    return Freshness(
        cluster=cluster.name,
        live=live,
        as_of=as_of,
        age=format_age(seconds) if seconds is not None else "",
        stale=live and seconds is not None and seconds > stale_after(cluster),
        error=plain_error(error) if live else "",
        detail=error_detail(error) if live else "",
    )
