"""Source allowlists for extender calls and for bind (docs/threat-model.md)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from extender import access, handler
from tests.extender.extender_support import call, extender  # noqa: F401
from tests.factories import load_nodes, make_cluster, node_object

POD = {"metadata": {"name": "p", "namespace": "ns", "uid": "u"}}
FILTER = {"Pod": POD, "NodeNames": ["n1"]}
BIND = {"PodName": "p", "PodNamespace": "ns", "PodUID": "u", "Node": "n1"}


@pytest.mark.parametrize(
    ("networks", "address", "allowed"),
    [
        ("", "203.0.113.9", True),  # no list: anyone who reaches the port
        ("10.0.0.0/8", "10.1.2.3", True),
        ("10.0.0.0/8", "11.1.2.3", False),
        ("10.0.0.0/8, 192.168.1.7", "192.168.1.7", True),
        ("192.168.1.7", "192.168.1.8", False),
        ("10.0.0.0/8", "::ffff:10.9.9.9", True),  # IPv4-mapped IPv6 peer
        ("fd00::/8", "fd00::1", True),
        ("fd00::/8", "fe80::1%eth0", False),
        ("10.0.0.0/8", "", False),
        ("10.0.0.0/8", "not-an-address", False),
    ],
)
def test_allowlist(networks: str, address: str, allowed: bool) -> None:
    calls, _ = access.from_settings(networks, "")
    assert calls.allows(address) is allowed


def test_a_bad_network_names_the_setting() -> None:
    with pytest.raises(ValueError, match=re.escape("EXTENDER_BIND_ALLOWED_CIDRS: '10.0.0.300/8'")):
        access.from_settings("", "10.0.0.300/8")


@pytest.fixture
def cluster(db: Any, extender: None) -> None:  # noqa: F811
    cluster = make_cluster("c", is_default=True, bind_enabled=True)
    load_nodes(cluster, [node_object("n1", {})])


@pytest.mark.usefixtures("cluster")
def test_callers_outside_the_allowlist_get_403(monkeypatch: pytest.MonkeyPatch) -> None:
    calls, binds = access.from_settings("10.0.0.0/8", "")
    monkeypatch.setattr(handler, "CALLERS", calls)
    monkeypatch.setattr(handler, "BINDERS", binds)
    assert call("/extender/c/filter", FILTER, remote_addr="10.0.0.5").status == 200
    refused = call("/extender/c/filter", FILTER, remote_addr="198.51.100.4")
    assert refused.status == 403
    assert refused.error == "198.51.100.4 is not in EXTENDER_ALLOWED_CIDRS"


@pytest.mark.usefixtures("cluster")
def test_bind_has_its_own_stricter_list(monkeypatch: pytest.MonkeyPatch) -> None:
    calls, binds = access.from_settings("10.0.0.0/8", "10.0.0.10/32")
    monkeypatch.setattr(handler, "CALLERS", calls)
    monkeypatch.setattr(handler, "BINDERS", binds)
    assert call("/extender/c/filter", FILTER, remote_addr="10.0.0.5").status == 200
    refused = call("/extender/c/bind", BIND, remote_addr="10.0.0.5")
    assert refused.status == 403
    assert refused.error == "10.0.0.5 is not in EXTENDER_BIND_ALLOWED_CIDRS"
    # The allowed binder gets past the allowlist (to the bind itself, which then reports).
    assert call("/extender/c/bind", BIND, remote_addr="10.0.0.10").status != 403
