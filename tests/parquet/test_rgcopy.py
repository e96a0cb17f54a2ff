"""Binary row-group copy (parquet/rgcopy.py, parquet/statsmerge.py): outputs read exactly
like the concatenated inputs in pyarrow, DuckDB and Polars; merged statistics are exact."""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from parquetry.parquet.footer import footer_from_bytes
from parquetry.parquet.footer_check import pyarrow_hazard
from parquetry.parquet.inspect import build_report
from parquetry.parquet.rgcopy import RowGroupAssembler, copy_check, mergeable, schema_key
from parquetry.parquet.statsmerge import merge_statistics

SCHEMA = pa.schema(
    [
        ("i", pa.int64()),
        ("u", pa.uint32()),
        ("f", pa.float64()),
        ("s", pa.string()),
        ("b", pa.binary()),
        ("ts", pa.timestamp("us")),
        ("d", pa.decimal128(12, 3)),
        ("flag", pa.bool_()),
        ("l", pa.list_(pa.int32())),
    ]
)


def _encode(table: pa.Table, **kwargs: Any) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression=kwargs.pop("compression", "snappy"), **kwargs)
    return bytes(sink.getvalue().to_pybytes())


def _assemble(files: list[bytes], *, whole: bool = False) -> bytes:
    """Every file's row groups: merged by page concatenation where allowed, else whole."""
    template = footer_from_bytes(files[0]).metadata
    assert template is not None
    expected = schema_key(template)
    out = RowGroupAssembler(template, b"parquetry version test (build binary-copy)")
    merge: list[tuple[bytes, dict[int, Any]]] = []
    for data in files:
        raw = footer_from_bytes(data)
        assert raw.metadata is not None
        assert copy_check(raw.metadata, expected, data, len(data) - raw.footer_length - 8) is None
        for group in raw.metadata[4]:
            if not whole and mergeable(group) is not None:
                merge.append((data, group))
            else:
                out.add_whole(data, group)
    if merge:
        out.add_merged(merge)
    result = bytes(out.finish())
    raw = footer_from_bytes(result)
    assert pyarrow_hazard(raw) is None  # parquetry's own footer check accepts the output
    return result


def _stats(data: bytes, group: int, column: int) -> tuple[Any, Any, int | None]:
    st_ = pq.read_metadata(pa.BufferReader(data)).row_group(group).column(column).statistics
    if st_ is None:
        return (None, None, None)
    lo, hi = (st_.min, st_.max) if st_.has_min_max else (None, None)
    return (lo, hi, st_.null_count if st_.has_null_count else None)


_row = st.fixed_dictionaries(
    {
        "i": st.none() | st.integers(-(2**63), 2**63 - 1),
        "u": st.none() | st.integers(0, 2**32 - 1),
        "f": st.none() | st.sampled_from([-0.0, 0.0, 1.5, -2.25, math.inf, -math.inf, 1e300]),
        "s": st.none() | st.text(max_size=6),
        "b": st.none() | st.binary(max_size=4),
        "ts": st.none()
        | st.datetimes(min_value=dt.datetime(1900, 1, 1), max_value=dt.datetime(2200, 1, 1)),
        "d": st.none()
        | st.decimals(min_value=-(10**8), max_value=10**8, places=3, allow_nan=False),
        "flag": st.none() | st.booleans(),
        "l": st.none() | st.lists(st.none() | st.integers(-5, 5), max_size=3),
    }
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    parts=st.lists(st.lists(_row, min_size=1, max_size=8), min_size=2, max_size=4),
    page_version=st.sampled_from(["1.0", "2.0"]),
)
def test_merged_statistics_equal_pyarrows_of_the_concatenation(
    parts: list[list[dict[str, Any]]], page_version: str
) -> None:
    tables = [pa.Table.from_pylist(rows, schema=SCHEMA) for rows in parts]
    kwargs = {"use_dictionary": False, "data_page_version": page_version}
    merged = _assemble([_encode(t, **kwargs) for t in tables])
    whole = pa.concat_tables(tables)
    assert pq.read_table(pa.BufferReader(merged)).equals(whole)
    assert pq.read_metadata(pa.BufferReader(merged)).num_row_groups == 1
    oracle = _encode(whole, **kwargs)
    for column in range(len(SCHEMA)):
        got, want = _stats(merged, 0, column), _stats(oracle, 0, column)
        assert got[2] == want[2], SCHEMA[column].name  # null counts always exact
        if got[0] is not None or got[1] is not None:
            # Bounds, where the merge keeps them, are exactly pyarrow's (-0.0 == 0.0 is
            # compared by sign too: the merged minimum keeps -0.0, the maximum +0.0).
            assert (got[0], got[1]) == (want[0], want[1]), SCHEMA[column].name
            for g, w in zip(got[:2], want[:2], strict=True):
                if isinstance(g, float) and g == 0:
                    assert math.copysign(1, g) == math.copysign(1, w)
        else:
            # Left out only where some part has values but no bounds (here: none of the
            # generated columns lack an order, so only the all-null case qualifies).
            assert want[0] is None, SCHEMA[column].name


