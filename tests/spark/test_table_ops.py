"""ParquetryTable.delete_where / update_where / upsert / compact as Spark jobs, on the real
local session: each compared with the Python API run on a copy of the same dataset (same
rows, same operation, same metrics), indices exact, one commit; a task failing mid-job
commits nothing."""

from __future__ import annotations

import datetime as dt
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from parquetry.dataset import Dataset
from parquetry.errors import (
    DatasetNotFound,
    InvalidArgument,
    ParquetryError,
    SchemaMismatch,
    UnknownColumn,
)
from parquetry.spark import ParquetryTable
from parquetry.spark.tableops import SparkTaskFailed
from parquetry.store import LocalStore, Store


def rows(table: pa.Table, names: list[str] | None = None) -> Counter[tuple[Any, ...]]:
    names = names or table.schema.names
    return Counter(zip(*(table.column(n).to_pylist() for n in names), strict=True))


def assert_index_exact(ds: Dataset, column: str) -> None:
    """The index's (value, label) pairs equal those rebuilt from the data files."""
    rebuilt = set()
    for planned in ds.plan(None).files:
        values = pc.unique(ds.read_file(planned, [column]).column(column).drop_null())
        rebuilt |= {(v, planned.label) for v in values.to_pylist()}
    pairs = ds.index_pairs(column)
    got = set(
        zip(pairs.column("value").to_pylist(), pairs.column("label").to_pylist(), strict=True)
    )
    assert got == rebuilt


def orphan_data_files(store: Store, uuid: str) -> set[str]:
    """Parquet files under ``uuid`` that no version of the dataset references."""
    latest = Dataset.open(store, uuid)
    referenced: set[str] = set()
    for n in range(latest.version + 1):
        try:
            doc = Dataset.open(store, uuid, version=n).document
        except DatasetNotFound:  # expired by garbage collection
            continue
        referenced |= {key for files in doc.partitions.values() for key in files.values()}
    table = latest.document.tables[0]
    present = {m.key for m in store.list(f"{uuid}/{table}/") if m.key.endswith(".parquet")}
    return present - referenced


SCHEMA = pa.schema([("p", pa.int64()), ("k", pa.int64()), ("v", pa.string()), ("x", pa.int64())])


def _rows(keys: range, tag: str = "v") -> pa.Table:
    return pa.table(
        {
            "p": [k % 3 for k in keys],
            "k": list(keys),
            "v": [f"{tag}{k}" for k in keys],
            "x": [k * 10 for k in keys],
        },
        schema=SCHEMA,
    )


def _pair(tmp_path: Path, spark: Any) -> tuple[ParquetryTable, Dataset]:
    """The same dataset twice (6 small files per copy): one for Spark, one for the oracle."""
    root = tmp_path / "spark"
    ds = Dataset.create(
        LocalStore(root), "t", _rows(range(0, 30)), partition_on=["p"], secondary_indices=["k"]
    )
    ds.append(_rows(range(30, 60)))
    shutil.copytree(root, tmp_path / "python")
    table = ParquetryTable.for_path(spark, f"{root.as_uri()}/t")
    return table, Dataset.open(LocalStore(tmp_path / "python"), "t")


def _same(table: ParquetryTable, oracle: Dataset) -> Dataset:
    """Spark's newest version has the oracle's rows, operation and metrics; indices exact."""
    got = table.dataset()
    assert rows(got.read()) == rows(oracle.read())
    mine, theirs = got.history(limit=1)[0], oracle.history(limit=1)[0]
    assert mine.operation == theirs.operation
    # The same metrics are recorded with the same row changes; file counts and copied rows
    # depend on the file layout, which differs once a rewrite ran: each Spark task writes
    # its file's rows alone, the Python engine buffers small outputs together.
    assert set(mine.metrics) == set(theirs.metrics)
    for name in ("rows_deleted", "rows_updated", "rows_inserted"):
        assert mine.metrics.get(name) == theirs.metrics.get(name), name
    net = [m["rows_added"] - m["rows_removed"] for m in (mine.metrics, theirs.metrics)]
    assert net[0] == net[1]
    assert mine.parameters["engine"] == "spark"
    assert {k: v for k, v in mine.parameters.items() if k not in ("engine", "sparkAppId")} == dict(
        theirs.parameters
    )
    assert_index_exact(got, "k")
    return got


