"""Lists of ints packed into bytes: each value's difference from the one before, zigzag-signed
(0, -1, 1, -2, ... as 0, 1, 2, 3, ...), in base-128 varints (7 bits a byte, low bits first, the
high bit set on every byte but a value's last). Sorted ids close together take a byte each.

The decision log stores its node sets so (``decisions.models.PackedIdsField``; the layout in
docs/architecture.md, "The decision log"), and PostgreSQL reads the same bytes with the SQL
function ``decision_node_ids`` (extender migration 0004) for its GIN index.

A call's candidate node set has formats of its own (``pack_candidates``), the smallest of three
written per row, told apart by the first byte:

- ranges (even first byte): ``pack`` of [start, end) pairs, the one format of rows written
  before the others existed; 2-4 bytes for a window of consecutive ids.
- bitmap (``0x01``): the first id as a varint, then bit ``i`` (little-endian) for id
  ``first + i``; ~(last - first) / 8 bytes, the smallest once most ids of a span are candidates,
  and read as an int as it is (``candidate_mask``).
- Rice (``0x03 | k << 3``): the count and the first id as varints, then every gap (ids skipped
  between two candidates) as k low bits, all of them first, then every gap's high part in
  unary; ~k + 1.5 bits a candidate with k ~ log2(mean gap), the smallest for scattered sets
  (500 of 5,000 at random: ~300 bytes, against ~900 as ranges and ~625 as a bitmap).

Why these three and the figures: docs/architecture.md, "The decision log".
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import cache
from itertools import accumulate, repeat
from operator import sub


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


# --- candidate node sets ----------------------------------------------------------------------
#
# Three formats, the smallest written (docs/architecture.md, "The decision log"). The first
# byte tells them apart: the ranges format starts with the zigzag varint of its first start
# (an id >= 1, so an even value and an even low byte); the others start with an odd marker byte
# whose bits 1-2 name the format and bits 3-7 hold the Rice parameter.

_BITMAP = 0b001  # marker, varint first id, then bit i (little-endian) = id first + i
_RICE = 0b011  # marker | k << 3, varint count, varint first id, then the gaps' bits
_RICE_K_MAX = 31
_RICE_MEAN_GAP = 1.5
_TABLE_K = 10  # Rice remainders of up to 10 bits are looked up, not formatted
_UNARY = ["1" * q + "0" for q in range(64)]  # and quotients below 64


def _varint(value: int, out: bytearray) -> None:
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _varint_size(value: int) -> int:
    return max(1, (value.bit_length() + 6) // 7)


def _read_varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while at < len(data):
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, at
        shift += 7
    raise ValueError("candidate set cut short")


def _rice_bits(gaps: Sequence[int], k: int) -> int:
    return len(gaps) * (k + 1) + (sum(map(k.__rrshift__, gaps)) if k else sum(gaps))


@cache
def _remainders(k: int) -> tuple[list[str], dict[str, int]]:
    """The k-bit strings of 0 .. 2**k - 1, and back (Rice remainders; k <= ``_TABLE_K``)."""
    strings = [format(r, f"0{k}b") for r in range(1 << k)]
    return strings, {text: r for r, text in enumerate(strings)}


def pack_candidates(ids: Iterable[int]) -> bytes:
    """A candidate node set (ids >= 1, any order, repeats ignored) in the smallest of the three
    formats: [start, end) ranges, a bitmap over [first, last] or Rice-coded gaps; b"" for none."""
    ordered = sorted(set(ids))
    if not ordered:
        return b""
    first, last, count = ordered[0], ordered[-1], len(ordered)
    if first < 1:
        raise ValueError("candidate ids start at 1")
    # gap i: the ids skipped between two candidates (0 when adjacent)
    gaps = list(map((-1).__add__, map(sub, ordered[1:], ordered)))
    runs = 1 + len(gaps) - gaps.count(0)
    span = last - first + 1
    bitmap = 1 + _varint_size(first) + (span + 7) // 8
    best, k = bitmap, 0
    if gaps and (span - count) / len(gaps) >= _RICE_MEAN_GAP:
        # Rice beats the bitmap once the gaps average ~1.5 or more; its best k is near
        # log2(mean gap * ln 2) (a geometric gap's), so the estimate and the next one are tried.
        # (k = 0 is a bitmap in all but name: k >= 1.)
        estimate = min(
            _RICE_K_MAX - 1, max(1, int((span - count) / len(gaps) * 0.69).bit_length() - 1)
        )
        header = 1 + _varint_size(count) + _varint_size(first)
        for j in (estimate, estimate + 1):
            size = header + (_rice_bits(gaps, j) + 7) // 8
            if size < best:
                best, k = size, j
    if runs * 2 < best:  # a range takes two bytes or more
        ranges = _ranges_packed(ordered, gaps)
        if len(ranges) <= best:
            return ranges
    out = bytearray()
    if not k:
        out.append(_BITMAP)
        _varint(first, out)
        out += _mask(ordered, first).to_bytes((span + 7) // 8, "little")
        return bytes(out)
    out.append(_RICE | k << 3)
    _varint(count, out)
    _varint(first, out)
    # All the remainders (k bits each), then all the quotients in unary ("1" * q + "0"),
    # padded with zeros to a byte.
    low = map(((1 << k) - 1).__and__, gaps)
    if k <= _TABLE_K:
        text = "".join(map(_remainders(k)[0].__getitem__, low))
    else:
        text = "".join(format(r, f"0{k}b") for r in low)
    try:
        text += "".join(map(_UNARY.__getitem__, map(k.__rrshift__, gaps)))
    except IndexError:  # a gap of 64 * 2**k or more
        text += "0".join(map("1".__mul__, map(k.__rrshift__, gaps))) + "0"
    text += "0" * (-len(text) % 8)
    out += int(text, 2).to_bytes(len(text) // 8, "big")
    return bytes(out)


def _ranges_packed(ordered: list[int], gaps: list[int]) -> bytes:
    """``pack(to_ranges(ordered))`` for sorted distinct ids and their gaps."""
    bounds = [ordered[0]]
    for i, gap in enumerate(gaps):
        if gap:
            bounds.extend((ordered[i] + 1, ordered[i + 1]))
    bounds.append(ordered[-1] + 1)
    return pack(bounds)


def _rice_ids(data: bytes) -> list[int]:
    k = data[0] >> 3
    count, at = _read_varint(data, 1)
    first, at = _read_varint(data, at)
    body = data[at:]
    bits = format(int.from_bytes(body, "big"), f"0{len(body) * 8}b") if body else ""
    n = count - 1
    split = n * k
    quotients = bits[split:].split("0", n)[:n]
    if len(quotients) < n:
        raise ValueError("candidate set cut short")
    if k:
        fields = map(bits.__getitem__, map(slice, range(0, split, k), range(k, split + 1, k)))
        if k <= _TABLE_K:
            rems = map(_remainders(k)[1].__getitem__, fields)
        else:
            rems = map(int, fields, repeat(2))
        gaps = [(len(q) << k) | r for q, r in zip(quotients, rems, strict=True)]
    else:
        gaps = list(map(len, quotients))
    return list(accumulate(gaps, lambda a, g: a + g + 1, initial=first))


def candidate_ids(data: bytes | bytearray | memoryview | None) -> list[int]:
    """The sorted distinct ids of a candidate set stored in any format (rows written before the
    formats were chosen per row are ranges); [] for NULL or b""."""
    if not data:
        return []
    raw = bytes(data)
    marker = raw[0]
    if not marker & 1:
        return from_ranges(unpack(raw))
    kind = marker & 0b111
    if kind == _BITMAP:
        first, at = _read_varint(raw, 1)
        bits = format(int.from_bytes(raw[at:], "little"), "b")[::-1]
        out: list[int] = []
        find = bits.find
        i = find("1")
        while i >= 0:
            out.append(first + i)
            i = find("1", i + 1)
        return out
    if kind == _RICE:
        return _rice_ids(raw)
    raise ValueError(f"unknown candidate set format {marker:#04x}")


def candidate_mask(data: bytes | bytearray | memoryview | None, base: int = 0) -> int:
    """A candidate set as an int with bit ``id - base`` set for each id (ids below ``base`` are
    left out); 0 for none. The bitmap format is read as it is stored."""
    if not data:
        return 0
    raw = bytes(data)
    if raw[0] & 0b111 == _BITMAP:
        first, at = _read_varint(raw, 1)
        mask = int.from_bytes(raw[at:], "little")
        return mask << (first - base) if first >= base else mask >> (base - first)
    if not raw[0] & 1:
        ranges = unpack(raw)
        if len(ranges) <= 16:  # a few runs: a shifted block of ones each
            mask = 0
            for i in range(0, len(ranges) - 1, 2):
                start, end = max(ranges[i], base), ranges[i + 1]
                if end > start:
                    mask |= ((1 << (end - start)) - 1) << (start - base)
            return mask
    ids = candidate_ids(raw)
    if ids and ids[0] < base:
        ids = [value for value in ids if value >= base]
    return _mask(ids, base)


def _mask(ordered: list[int], base: int) -> int:
    """Sorted distinct ids >= ``base`` as an int with bit ``id - base`` set for each."""
    if not ordered:
        return 0
    first = ordered[0]
    bits = bytearray(b"0" * (ordered[-1] - first + 1))
    for value in ordered:
        bits[value - first] = 0x31  # "1"
    bits.reverse()
    return int(bits, 2) << (first - base)


def from_ranges(ranges: Sequence[int]) -> list[int]:
    """[start, end) pairs -> the ids they cover."""
    out: list[int] = []
    for i in range(0, len(ranges) - 1, 2):
        out.extend(range(ranges[i], ranges[i + 1]))
    return out
