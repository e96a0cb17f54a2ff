"""``read_dataset``'s native hand-off: parquetry plans, Spark's Parquet reader reads one scan
over exactly the planned files; and the data source's ``columns`` option."""

from __future__ import annotations

import datetime
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs

from parquetry.dataset import Dataset
from parquetry.errors import DatasetIncomplete, InvalidArgument, UnknownColumn
from parquetry.spark import read_dataset, table
from parquetry.spark.native import native_root
from parquetry.store import LocalStore, MemoryStore, open_store

ROWS = 240
STRINGS = ["a b", "x/y", "z%", "plain"]


def _table() -> pa.Table:
    return pa.table(
        {
            "id": pa.array(range(ROWS), pa.int64()),
            "part": pa.array([i % 4 for i in range(ROWS)], pa.int32()),
            "day": pa.array([datetime.date(2025, 1, 1 + i % 3) for i in range(ROWS)]),
            "s": pa.array([STRINGS[i % len(STRINGS)] for i in range(ROWS)]),
            "v": pa.array([None if i % 7 == 0 else float(i % 50) for i in range(ROWS)]),
        }
    )


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> LocalStore:
    store = LocalStore(tmp_path_factory.mktemp("native") / "lake")
    Dataset.create(store, "t", _table(), partition_on=["part", "day"], secondary_indices=["id"])
    return store


def _scans(df: Any) -> list[str]:
    plan = df._jdf.queryExecution().executedPlan().toString()
    return [line for line in plan.splitlines() if "FileScan parquet" in line]


def test_one_native_scan_over_exactly_the_planned_files(spark: Any, lake: LocalStore) -> None:
    dataset = Dataset.open(lake, "t")
    df = read_dataset(spark, lake.url, "t")
    planned = {str(lake.path(f.key)) for f in dataset.plan().files}
    assert len(planned) == 12
    assert {Path(p.removeprefix("file://")).as_posix() for p in df.inputFiles()} == planned
    assert len(_scans(df)) == 1
    assert "12 paths" in _scans(df)[0]
    # Typed partition columns from the dataset schema, in the dataset's column order.
    assert df.dtypes == [
        ("id", "bigint"),
        ("part", "int"),
        ("day", "date"),
        ("s", "string"),
        ("v", "double"),
    ]
    assert df.count() == ROWS
    rows = {r.id: r for r in df.collect()}
    assert (rows[5].part, rows[5].day) == (1, datetime.date(2025, 1, 3))
    assert (rows[4].s, rows[5].s, rows[6].s) == ("a b", "x/y", "z%")
    # Column pruning is Spark's own: the scan reads one column.
    one = df.select("v")
    assert "ReadSchema: struct<v:double>" in _scans(one)[0]
    assert one.count() == ROWS
    # table() is the same read; columns= projects.
    projected = table(spark, lake.url, "t", columns=["s", "id"])
    assert projected.columns == ["s", "id"]
    assert "ReadSchema: struct<id:bigint,s:string>" in _scans(projected)[0]
    with pytest.raises(UnknownColumn, match="'nope'"):
        read_dataset(spark, lake.url, "t", columns=["id", "nope"])


def test_partition_and_index_predicates_prune_files(spark: Any, lake: LocalStore) -> None:
    by_partition = read_dataset(spark, lake.url, "t", predicates=[[("part", "==", 2)]])
    assert len(by_partition.inputFiles()) == 3
    assert all("/part=2/" in p for p in by_partition.inputFiles())
    assert by_partition.count() == ROWS // 4
    # The indexed lookup reads only the file holding id 77 (part 1, day 2025-01-03).
    lookup = read_dataset(spark, lake.url, "t", predicates=[[("id", "==", 77)]])
    assert len(lookup.inputFiles()) == 1
    assert "/part=1/day=2025-01-03/" in lookup.inputFiles()[0]
    assert [r.id for r in lookup.collect()] == [77]
    # An empty plan: no files, right schema.
    empty = read_dataset(spark, lake.url, "t", predicates=[[("id", "==", -1)]])
    assert empty.inputFiles() == []
    assert empty.count() == 0
    assert dict(empty.dtypes) == dict(read_dataset(spark, lake.url, "t").dtypes)


