"""The candidate formats (``codec.pack_candidates``): every format round-trips, the rows stored
as [start, end) ranges before read the same, the smallest format is the one written, and the
mask agrees with the ids (docs/architecture.md, "The decision log")."""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core import packing
from decisions import codec

IDS = st.lists(st.integers(min_value=1, max_value=2**17), max_size=300)
# Dense sets (bitmaps), sparse ones (Rice) and runs (ranges) alike.
NEAR = st.lists(st.integers(min_value=1, max_value=3000), max_size=800)
RUNS = st.lists(
    st.tuples(st.integers(min_value=1, max_value=10**6), st.integers(min_value=1, max_value=400)),
    max_size=6,
).map(lambda runs: [start + k for start, length in runs for k in range(length)])
ANY = st.one_of(IDS, NEAR, RUNS)


def _mask(ids: set[int], base: int) -> int:
    return sum(1 << (value - base) for value in ids if value >= base)


def _bitmap(ids: list[int]) -> bytes:
    first = min(ids)
    out = bytearray([0x01])
    packing._varint(first, out)
    return bytes(out) + _mask(set(ids), first).to_bytes((max(ids) - first) // 8 + 1, "little")


def _rice(ids: list[int], k: int) -> bytes:
    """The Rice format with a given k, whatever the writer would choose."""
    ordered = sorted(set(ids))
    gaps = [b - a - 1 for a, b in itertools.pairwise(ordered)]
    out = bytearray([0x03 | k << 3])
    packing._varint(len(ordered), out)
    packing._varint(ordered[0], out)
    bits = "".join(format(g & ((1 << k) - 1), f"0{k}b") for g in gaps) if k else ""
    bits += "".join("1" * (g >> k) + "0" for g in gaps)
    bits += "0" * (-len(bits) % 8)
    if bits:
        out += int(bits, 2).to_bytes(len(bits) // 8, "big")
    return bytes(out)


@given(ANY, st.integers(min_value=0, max_value=3000))
@settings(max_examples=400, deadline=None)
def test_what_is_written_reads_back_sorted_and_distinct(ids: list[int], base: int) -> None:
    packed = codec.pack_candidates(ids)
    expected = sorted(set(ids))
    assert codec.candidate_ids(packed) == expected
    assert codec.candidate_mask(packed, base) == _mask(set(ids), base)
    assert (packed == b"") == (not ids)
    if ids:
        # never larger than any format it could have chosen
        assert len(packed) <= len(codec.pack(codec.to_ranges(ids)))
        assert len(packed) <= len(_bitmap(ids))


@given(ANY.filter(bool), st.integers(min_value=0, max_value=12), st.integers(0, 3000))
@settings(max_examples=300, deadline=None)
def test_every_format_round_trips(ids: list[int], k: int, base: int) -> None:
    expected = sorted(set(ids))
    for data in (codec.pack(codec.to_ranges(ids)), _bitmap(ids), _rice(ids, k)):
        assert codec.candidate_ids(data) == expected
        assert codec.candidate_ids(memoryview(data)) == expected
        assert codec.candidate_ids(bytearray(data)) == expected
        assert codec.candidate_mask(data, base) == _mask(set(ids), base)


@given(st.lists(st.integers(min_value=1, max_value=2**40), max_size=200))
@settings(max_examples=300, deadline=None)
def test_large_ids_round_trip(ids: list[int]) -> None:
    assert codec.candidate_ids(codec.pack_candidates(ids)) == sorted(set(ids))


@given(st.lists(st.integers(min_value=1, max_value=2**40), max_size=200))
@settings(max_examples=300, deadline=None)
def test_rows_stored_as_ranges_before_read_as_they_were(ids: list[int]) -> None:
    old = codec.pack(codec.to_ranges(ids))  # the one format written before
    assert not old or old[0] % 2 == 0  # what tells it from the others
    assert codec.candidate_ids(old) == codec.from_ranges(codec.to_ranges(ids))
    assert codec.candidate_ids(old) == sorted(set(ids))


def test_none_and_empty() -> None:
    assert codec.pack_candidates([]) == b""
    for empty in (None, b"", bytearray(), memoryview(b"")):
        assert codec.candidate_ids(empty) == []
        assert codec.candidate_mask(empty) == 0
    with pytest.raises(ValueError, match="start at 1"):
        codec.pack_candidates([0, 1])
    with pytest.raises(ValueError, match="unknown candidate set format"):
        codec.candidate_ids(b"\x05")  # an odd marker of no format


def test_each_order_of_500_of_5000_gets_its_format() -> None:
    rng = random.Random(3)
    window = range(2000, 2500)
    assert codec.pack_candidates(window) == codec.pack(codec.to_ranges(window))
    dense = [i for i in range(1, 560) if rng.random() < 0.9]  # most of a window: a bitmap
    assert codec.pack_candidates(dense)[0] == 0x01
    assert len(codec.pack_candidates(dense)) <= 75
    sparse = rng.sample(range(1, 5001), 500)  # any 500: Rice, k = 3
    packed = codec.pack_candidates(sparse)
    assert packed[0] & 0b111 == 0b011
    assert packed[0] >> 3 == 3
    assert len(packed) <= 320  # 5000 * H(0.1) / 8 = 293 B at best; ranges ~900 B
    assert codec.candidate_mask(_bitmap(dense), 1) == _mask(set(dense), 1)


def test_a_set_cut_short_is_refused() -> None:
    packed = codec.pack_candidates(random.Random(4).sample(range(1, 5001), 500))
    with pytest.raises(ValueError, match="cut short"):
        codec.candidate_ids(packed[:-40])


def test_a_far_outlier_among_scattered_ids_round_trips() -> None:
    ids = [*random.Random(6).sample(range(1, 20001), 2000), 30000]  # one gap of ~10,000
    packed = codec.pack_candidates(ids)
    assert packed[0] & 0b111 == 0b011
    assert 10000 >> (packed[0] >> 3) >= 64  # its quotient is past the unary table
    assert codec.candidate_ids(packed) == sorted(ids)
