"""Footers decoded through a template equal what the Thrift reader decodes, or are refused.

Oracle: :func:`parquetry.parquet.footer.footer_from_bytes` (the Thrift reader's fast path,
then the general reader) on the same bytes.
"""

from __future__ import annotations

import datetime as dt
import random
import struct
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from parquetry.parquet.footer import RawFooter, footer_from_bytes
from parquetry.parquet.footer_memo import FooterMemo
from parquetry.parquet.thrift import decode_struct
from parquetry.parquet.thrift_schema import FILE_META_DATA


def _file(seed: int, rows: int = 50, **kwargs: Any) -> bytes:
    rng = np.random.default_rng(seed)
    table = pa.table(
        {
            "id": pa.array(np.arange(seed * rows, (seed + 1) * rows), pa.int64()),
            "amount": pa.array(rng.random(rows)),
            "status": pa.array(["new", "paid", "sent", None]).take(
                pa.array(rng.integers(0, 4, rows))
            ),
            "day": pa.array([dt.date(2020, 1, 1 + seed % 28)] * rows),
            "tags": pa.array([[int(x)] for x in rng.integers(0, 9, rows)], pa.list_(pa.int32())),
        }
    )
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, **kwargs)
    return bytes(sink.getvalue().to_pybytes())


def _footer(data: bytes) -> bytes:
    (length,) = struct.unpack("<i", data[-8:-4])
    return data[-8 - length : -8]


def _same(a: RawFooter, b: RawFooter) -> None:
    assert a.metadata == b.metadata
    assert (a.tail, a.footer_length, a.file_size) == (b.tail, b.footer_length, b.file_size)
    assert (a.dropped_fields, a.encrypted_footer, a.crypto) == (
        b.dropped_fields,
        b.encrypted_footer,
        b.crypto,
    )


def test_files_written_alike_decode_through_the_template_and_equal_the_reader() -> None:
    files = [_file(seed) for seed in range(40)]
    memo = FooterMemo()
    for data in files:
        _same(memo.footer(data, "f"), footer_from_bytes(data, "f"))
    # Same schema, same writer: most footers have one of a few lengths and hit a template.
    assert memo.hits >= 20, (memo.hits, memo.misses)


def test_decoded_trees_are_independent_of_the_template_and_of_each_other() -> None:
    files = [_file(seed, rows=60) for seed in range(6)]
    memo = FooterMemo()
    for data in files:
        memo.footer(data, "f")
    first = memo.footer(files[1], "f").metadata
    assert first is not None
    first[4][0][1][0][3][9] = -1  # callers may modify what they get (copy_check does not)
    first[2].append({})
    again = memo.footer(files[1], "f")
    _same(again, footer_from_bytes(files[1], "f"))


def test_other_footers_and_files_are_refused_or_decoded_as_usual() -> None:
    memo = FooterMemo()
    a = _file(1)
    memo.footer(a, "a")
    # Another schema of the same footer length would differ in structural bytes: refused.
    other = _file(2, compression="zstd", write_statistics=False)
    _same(memo.footer(other, "o"), footer_from_bytes(other, "o"))
    # Not bytes, no magic: the ordinary reader's answer (and its errors) unchanged.
    _same(memo.footer(bytes(bytearray(a)), "a"), footer_from_bytes(a, "a"))
    for broken in (a[:-1] + b"X", b"PAR1" + b"\0" * 4 + b"PAR1", a[:4] + a[-12:]):
        try:
            expected: Any = footer_from_bytes(broken, "b")
        except Exception as exc:  # the same error class is expected
            expected = type(exc)
        try:
            got: Any = memo.footer(broken, "b")
        except Exception as exc:
            got = type(exc)
        if isinstance(expected, type):
            assert got is expected
        else:
            _same(got, expected)


_BASE = [_file(seed) for seed in range(3)]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    which=st.integers(0, 2),
    edits=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1, max_size=4),
)
def test_mutated_footers_decode_to_the_readers_result_or_are_refused(
    which: int, edits: list[tuple[int, int]]
) -> None:
    memo = FooterMemo()
    template = _footer(_BASE[0])
    memo.learn(template)
    footer = bytearray(_footer(_BASE[which]))
    for at, value in edits:
        footer[at % len(footer)] = value
    data = bytes(footer)
    got = memo.decode(data)
    if got is None:
        return
    expected, _, dropped = decode_struct(data, 0, FILE_META_DATA)
    assert dropped == 0
    assert got == expected