_COLUMNS: dict[str, hs.SearchStrategy[Any]] = {
    "id": hs.integers(-5, ROWS + 5),
    "part": hs.integers(-1, 4),
    "day": hs.dates(datetime.date(2024, 12, 31), datetime.date(2025, 1, 4)),
    "s": hs.sampled_from([*STRINGS, "", "b"]),
    "v": hs.sampled_from([0.0, 3.0, 25.5, 49.0]),
}
_OPS = ["==", "!=", "<", "<=", ">", ">="]


@hs.composite
def _literal(draw: hs.DrawFn) -> tuple[str, str, Any]:
    column = draw(hs.sampled_from(sorted(_COLUMNS)))
    op = draw(hs.sampled_from([*_OPS, "in"]))
    if op == "in":
        return (column, op, draw(hs.lists(_COLUMNS[column], min_size=1, max_size=3)))
    return (column, op, draw(_COLUMNS[column]))


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(predicates=hs.lists(hs.lists(_literal(), min_size=1, max_size=3), min_size=1, max_size=2))
def test_rows_equal_the_python_read(
    spark: Any, lake: LocalStore, predicates: list[list[tuple[str, str, Any]]]
) -> None:
    expected = Dataset.open(lake, "t").read(predicates=predicates)
    df = read_dataset(spark, lake.url, "t", predicates=predicates)
    assert len(_scans(df)) <= 1
    assert sorted(r.id for r in df.select("id").collect()) == sorted(expected["id"].to_pylist())


def test_missing_file_is_an_error_not_fewer_rows(spark: Any, tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "lake")
    dataset = Dataset.create(store, "g", _table(), partition_on=["part"])
    files = dataset.plan().files
    # Gone before the read is set up: parquetry's error naming the file.
    store.path(files[0].key).unlink()
    with pytest.raises(DatasetIncomplete, match=re.escape(files[0].key.split("/")[-1])):
        read_dataset(spark, store.url, "g")
    # Gone after setting up: Spark must not skip it (ignoreMissingFiles=false for this read).
    df = read_dataset(spark, store.url, "g", predicates=[[("part", "!=", 0)]])
    assert df.count() == ROWS * 3 // 4
    store.path(files[1].key).unlink()
    with pytest.raises(Exception, match=r"(?i)does not exist|FileNotFound|not found"):
        df.count()
    spark.conf.set("spark.sql.files.ignoreMissingFiles", "true")
    try:
        with pytest.raises(Exception, match=r"(?i)does not exist|FileNotFound|not found"):
            df.collect()
    finally:
        spark.conf.unset("spark.sql.files.ignoreMissingFiles")


def test_fallback_to_the_data_source(spark: Any, lake: LocalStore) -> None:
    # memory:// is invisible to the JVM: no native root, so read_dataset uses the source.
    assert native_root(spark, MemoryStore("native-fallback")) is None
    assert native_root(spark, lake) == str(lake.root)
    assert native_root(spark, lake, {}) is None
    # Object stores map their scheme when the JVM has the FileSystem (pip's pyspark has no
    # s3a; "file" stands in for a connector that is there).
    s3 = open_store("s3://bucket/pre/fix", region="us-east-1")
    assert native_root(spark, s3) is None
    assert native_root(spark, s3, {"s3": "file"}) == "file://bucket/pre/fix"
    assert native_root(spark, s3, {"s3": "nosuchscheme"}) is None
    fallback = read_dataset(
        spark, lake.url, "t", predicates=[[("part", "==", 2)]], native_schemes={}
    )
    assert _scans(fallback) == []
    assert "BatchScan parquetry" in fallback._jdf.queryExecution().executedPlan().toString()
    assert fallback.count() == ROWS // 4
    assert fallback.dtypes == read_dataset(spark, lake.url, "t").dtypes
    with pytest.raises(InvalidArgument, match="native"):
        read_dataset(spark, lake.url, "t", native=True, native_schemes={})