def test_merge_statistics_leaves_out_what_it_cannot_merge_exactly() -> None:
    int64 = {1: 2, 3: 1, 4: b"x"}
    low = (1).to_bytes(8, "little", signed=True)
    high = (9).to_bytes(8, "little", signed=True)
    neg = (-3).to_bytes(8, "little", signed=True)
    a = {3: 0, 5: high, 6: low, 4: 7, 1: high, 2: low, 7: True, 8: True}
    b = {3: 2, 5: low, 6: neg, 7: True, 8: False}
    got = merge_statistics([(a, 5), (b, 4)], int64)
    # distinct_count and the deprecated min/max are dropped; exactness is the AND.
    assert got == {3: 2, 5: high, 6: neg, 7: True, 8: False}
    # A part without statistics: nothing can be said.
    assert merge_statistics([(a, 5), (None, 4)], int64) is None
    # A part with values but no bounds: bounds dropped, null count kept.
    assert merge_statistics([(a, 5), ({3: 1}, 4)], int64) == {3: 1}
    # An all-null part contributes no bounds.
    assert merge_statistics([(a, 5), ({3: 4}, 4)], int64) == {
        3: 4,
        5: high,
        6: low,
        7: True,
        8: True,
    }
    # Unsigned order: 0xFFFFFFFF is the largest uint32, the smallest int32.
    uint32 = {1: 1, 10: {10: {1: 32, 2: False}}}
    big, one = b"\xff\xff\xff\xff", (1).to_bytes(4, "little")
    got = merge_statistics([({3: 0, 5: big, 6: big}, 1), ({3: 0, 5: one, 6: one}, 1)], uint32)
    assert got is not None
    assert (got[6], got[5]) == (one, big)
    # INT96 and NaN bounds have no order to merge by.
    assert 5 not in (merge_statistics([({3: 0, 5: b"x" * 12, 6: b"x" * 12}, 1)] * 2, {1: 3}) or {})
    nan = b"\x00\x00\x00\x00\x00\x00\xf8\x7f"
    double = {1: 5}
    assert merge_statistics([({3: 0, 5: nan, 6: nan}, 1)] * 2, double) == {3: 0}
    # Decimals stored as bytes compare as signed big-endian integers.
    dec = {1: 7, 2: 2, 6: 5}
    m1, p1 = (-1).to_bytes(2, "big", signed=True), (1).to_bytes(2, "big", signed=True)
    got = merge_statistics([({3: 0, 5: p1, 6: p1}, 1), ({3: 0, 5: m1, 6: m1}, 1)], dec)
    assert got is not None
    assert (got[6], got[5]) == (m1, p1)


def test_whole_and_merged_copies_read_identically_in_pyarrow_duckdb_and_polars(
    tmp_path: Path,
) -> None:
    tables = [
        pa.Table.from_pylist(
            [
                {
                    "i": n * 1000 + k,
                    "u": k,
                    "f": None if k % 3 else k / 7,
                    "s": f"s{n}-{k}" if k % 4 else None,
                    "b": bytes([k]),
                    "ts": dt.datetime(2020, 1, 1) + dt.timedelta(seconds=n * 100 + k),
                    "d": Decimal(f"{n}.{k:03d}"),
                    "flag": k % 2 == 0,
                    "l": [k, None] if k % 5 else None,
                }
                for k in range(40)
            ],
            schema=SCHEMA,
        )
        for n in range(5)
    ]
    whole = pa.concat_tables(tables)
    cases = {
        # pyarrow's default encoding (dictionary): row groups copied whole.
        "dictionary": _assemble([_encode(t, row_group_size=15) for t in tables]),
        # without dictionaries: merged into one row group by page concatenation.
        "merged": _assemble([_encode(t, use_dictionary=False) for t in tables]),
        "zstd-whole": _assemble(
            [_encode(t, use_dictionary=False, compression="zstd") for t in tables], whole=True
        ),
    }
    for name, data in cases.items():
        path = tmp_path / f"{name}.parquet"
        path.write_bytes(data)
        assert pq.read_table(path).equals(whole), name
        filtered = pq.read_table(path, filters=[("i", ">=", 1015), ("i", "<", 3005)])
        assert filtered.column("i").to_pylist() == [
            *range(1015, 1040),
            *range(2000, 2040),
            *range(3000, 3005),
        ], name
        con = duckdb.connect()
        got = con.sql(f"SELECT * FROM read_parquet('{path}') ORDER BY i").to_arrow_table()
        assert got.column("i").to_pylist() == whole.column("i").to_pylist(), name
        assert got.column("s").to_pylist() == whole.column("s").to_pylist(), name
        assert got.column("d").to_pylist() == whole.column("d").to_pylist(), name
        assert got.column("l").to_pylist() == whole.column("l").to_pylist(), name
        assert con.execute(
            f"SELECT count(*) FROM read_parquet('{path}') WHERE i < 30"
        ).fetchone() == (30,)
        frame = pl.read_parquet(path)
        assert frame.to_arrow().column("ts").to_pylist() == whole.column("ts").to_pylist(), name
        assert frame.height == whole.num_rows
        assert frame.filter(pl.col("u") == 3).height == 5
    merged_md = pq.read_metadata(pa.BufferReader(cases["merged"]))
    assert merged_md.num_row_groups == 1
    assert merged_md.num_rows == 200
    assert pq.read_metadata(pa.BufferReader(cases["dictionary"])).num_row_groups == 15


