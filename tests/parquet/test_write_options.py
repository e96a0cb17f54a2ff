"""WriteOptions: defaults, validation, per-column dictionary decision, JSON, write helpers."""

from __future__ import annotations

import dataclasses
import io
import json
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parquetry.errors import InvalidArgument, SchemaViolation
from parquetry.parquet.files import read_table_from_store, write_table_bytes, write_table_to_store
from parquetry.parquet.footer import footer_from_bytes
from parquetry.parquet.inspect import build_report
from parquetry.parquet.options import BloomFilter, WriteOptions, low_cardinality_columns
from parquetry.store import PutMode, Store

TABLE = pa.table(
    {
        "user": [f"user-{i}@example.com" for i in range(2000)],  # unique
        "country": ["NO", "SE", "DK", "FI"] * 500,  # low cardinality
        "amount": pa.array(range(2000), pa.int64()),
        "flag": [True, False] * 1000,
    }
)


def _chunks(data: bytes) -> dict[str, Any]:
    md = pq.ParquetFile(io.BytesIO(data)).metadata
    return {
        md.row_group(0).column(i).path_in_schema: md.row_group(0).column(i)
        for i in range(md.num_columns)
    }


def test_defaults_are_zstd_1_page_index_v1_pages_and_us_timestamps() -> None:
    options = WriteOptions()
    assert (options.compression, options.compression_level) == ("zstd", 1)
    kwargs = options.writer_kwargs(TABLE.schema)
    assert kwargs["coerce_timestamps"] == "us"
    assert kwargs["data_page_version"] == "1.0"
    assert kwargs["use_compliant_nested_type"] is True
    assert kwargs["write_page_index"] is True
    assert kwargs["use_dictionary"] is True  # no sample: pyarrow's own behaviour
    table = pa.table({"ts": pa.array([1_000_000_001], pa.timestamp("ns", tz="UTC"))})
    with pytest.raises(
        SchemaViolation, match="would lose data"
    ):  # never drops nanoseconds silently
        write_table_bytes(table)
    ok = pa.table({"ts": pa.array([1_000_000_000], pa.timestamp("ns", tz="UTC"))})
    assert pq.read_table(io.BytesIO(write_table_bytes(ok))).schema.field("ts").type == pa.timestamp(
        "us", tz="UTC"
    )


def test_auto_dictionary_only_for_low_cardinality_columns() -> None:
    assert low_cardinality_columns(TABLE, 0.1) == ["country"]
    data = write_table_bytes(TABLE)
    chunks = _chunks(data)
    assert chunks["country"].has_dictionary_page
    assert not chunks["user"].has_dictionary_page
    assert not chunks["amount"].has_dictionary_page
    everything = write_table_bytes(TABLE, WriteOptions(dictionary=True))
    assert _chunks(everything)["user"].has_dictionary_page
    chosen = write_table_bytes(TABLE, WriteOptions(dictionary=("user",)))
    assert _chunks(chosen)["user"].has_dictionary_page
    assert not _chunks(chosen)["country"].has_dictionary_page


def test_auto_dictionary_saves_space_on_unique_columns() -> None:
    big = pa.table({"email": [f"person{i}@example.org" for i in range(50_000)]})
    auto = len(write_table_bytes(big, WriteOptions(row_group_size=10_000)))
    always = len(write_table_bytes(big, WriteOptions(row_group_size=10_000, dictionary=True)))
    assert auto < always


def test_bloom_filters_page_index_and_sorting_columns_are_written() -> None:
    options = WriteOptions(
        bloom_filters=(BloomFilter(column="user", ndv=5000, fpp=0.01),),
        sorting_columns=(("amount", "ascending"),),
        write_page_index=False,
    )
    data = write_table_bytes(TABLE, options)
    report = build_report(footer_from_bytes(data), "x")
    chunks = {c.path: c for c in report.row_groups[0].chunks}
    assert chunks["user"].has_bloom_filter
    assert not chunks["country"].has_bloom_filter
    assert not chunks["amount"].has_column_index
    assert report.row_groups[0].sorting_columns == ("amount asc",)


@pytest.mark.parametrize(
    "changes",
    [
        {"compression": "lzo"},
        {"compression": "gzip", "compression_level": 10},
        {"compression": "zstd", "compression_level": 23},
        {"row_group_size": 0},
        {"dictionary": "sometimes"},
        {"dictionary_max_ratio": 0},
        {"sorting_columns": (("a", "sideways"),)},
        {"data_page_version": "3.0"},
    ],
)
def test_invalid_options_are_rejected(changes: dict[str, Any]) -> None:
    with pytest.raises(InvalidArgument):
        WriteOptions(**changes)