def test_delete_update_compact_match_the_python_api(spark: Any, tmp_path: Path) -> None:
    table, oracle = _pair(tmp_path, spark)
    start = table.dataset().version

    # delete: a SQL condition string; p = 2 drops whole files unread, k < 5 rewrites others.
    out = table.delete_where("k < 5 OR p = 2").collect()
    oracle = oracle.delete_where([[("k", "<", 5)], [("p", "==", 2)]])
    assert out[0]["num_affected_rows"] == 24  # 20 rows of p=2 + k in {0,1,3,4}
    assert out[0]["version"] == start + 1
    got = _same(table, oracle)
    assert got.history(limit=1)[0].metrics["rows_deleted"] == 24

    # update: SQL expressions over the old row and a literal; a DNF condition works too.
    out = table.update_where(
        "p = 1 AND k >= 10", set={"v": "upper(v) || '!'", "x": "x * 2 + 1"}
    ).collect()
    oracle = oracle.update_where(
        [[("p", "==", 1), ("k", ">=", 10)]],
        set={
            "v": pc.Expression._call(
                "binary_join_element_wise",
                [pc.Expression._call("utf8_upper", [pc.field("v")]), pc.scalar("!"), pc.scalar("")],
            ),
            "x": pc.Expression._call(
                "add_checked",
                [pc.Expression._call("multiply_checked", [pc.field("x"), pc.scalar(2)]), 1],
            ),
        },
    )
    assert out[0]["num_affected_rows"] == 17
    got = _same(table, oracle)
    assert {r["v"] for r in got.read().to_pylist() if r["k"] == 13} == {"V13!"}
    out = table.update_where([[("k", "==", 7)]], set={"v": "'seven'", "x": -1}).collect()
    oracle = oracle.update_where([[("k", "==", 7)]], set={"v": "seven", "x": -1})
    assert out[0]["num_affected_rows"] == 1
    _same(table, oracle)

    # Nothing matches: no commit, the same version.
    before = table.dataset().version
    assert table.delete_where("k = 999").collect()[0]["num_affected_rows"] == 0
    assert table.dataset().version == before

    # compact: every partition's small files into one.
    files_before = len(table.dataset().document.partitions)
    out = table.compact(target_file_size=1 << 20).collect()[0]
    oracle = oracle.compact(target_file_size=1 << 20)
    got = _same(table, oracle)
    assert out["metrics"]["numFilesRemoved"] == files_before
    assert out["metrics"]["numFilesAdded"] == len(got.document.partitions) == 2
    assert out["version"] == got.version
    hist = table.history(limit=4).collect()
    assert [r["operation"] for r in hist] == ["compact", "update_where", "update_where", "delete"]
    assert hist[3]["operationMetrics"]["numDeletedRows"] == "24"
    assert hist[2]["operationMetrics"]["numUpdatedRows"] == "17"
    assert orphan_data_files(got.store, "t") == set()


def test_arguments_are_refused_before_any_task(spark: Any, tmp_path: Path) -> None:
    table, _ = _pair(tmp_path, spark)
    version = table.dataset().version
    with pytest.raises(InvalidArgument, match="delete_where condition"):
        table.delete_where("upper(v) = 'A'")
    with pytest.raises(UnknownColumn, match="'nope'"):
        table.update_where("k = 1", set={"nope": 1})
    with pytest.raises(SchemaMismatch, match="'x'"):
        table.update_where("k = 1", set={"x": "'text'"})  # a string into an int64 column
    with pytest.raises(SchemaMismatch, match="'x'"):
        table.update_where("k = 1", set={"x": 1.5})  # lossy
    with pytest.raises(InvalidArgument, match="not supported"):
        table.update_where("k = 1", set={"x": "sqrt(x)"})
    src = spark.createDataFrame(
        [(0, 3, "a", 1), (0, 3, "b", 2)], "p long, k long, v string, x long"
    )
    with pytest.raises(InvalidArgument, match="appears 2 times"):
        table.upsert(src, on=["k"])
    with pytest.raises(InvalidArgument, match="when_matched"):
        table.upsert(_rows(range(1)), on=["k"], when_matched="replace")
    assert table.dataset().version == version