def test_damaged_pages_or_another_schema_are_not_copied() -> None:
    table = pa.table({"a": pa.array(range(100), pa.int64()), "s": [str(i) for i in range(100)]})
    data = _encode(table, use_dictionary=False)
    raw = footer_from_bytes(data)
    assert raw.metadata is not None
    expected = schema_key(raw.metadata)
    end = len(data) - raw.footer_length - 8
    assert copy_check(raw.metadata, expected, data, end) is None
    # A flipped byte in the first page header: its pages no longer tile the chunk.
    first = raw.metadata[4][0][1][0][3][9]
    damaged = data[:first] + bytes([data[first] ^ 0x55]) + data[first + 1 :]
    assert copy_check(raw.metadata, expected, damaged, end) is not None
    # A chunk claimed to run into the footer.
    bad = footer_from_bytes(data).metadata
    assert bad is not None
    bad[4][0][1][1][3][7] += 10_000
    assert "outside" in (copy_check(bad, expected, data, end) or "")
    other = footer_from_bytes(
        _encode(table.cast(pa.schema([("a", pa.int32()), ("s", pa.string())])))
    )
    assert other.metadata is not None
    assert copy_check(other.metadata, expected, data, end) == "schema differs"


@pytest.mark.parametrize("dictionary", [True, False])
def test_inspect_reports_the_copy_like_the_inputs(dictionary: bool) -> None:
    table = pa.table({"a": pa.array(range(50), pa.int64()), "s": [str(i % 4) for i in range(50)]})
    data = _encode(table, use_dictionary=dictionary)
    out = _assemble([data] * 3)
    report = build_report(footer_from_bytes(out), "out.parquet")
    source = build_report(footer_from_bytes(data), "in.parquet")
    assert report.rows == 150
    assert len(report.row_groups) == (3 if dictionary else 1)
    assert "binary-copy" in (report.created_by or "")
    for got, want in zip(report.row_groups[0].chunks, source.row_groups[0].chunks, strict=True):
        assert (got.min, got.max, got.codec) == (want.min, want.max, want.codec)
        assert got.null_count == want.null_count * (1 if dictionary else 3)
        assert not got.has_column_index
        assert not got.has_offset_index
        assert not got.has_bloom_filter


_CORPUS_COPY = """
import sys
from pathlib import Path
from parquetry.errors import ParquetryError
from parquetry.parquet.footer import footer_from_bytes
from parquetry.parquet.footer_check import pyarrow_hazard
import pyarrow as pa
import pyarrow.parquet as pq
from parquetry.parquet.rgcopy import (
    RowGroupAssembler, UnreadableFooter, copy_check, mergeable, schema_key
)

checked = copied = 0
for path in sorted(Path(sys.argv[1]).rglob("*")):
    if not path.is_file() or path.suffix in (".md", ".txt"):
        continue
    data = path.read_bytes()
    try:
        raw = footer_from_bytes(data, str(path))
    except ParquetryError:
        continue
    if raw.metadata is None or pyarrow_hazard(raw) is not None:
        continue
    checked += 1
    meta = raw.metadata
    start = len(data) - raw.footer_length - 8
    if copy_check(meta, schema_key(meta), data, start) is not None:
        continue  # refused: the re-encoding path reads (or names) it
    out = RowGroupAssembler(meta, b"parquetry version test (build binary-copy)")
    merge = []
    for group in meta[4]:
        if mergeable(group) is not None:
            merge.append((data, group))
        else:
            out.add_whole(data, group)
    if len(merge) > 1:
        out.add_merged(merge)
    elif merge:
        out.add_whole(*merge[0])
    try:
        copy = bytes(out.finish())
    except UnreadableFooter:
        # The copy's footer would not parse: neither does the input's.
        try:
            pq.read_metadata(pa.BufferReader(data))
        except (OSError, ValueError, pa.ArrowException):
            continue
        raise
    assert pyarrow_hazard(footer_from_bytes(copy)) is None, path
    copied += 1
print(checked, copied)
"""


def test_hostile_and_foreign_corpora_are_refused_or_copied_never_crash() -> None:
    """Every file of tests/data/parquet-fuzz and parquet-testing whose footer parquetry
    accepts: copy_check refuses it with a reason or the copy's footer is sound; in a
    subprocess, so an abort would show."""
    import subprocess
    import sys

    data = Path(__file__).parents[1] / "data"
    for corpus in ("parquet-fuzz", "parquet-testing"):
        done = subprocess.run(
            [sys.executable, "-c", _CORPUS_COPY, str(data / corpus)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, (corpus, done.stderr[-2000:])
        checked, _copied = map(int, done.stdout.split())
        # The fuzzed footers are all refused before the copier sees them.
        assert checked >= (1 if corpus == "parquet-testing" else 0), corpus
