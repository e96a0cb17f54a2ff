"""``inspect`` flags footers that contradict themselves, and untrustworthy DECIMAL min/max."""

from __future__ import annotations

import decimal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parquetry.parquet.files import write_table_bytes
from parquetry.parquet.inspect import inspect_file, render
from parquetry.parquet.options import WriteOptions
from parquetry.parquet.thrift import read_struct, write_struct
from parquetry.parquet.thrift_schema import FILE_META_DATA
from parquetry.store import LocalStore, MemoryStore

DATA = Path(__file__).parent.parent / "data" / "parquet-testing" / "data"
TABLE = pa.table(
    {
        "i": pa.array([1, 2, 3, 4], pa.int64()),
        "d": pa.array(
            [decimal.Decimal(x) for x in ("1.50", "-2.25", "3.00", "0.01")], pa.decimal128(6, 2)
        ),
    }
)


def _patched(patch: Callable[[dict[int, Any]], None], data: bytes | None = None) -> bytes:
    data = data or write_table_bytes(TABLE, WriteOptions(row_group_size=2))
    length = int.from_bytes(data[-8:-4], "little")
    meta, _ = read_struct(data[-8 - length : -8], 0, FILE_META_DATA)
    patch(meta)
    footer = write_struct(meta, FILE_META_DATA)
    return data[: -8 - length] + footer + len(footer).to_bytes(4, "little") + b"PAR1"


def _warnings(data: bytes) -> tuple[str, ...]:
    store = MemoryStore()
    store.put("f.parquet", data)
    report = inspect_file(store, "f.parquet")
    render(report)
    return report.warnings


def test_consistent_file_has_no_findings() -> None:
    warnings = _warnings(_patched(lambda meta: None))
    assert not [w for w in warnings if "negative" in w or "footer states" in w or "?" in w]


def test_negative_and_mismatched_row_counts_are_flagged() -> None:
    def patch(meta: dict[int, Any]) -> None:
        meta[3] = -1
        meta[4][1][3] = -7

    warnings = _warnings(_patched(patch))
    assert "the footer states a negative number of rows (-1)" in warnings
    assert "row group 1 states a negative number of rows (-7)" in warnings
    assert "the row groups hold -5 rows, the footer states -1" in warnings


def test_row_group_sum_differing_from_the_file_is_flagged() -> None:
    warnings = _warnings(_patched(lambda meta: meta.__setitem__(3, 5)))
    assert "the row groups hold 4 rows, the footer states 5" in warnings


def test_unknown_type_ids_and_negative_chunk_counts_are_flagged() -> None:
    def patch(meta: dict[int, Any]) -> None:
        meta[2][1][1] = 42  # leaf "i": a physical type id the format does not define
        chunk = meta[4][0][1][0][3]
        chunk[4] = 99  # codec
        chunk[5] = -3  # num_values

    warnings = _warnings(_patched(patch))
    assert "i: unknown physical type id 42 (shown as ?)" in warnings
    assert "i: row group 0 has an unknown codec (shown as ?)" in warnings
    assert "i: row group 0 states negative values (-3)" in warnings


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(-(2**40), 2**40), min_size=2, max_size=2), st.integers(-(2**40), 2**40))
def test_row_count_findings_match_an_oracle(groups: list[int], total: int) -> None:
    """Oracle: a finding for each negative count and when the groups' sum is not the total."""

    def patch(meta: dict[int, Any]) -> None:
        meta[3] = total
        for group, rows in zip(meta[4], groups, strict=True):
            group[3] = rows

    warnings = _warnings(_patched(patch))
    assert ("the footer states a negative number of rows" in "\n".join(warnings)) == (total < 0)
    for index, rows in enumerate(groups):
        line = f"row group {index} states a negative number of rows ({rows})"
        assert (line in warnings) == (rows < 0)
    mismatch = f"the row groups hold {sum(groups)} rows, the footer states {total}"
    assert (mismatch in warnings) == (sum(groups) != total)


def _deprecated_stats(meta: dict[int, Any]) -> None:
    meta.pop(7, None)  # no column orders: an old writer
    for group in meta[4]:
        stats = group[1][1][3][12]
        stats[1], stats[2] = stats.pop(5), stats.pop(6)


@pytest.mark.parametrize(
    ("patch", "trusted"),
    [
        (lambda meta: None, True),
        (_deprecated_stats, False),
        (lambda meta: meta.pop(7), False),  # min_value/max_value without a column order
    ],
    ids=["modern", "deprecated-fields", "no-column-order"],
)
def test_binary_decimal_statistics_of_old_writers_are_untrusted(
    patch: Callable[[dict[int, Any]], None], trusted: bool
) -> None:
    data = _patched(
        patch, write_table_bytes(TABLE, WriteOptions(row_group_size=2, dictionary=False))
    )
    store = MemoryStore()
    store.put("f.parquet", data)
    report = inspect_file(store, "f.parquet")
    decimal_chunks = [c for g in report.row_groups for c in g.chunks if c.path == "d"]
    assert [c.min_max_trusted for c in decimal_chunks] == [trusted, trusted]
    assert decimal_chunks[0].min == "-2.25"
    assert all(c.min_max_trusted for g in report.row_groups for c in g.chunks if c.path == "i")
    line = (
        "d: DECIMAL min/max from an old writer (deprecated statistics or no column order) "
        "are untrustworthy"
    )
    assert (line in report.warnings) == (not trusted)
    assert report.to_json()["row_groups"][0]["chunks"][1]["min_max_trusted"] is trusted


def test_parquet_mr_1_8_decimal_statistics_are_untrusted() -> None:
    """parquet-testing's fixed_length_decimal.parquet: parquet-mr 1.8.2, deprecated stats."""
    report = inspect_file(LocalStore(DATA), "fixed_length_decimal.parquet")
    assert report.created_by is not None
    assert report.created_by.startswith("parquet-mr version 1.8.2")
    chunk = report.row_groups[0].chunks[0]
    assert (chunk.min, chunk.max, chunk.min_max_trusted) == ("2.00", "24.00", False)
    assert any("untrustworthy" in w for w in report.warnings)
