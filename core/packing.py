"""Lists of ints packed into bytes: each value's difference from the one before, zigzag-signed
(0, -1, 1, -2, ... as 0, 1, 2, 3, ...), in base-128 varints (7 bits a byte, low bits first, the
high bit set on every byte but a value's last). Sorted ids close together take a byte each.

The decision log stores its node sets so (``decisions.models.PackedIdsField``; the layout in
docs/architecture.md, "The decision log"), and PostgreSQL reads the same bytes with the SQL
function ``decision_node_ids`` (extender migration 0004) for its GIN index.
"""

from __future__ import annotations

from collections.abc import Iterable


def pack(values: Iterable[int]) -> bytes:
    """``values`` packed; b"" for none."""
    out = bytearray()
    previous = 0
    for value in values:
        delta = value - previous
        previous = value
        zigzag = delta << 1 if delta >= 0 else (~delta << 1) | 1
        while zigzag >= 0x80:
            out.append((zigzag & 0x7F) | 0x80)
            zigzag >>= 7
        out.append(zigzag)
    return bytes(out)


def unpack(data: bytes | bytearray | memoryview | None) -> list[int]:
    """The inverse of :func:`pack` (a value cut short at the end is dropped)."""
    out: list[int] = []
    if not data:
        return out
    previous = zigzag = shift = 0
    for byte in bytes(data):
        zigzag |= (byte & 0x7F) << shift
        if byte & 0x80:
            shift += 7
            continue
        previous += (zigzag >> 1) ^ -(zigzag & 1)
        out.append(previous)
        zigzag = shift = 0
    return out
