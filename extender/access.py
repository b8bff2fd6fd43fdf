"""Who may call the extender: source address allowlists (docs/threat-model.md).

``EXTENDER_ALLOWED_CIDRS`` limits every extender call to the listed networks (empty: anyone who
can reach the port — then the NetworkPolicy or firewall in front must do it).
``EXTENDER_BIND_ALLOWED_CIDRS`` limits ``bind``, which creates Bindings with the portal's
credentials, further (empty: the same as ``EXTENDER_ALLOWED_CIDRS``). The caller's address is
the TCP peer (``REMOTE_ADDR``); forwarded headers are not trusted here.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from functools import lru_cache

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_networks(text: str, *, setting: str) -> tuple[Network, ...]:
    """Comma-separated CIDRs (a bare address is a /32 or /128); ValueError names the setting."""
    networks = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        try:
            networks.append(ipaddress.ip_network(part, strict=False))
        except ValueError:
            raise ValueError(f"{setting}: {part!r} is not an IP network (CIDR)") from None
    return tuple(networks)


class Allowlist:
    """Membership of caller addresses in a fixed set of networks (None: everyone)."""

    def __init__(self, networks: Iterable[Network] | None) -> None:
        self.networks = tuple(networks) if networks is not None else None
        self.allows = lru_cache(maxsize=4096)(self._allows)

    def _allows(self, address: str) -> bool:
        if self.networks is None:
            return True
        try:
            ip = ipaddress.ip_address(address.split("%", 1)[0])
        except ValueError:
            return False
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        return any(ip in network for network in self.networks)


def from_settings(allowed: str, bind_allowed: str) -> tuple[Allowlist, Allowlist]:
    """(every call, bind) allowlists from the two settings' text."""
    calls = parse_networks(allowed, setting="EXTENDER_ALLOWED_CIDRS")
    binds = parse_networks(bind_allowed, setting="EXTENDER_BIND_ALLOWED_CIDRS")
    call_list = Allowlist(calls or None)
    return call_list, (Allowlist(binds) if binds else call_list)