def test_unknown_columns_are_rejected_before_writing() -> None:
    for options in (
        WriteOptions(bloom_filters=(BloomFilter(column="nope"),)),
        WriteOptions(sorting_columns=(("nope", "ascending"),)),
        WriteOptions(dictionary=("nope",)),
    ):
        with pytest.raises(InvalidArgument, match="nope"):
            options.writer_kwargs(TABLE.schema)


def test_options_are_frozen_and_snappy_takes_no_level() -> None:
    options = WriteOptions(compression="SNAPPY", compression_level=None)
    assert options.compression == "snappy"
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.compression = "zstd"  # type: ignore[misc]
    assert "compression_level" not in WriteOptions(compression="snappy").writer_kwargs(TABLE.schema)
    data = write_table_bytes(TABLE, options)
    assert _chunks(data)["user"].compression == "SNAPPY"


@settings(max_examples=50, deadline=None)
@given(
    st.builds(
        WriteOptions,
        compression=st.sampled_from(["zstd", "snappy", "lz4", "none", "gzip"]),
        compression_level=st.none(),
        row_group_size=st.none() | st.integers(1, 10**7),
        dictionary=st.sampled_from(["auto", True, False, ("a", "b")]),
        dictionary_max_ratio=st.floats(0.01, 1),
        write_page_index=st.booleans(),
        bloom_filters=st.lists(
            st.builds(
                BloomFilter,
                column=st.text(min_size=1, max_size=5),
                ndv=st.none() | st.integers(1, 10**6),
            ),
            max_size=2,
        ).map(tuple),
        sorting_columns=st.lists(
            st.tuples(
                st.text(min_size=1, max_size=5), st.sampled_from(["ascending", "descending"])
            ),
            max_size=2,
        ).map(tuple),
        data_page_version=st.sampled_from(["1.0", "2.0"]),
    )
)
def test_json_round_trip(options: WriteOptions) -> None:
    assert WriteOptions.from_json(json.loads(json.dumps(options.to_json()))) == options


def test_writer_kwargs_feed_a_parquet_writer() -> None:
    options = WriteOptions(row_group_size=500)
    sink = io.BytesIO()
    with pq.ParquetWriter(
        sink, TABLE.schema, **options.writer_kwargs(TABLE.schema, sample=TABLE)
    ) as writer:
        writer.write_table(TABLE, row_group_size=options.row_group_size)
    assert pq.ParquetFile(io.BytesIO(sink.getvalue())).metadata.num_row_groups == 4


def test_write_to_store_and_read_back(any_store: Store) -> None:
    meta = write_table_to_store(any_store, "t/one.parquet", TABLE, WriteOptions(row_group_size=700))
    assert meta.size == any_store.head("t/one.parquet").size
    assert read_table_from_store(any_store, "t/one.parquet", columns=["country"]).equals(
        TABLE.select(["country"])
    )
    from parquetry.errors import AlreadyExists

    with pytest.raises(AlreadyExists):
        write_table_to_store(any_store, "t/one.parquet", TABLE, mode=PutMode.CREATE)


def test_dictionary_decision_on_long_columns_uses_the_whole_row_group() -> None:
    rows = 200_000
    table = pa.table(
        {
            "unique": pa.array(range(rows), pa.int64()),
            # 70k distinct values: the head looks unique-ish (> 90%), so it is skipped early.
            "wide": pa.array([i % 70_000 for i in range(rows)], pa.int64()),
            # 15k distinct values: a high ratio in the head, 0.075 over the whole group.
            "cycle": pa.array([i % 15_000 for i in range(rows)], pa.int64()),
        }
    )
    assert low_cardinality_columns(table, 0.1) == ["cycle"]
    small_groups = WriteOptions(row_group_size=20_000)
    assert small_groups.writer_kwargs(table.schema, sample=table)["use_dictionary"] == []


def test_options_pickle_for_spark_executors() -> None:
    import pickle

    options = WriteOptions(
        compression="lz4",
        bloom_filters=(BloomFilter(column="user", fpp=0.05),),
        sorting_columns=(("amount", "descending"),),
    )
    assert pickle.loads(pickle.dumps(options)) == options