def test_value_changes_are_decoded_and_structure_changes_refused() -> None:
    """Seeded single-byte changes over the whole footer: each one either decodes to the
    reader's result or is refused, and both outcomes occur (values and headers)."""
    memo = FooterMemo()
    template = _footer(_BASE[0])
    memo.learn(template)
    rng = random.Random(7)
    decoded = refused = 0
    for _ in range(400):
        footer = bytearray(template)
        footer[rng.randrange(len(footer))] = rng.randrange(256)
        data = bytes(footer)
        got = memo.decode(data)
        if got is None:
            refused += 1
            continue
        decoded += 1
        expected, _, dropped = decode_struct(data, 0, FILE_META_DATA)
        assert (got, dropped) == (expected, 0)
    assert decoded > 50, (decoded, refused)
    assert refused > 50, (decoded, refused)


# --- the hazard verdict of footers matching a template (checked_footer) -------------------


def _with_footer(data: bytes, footer: bytes) -> bytes:
    """``data`` with its footer replaced by ``footer`` (of the same length)."""
    (length,) = struct.unpack("<i", data[-8:-4])
    assert len(footer) == length
    return data[: -8 - length] + footer + data[-8:]


def _check_verdict(memo: FooterMemo, data: bytes) -> None:
    from parquetry.parquet.footer_check import pyarrow_hazard

    try:
        expected_raw = footer_from_bytes(data, "f")
    except Exception as exc:
        with pytest.raises(type(exc)):
            memo.checked_footer(data, "f")
        return
    raw, verdict = memo.checked_footer(data, "f")
    _same(raw, expected_raw)
    assert verdict == (None if raw.encrypted else pyarrow_hazard(expected_raw))


def test_the_verdict_of_real_footers_is_pyarrow_hazards() -> None:
    memo = FooterMemo()
    for seed in range(30):
        _check_verdict(memo, _file(seed))
    assert memo.hits >= 15, (memo.hits, memo.misses)


# A row group's num_rows zeroed: the row-count hazard must not be taken from the template.
@example(which=0, edits=[(1803, 0)])
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    which=st.integers(0, 2),
    edits=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1, max_size=4),
)
def test_the_verdict_of_mutated_footers_is_pyarrow_hazards(
    which: int, edits: list[tuple[int, int]]
) -> None:
    memo = FooterMemo()
    _check_verdict(memo, _BASE[0])  # the template, and its verdict computed
    _check_verdict(memo, _BASE[0])
    footer = bytearray(_footer(_BASE[which]))
    for at, value in edits:
        footer[at % len(footer)] = value
    _check_verdict(memo, _with_footer(_BASE[which], bytes(footer)))


def test_changed_schema_values_and_paths_change_the_verdict() -> None:
    """Single-byte changes inside the values the check reads (names, types, repetitions,
    column paths): each decodes through the template and gets pyarrow_hazard's verdict,
    and some of them are hazards (the template's own verdict is None)."""
    memo = FooterMemo()
    _check_verdict(memo, _BASE[0])
    _check_verdict(memo, _BASE[0])
    template = memo.templates[len(_footer(_BASE[0]))]
    spans = [
        (start, end)
        for (start, end, _, _), hazard in zip(template.spans, template.hazard_slots, strict=True)
        if hazard
    ]
    assert spans
    rng = random.Random(11)
    hazards = hits = 0
    for _ in range(600):
        start, end = spans[rng.randrange(len(spans))]
        footer = bytearray(template.data)
        at = rng.randrange(start, end)
        footer[at] = rng.choice([0x80, 0xFF, 0x00, 0x02, 0x04, 0x0E, rng.randrange(256)])
        data = _with_footer(_BASE[0], bytes(footer))
        before = memo.hits
        _check_verdict(memo, data)
        if memo.hits > before:
            hits += 1
            hazards += memo.checked_footer(data, "f")[1] is not None
    assert hits > 100, hits
    assert hazards > 10, hazards


def test_a_hazardous_templates_verdict_is_reused_and_still_pyarrow_hazards() -> None:
    """A template whose own verdict is a hazard (statistics of the wrong width): a footer
    differing from it only in values the check does not read gets the same verdict."""
    from parquetry.parquet.thrift import write_struct

    def rebuilt(data: bytes, size_delta: int) -> bytes:
        meta = footer_from_bytes(data, "f").metadata
        assert meta is not None
        column = meta[4][0][1][0][3]  # "id", int64
        column[12][6] = b"\x01\x02\x03"  # a 3-byte minimum for an 8-byte type
        column[6] += size_delta  # total_uncompressed_size: a value the check never reads
        footer = write_struct(meta, FILE_META_DATA)
        (length,) = struct.unpack("<i", data[-8:-4])
        return data[: -8 - length] + footer + struct.pack("<i", len(footer)) + b"PAR1"

    memo = FooterMemo()
    first, second = rebuilt(_BASE[0], 0), rebuilt(_BASE[0], 1)
    _check_verdict(memo, first)  # learnt as a template
    hits = memo.hits
    _check_verdict(memo, first)
    _check_verdict(memo, second)
    assert memo.hits == hits + 2
    verdict = memo.checked_footer(second, "f")[1]
    assert verdict is not None
    assert "statistics" in verdict
