"""inspect_file: footer-only reports on local, memory and S3 stores, encrypted and bad files."""

from __future__ import annotations

import datetime as dt
import decimal
import json
from typing import Any

import pyarrow as pa
import pytest

from parquetry.errors import InvalidFormat, NotFound
from parquetry.parquet.encryption import EncryptionSettings, InMemoryKms
from parquetry.parquet.files import write_table_bytes, write_table_to_store
from parquetry.parquet.footer import TAIL_BYTES
from parquetry.parquet.inspect import REPORT_FORMAT, FileReport, inspect_file, render
from parquetry.parquet.options import BloomFilter, WriteOptions
from parquetry.store import Store
from parquetry.testing import CountingStore

UTC = dt.UTC
TABLE = pa.table(
    {
        "id": pa.array(range(3000), pa.int64()),
        "cat": ["a", "b", "c"] * 1000,
        "ts": pa.array(
            [dt.datetime(2024, 1, 1, tzinfo=UTC) + dt.timedelta(seconds=i) for i in range(3000)],
            pa.timestamp("us", tz="UTC"),
        ),
        "price": pa.array(
            [decimal.Decimal("-1.25"), None, decimal.Decimal("9.50")] * 1000, pa.decimal128(10, 2)
        ),
        "tags": [["x", "y"], [], None] * 1000,
        "day": pa.array([dt.date(2024, 2, 2)] * 3000),
    }
)
OPTIONS = WriteOptions(
    row_group_size=1000,
    bloom_filters=(BloomFilter(column="cat", ndv=10),),
    sorting_columns=(("id", "ascending"),),
)


def _write(store: Store, key: str = "data/file.parquet", table: pa.Table = TABLE) -> None:
    write_table_to_store(store, key, table, OPTIONS)


def _check_report(report: FileReport, size: int) -> None:
    assert report.file_size == size
    assert report.rows == 3000
    assert report.created_by is not None
    assert report.created_by.startswith("parquet-cpp-arrow")
    assert [k for k, _ in report.key_value_metadata] == ["ARROW:schema"]
    schema = {c.path: c for c in report.schema}
    assert schema["ts"].logical_type == "TIMESTAMP(MICROS,UTC)"
    assert schema["price"].logical_type == "DECIMAL(10,2)"
    assert schema["tags.list.element"].max_repetition_level == 1
    assert schema["tags.list.element"].max_definition_level == 3
    assert schema["id"].physical_type == "INT64"
    assert schema["id"].repetition == "OPTIONAL"
    assert [g.rows for g in report.row_groups] == [1000, 1000, 1000]
    first = {c.path: c for c in report.row_groups[0].chunks}
    assert (first["id"].min, first["id"].max, first["id"].null_count) == ("0", "999", 0)
    assert first["price"].min == "-1.25"
    assert first["price"].max == "9.50"
    assert first["price"].null_count == 333
    assert first["ts"].min == "2024-01-01T00:00:00.000000Z"
    assert first["day"].max == "2024-02-02"
    assert first["cat"].has_bloom_filter
    assert not first["id"].has_bloom_filter
    assert first["cat"].has_dictionary_page
    assert not first["id"].has_dictionary_page
    assert first["id"].has_column_index
    assert first["id"].has_offset_index
    assert first["id"].codec == "ZSTD"
    assert report.row_groups[2].sorting_columns == ("id asc",)
    summary = {c.path: c for c in report.columns}
    assert summary["id"].compressed_size == sum(
        {c.path: c for c in g.chunks}["id"].compressed_size or 0 for g in report.row_groups
    )
    assert summary["id"].compression_ratio is not None
    assert summary["id"].compression_ratio > 1
    assert report.encryption is None
    assert report.warnings == (
        "2 row group(s) under 10,000 rows: more footer bytes and requests per row read",
    )


@pytest.mark.parametrize("kind", ["local", pytest.param("s3", marks=pytest.mark.s3), "memory"])
def test_inspect_reads_only_the_tail(kind: str, store_factory: Any) -> None:
    store = store_factory(kind)
    _write(store)
    size = store.head("data/file.parquet").size
    counting = CountingStore(store)
    report = inspect_file(counting, "data/file.parquet")
    _check_report(report, size)
    # One head for the size, one ranged read of the tail: no whole-object get.
    assert counting.counts == {"head": 1, "get_range": 1}
    assert counting.bytes_read == min(size, TAIL_BYTES)


def test_big_footer_costs_exactly_one_more_read(memory_store: Store) -> None:
    wide = pa.table({f"column_with_a_long_name_{i:04d}": [i] for i in range(600)})
    write_table_to_store(memory_store, "wide.parquet", wide, WriteOptions(row_group_size=1))
    counting = CountingStore(memory_store)
    report = inspect_file(counting, "wide.parquet")
    assert report.footer_size > TAIL_BYTES
    assert counting.counts == {"head": 1, "get_range": 2}
    assert len(report.schema) == 600