def test_non_ascii_partition_values_fall_back(spark: Any, tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "lake")
    data = pa.table({"k": ["ä", "€ x", "plain"], "x": [1, 2, 3]})
    Dataset.create(store, "u", data, partition_on=["k"])
    df = read_dataset(spark, store.url, "u")
    assert _scans(df) == []  # Spark would unescape %C3%A4 byte by byte
    assert sorted((r.k, r.x) for r in df.collect()) == [("plain", 3), ("ä", 1), ("€ x", 2)]


def test_columns_option_of_the_data_source(spark: Any, lake: LocalStore, tmp_path: Path) -> None:
    trace = tmp_path / "trace"
    df = (
        spark.read.format("parquetry")
        .option("store", lake.url)
        .option("dataset", "t")
        .option("columns", "v, part")
        .option("predicates", '[[["id", "<", 10]]]')
        .option("trace_reads", str(trace))
        .load()
    )
    assert df.dtypes == [("v", "double"), ("part", "int")]
    expected = Dataset.open(lake, "t").read(columns=["part", "v"], predicates=[[("id", "<", 10)]])
    assert Counter((r.part, r.v) for r in df.collect()) == Counter(
        zip(expected["part"].to_pylist(), expected["v"].to_pylist(), strict=True)
    )
    assert len(expected) == 10
    bad = (
        spark.read.format("parquetry")
        .option("store", lake.url)
        .option("dataset", "t")
        .option("columns", "v,nope")
    )
    with pytest.raises(Exception, match="'nope'"):
        bad.load()


def test_evolved_schema_reads_old_files_widened_and_with_nulls(spark: Any, tmp_path: Path) -> None:
    """After merge_schema (int32 -> int64, float32 -> float64, a new column), Spark's reader
    widens the old files' values and gives nulls for the added column, as Dataset.read."""
    store = LocalStore(tmp_path / "lake")
    first = pa.table(
        {
            "n": pa.array([1, 2], pa.int32()),
            "p": ["a", "b"],
            "f": pa.array([1.5, 2.5], pa.float32()),
        }
    )
    ds = Dataset.create(store, "ev", first, partition_on=["p"])
    more = pa.table({"n": [2**40], "p": ["a"], "f": [3.25], "tag": ["x"]})
    ds = ds.append(more, merge_schema=True)
    df = read_dataset(spark, store.url, "ev")
    assert len(_scans(df)) == 1  # the native hand-off, not the fallback
    assert df.dtypes == [("n", "bigint"), ("p", "string"), ("f", "double"), ("tag", "string")]
    expected = sorted(tuple(r.values()) for r in ds.read().to_pylist())
    assert sorted(tuple(r) for r in df.collect()) == expected
    assert (2**40, "a", 3.25, "x") in expected
    assert (1, "a", 1.5, None) in expected


def test_overlapping_reads_restore_the_discovery_threshold(spark: Any) -> None:
    """Two threads planning native reads at once, the first leaving first: the second still
    lists with the raised threshold, and the session's own value comes back at the end."""
    import threading

    from parquetry.spark.native import _DISCOVERY_THRESHOLD, _serial_discovery

    spark.conf.set(_DISCOVERY_THRESHOLD, "7")
    inside, release = threading.Event(), threading.Event()

    def first() -> None:
        with _serial_discovery(spark):
            inside.set()
            release.wait(10)

    thread = threading.Thread(target=first)
    thread.start()
    try:
        assert inside.wait(10)
        with _serial_discovery(spark):
            release.set()
            thread.join(10)  # the first read is done; this one is still planning
            assert spark.conf.get(_DISCOVERY_THRESHOLD) == "100000"
        assert spark.conf.get(_DISCOVERY_THRESHOLD) == "7"
    finally:
        release.set()
        spark.conf.unset(_DISCOVERY_THRESHOLD)