def test_upsert_from_a_dataframe_matches_the_python_api(spark: Any, tmp_path: Path) -> None:
    table, oracle = _pair(tmp_path, spark)
    # Updates (one moving to another partition), inserts, a NULL key (never matches).
    changes = pa.table(
        {
            "p": [1, 2, 0, 0, 1],
            "k": [7, 8, 100, 101, None],
            "v": ["u7", "u8", "i100", "i101", "null-key"],
            "x": [70, 80, 1000, 1010, 0],
        },
        schema=SCHEMA,
    )
    df = spark.createDataFrame(changes.to_pylist(), "p long, k long, v string, x long")
    out = table.upsert(df.repartition(3), on=["k"]).collect()[0]
    oracle = oracle.upsert(changes, on=["k"])
    assert (out["num_updated_rows"], out["num_inserted_rows"], out["num_deleted_rows"]) == (2, 3, 0)
    assert out["num_affected_rows"] == 5
    got = _same(table, oracle)
    assert [r["v"] for r in got.read().to_pylist() if r["k"] == 8] == ["u8"]

    # when_matched="delete", when_not_matched="ignore", from a pyarrow Table.
    gone = _rows(range(10, 16)).append_column("extra", pa.array([1] * 6))
    gone = gone.drop_columns(["extra"])
    out = table.upsert(gone, on="k", when_matched="delete", when_not_matched="ignore").collect()
    oracle = oracle.upsert(gone, on=["k"], when_matched="delete", when_not_matched="ignore")
    assert out[0]["num_deleted_rows"] == 6
    assert out[0]["num_inserted_rows"] == 0
    got = _same(table, oracle)

    # merge_schema: the source adds a nullable column, in the upsert's own commit.
    wider = spark.createDataFrame(
        [(1, 7, "w7", 7, 1.5), (2, 200, "w200", 2, None)],
        "p long, k long, v string, x long, w double",
    )
    with pytest.raises(SchemaMismatch, match="'w'"):
        table.upsert(wider, on=["k"])
    version = table.dataset().version
    out = table.upsert(wider, on=["k"], merge_schema=True).collect()[0]
    assert out["version"] == version + 1
    got = table.dataset()
    assert got.schema.field("w").type == pa.float64()
    by_key = {r["k"]: r for r in got.read().to_pylist()}
    assert by_key[7]["w"] == 1.5
    assert by_key[200]["v"] == "w200"
    assert by_key[9]["w"] is None
    assert rows(table.toDF().toArrow().select(["k", "w"])) == rows(got.read().select(["k", "w"]))
    assert_index_exact(got, "k")


def test_a_failing_task_commits_nothing(spark: Any, tmp_path: Path) -> None:
    """One file's task fails on every attempt (x * 1e18 overflows int64 only for its rows)
    after other tasks wrote their outputs: the job fails, the dataset stays at its version
    with its rows, and the outputs are only ever garbage (never referenced)."""
    table, _ = _pair(tmp_path, spark)
    ds = table.dataset()
    before = rows(ds.read())
    with pytest.raises(SparkTaskFailed, match="overflow") as info:
        table.update_where("k >= 0", set={"x": "x * 100000000000000000"})
    assert isinstance(info.value, ParquetryError)
    after = table.dataset()
    assert after.version == ds.version
    assert rows(after.read()) == before
    assert_index_exact(after, "k")
    # Outputs of finished tasks are in no version: garbage collection deletes them.
    after.vacuum(dt.timedelta(0), force=True)
    assert orphan_data_files(after.store, "t") == set()
    # The table still works afterwards.
    assert table.delete_where("k = 1").collect()[0]["num_affected_rows"] == 1