def test_json_is_stable_and_round_trips_through_json(memory_store: Store) -> None:
    _write(memory_store)
    doc = inspect_file(memory_store, "data/file.parquet").to_json()
    assert doc["format"] == REPORT_FORMAT
    assert json.loads(json.dumps(doc, sort_keys=True)) == doc
    assert set(doc) == {
        "format",
        "key",
        "file_size",
        "footer_size",
        "rows",
        "created_by",
        "format_version",
        "key_value_metadata",
        "schema",
        "row_groups",
        "columns",
        "encryption",
        "warnings",
    }
    assert set(doc["row_groups"][0]["chunks"][0]) >= {
        "path",
        "codec",
        "encodings",
        "compressed_size",
        "min",
        "max",
        "null_count",
        "has_dictionary_page",
        "has_column_index",
        "has_bloom_filter",
        "dictionary_fallback",
        "encrypted",
    }


def test_render_gives_rich_tables(memory_store: Store) -> None:
    from rich.console import Console

    _write(memory_store)
    console = Console(width=200, record=True)
    console.print(*render(inspect_file(memory_store, "data/file.parquet")))
    text = console.export_text()
    for expected in ("TIMESTAMP(MICROS,UTC)", "Row group 2", "Bytes per column", "ZSTD", "bloom"):
        assert expected in text


@pytest.mark.parametrize("plaintext_footer", [True, False])
def test_encrypted_files_are_reported_without_touching_encrypted_metadata(
    memory_store: Store, plaintext_footer: bool
) -> None:
    kms = InMemoryKms({"footer": b"f" * 16, "pii": b"p" * 16})
    options = WriteOptions(
        encryption=EncryptionSettings(
            footer_key="footer",
            column_keys=(("pii", ("cat",)),),
            plaintext_footer=plaintext_footer,
            kms=kms,
        )
    )
    memory_store.put("enc.parquet", write_table_bytes(TABLE, options))
    report = inspect_file(memory_store, "enc.parquet")
    assert report.encryption is not None
    assert report.encryption.algorithm == "AES_GCM_V1"
    if plaintext_footer:
        assert report.encryption.encrypted_columns == (("cat", "pii"),)
        chunks = {c.path: c for c in report.row_groups[0].chunks}
        assert chunks["cat"].encrypted
        assert chunks["cat"].min is None
        assert not chunks["id"].encrypted
        assert chunks["id"].max == "2999"
    else:
        assert report.encryption.encrypted_footer
        assert report.rows is None
    assert "ENCRYPT" in str(render(report)[1].title).upper()


@pytest.mark.parametrize(
    "make",
    [
        lambda d: b"",
        lambda d: b"not parquet data at all",
        lambda d: b"PAR",
        lambda d: d[: len(d) - 100],
        lambda d: d[:100] + d[-(int.from_bytes(d[-8:-4], "little") + 8) :],  # data cut out
        lambda d: d[:-8] + b"\xff\xff\xff\x7fPAR1",
    ],
    ids=["empty", "text", "PAR", "tail-cut", "middle-cut", "bad-length"],
)
def test_invalid_or_truncated_files_raise_invalid_format(memory_store: Store, make: Any) -> None:
    memory_store.put("bad.parquet", make(write_table_bytes(TABLE, OPTIONS)))
    with pytest.raises(InvalidFormat) as info:
        inspect_file(memory_store, "bad.parquet")
    assert "bad.parquet" in str(info.value)


def test_missing_key_is_not_found(memory_store: Store) -> None:
    with pytest.raises(NotFound):
        inspect_file(memory_store, "nope.parquet")


def test_warnings_name_columns_that_break_readers_or_waste_bytes(memory_store: Store) -> None:
    import pyarrow.parquet as pq

    rows = 30_000
    table = pa.table(
        {
            "legacy": pa.array([dt.datetime(2024, 1, 1)] * rows, pa.timestamp("us")),
            "nanos": pa.array(range(rows), pa.timestamp("ns")),
            "delta": pa.array(range(rows), pa.int64()),
            "email": [f"user-{i:08d}@example.com" for i in range(rows)],
            "clean": pa.array([i % 7 for i in range(rows)], pa.int32()),
        }
    )
    sink = pa.BufferOutputStream()
    pq.write_table(
        table,
        sink,
        use_deprecated_int96_timestamps=False,
        compression={
            "legacy": "brotli",
            "nanos": "zstd",
            "delta": "zstd",
            "email": "zstd",
            "clean": "zstd",
        },
        use_dictionary=["email", "clean"],
        dictionary_pagesize_limit=4096,  # email's dictionary overflows: PLAIN fallback
        column_encoding={"delta": "DELTA_BINARY_PACKED"},
        row_group_size=5_000,
    )
    memory_store.put("lint.parquet", sink.getvalue().to_pybytes())
    warnings = inspect_file(memory_store, "lint.parquet").warnings
    text = "\n".join(warnings)
    assert "nanos: Spark cannot read the TIMESTAMP(NANOS,local) type" in warnings
    assert "legacy: brotli compression: Spark cannot read it" in warnings
    assert "delta: DELTA_BINARY_PACKED: Spark's vectorised reader rejects it" in warnings
    assert "email: dictionary fell back to PLAIN: a high-cardinality column" in warnings
    assert "5 row group(s) under 10,000 rows" in text
    assert "clean:" not in text
    int96 = pa.BufferOutputStream()
    pq.write_table(table.select(["legacy"]), int96, use_deprecated_int96_timestamps=True)
    memory_store.put("int96.parquet", int96.getvalue().to_pybytes())
    assert inspect_file(memory_store, "int96.parquet").warnings == (
        "legacy: INT96 timestamps are deprecated (write INT64 micros)",
    )
