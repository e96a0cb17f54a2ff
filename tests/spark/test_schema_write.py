"""Schema on write through the Spark data source: enforce, evolve, never drop data."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from parquetry.dataset import Dataset
from parquetry.dataset.naming import common_metadata_key
from parquetry.dataset.schema import read_common_metadata
from parquetry.spark import write_dataset
from parquetry.store import open_store


def _save(df: Any, lake: str, mode: str = "append", **options: str) -> None:
    writer = df.write.format("parquetry").option("store", lake).option("dataset", "t")
    writer.options(**options).mode(mode).save()


def _load(spark: Any, lake: str) -> Any:
    return spark.read.format("parquetry").option("store", lake).option("dataset", "t").load()


def _version(lake: str) -> int:
    return Dataset.open(open_store(lake), "t").version


def test_mismatches_are_refused_before_any_task_and_nothing_commits(
    spark: Any, tmp_path: Path
) -> None:
    lake = tmp_path.as_uri()
    base = spark.range(0, 6).selectExpr(
        "id", "cast(id as int) as n", "cast(id as double) * 0.5 as v", "cast(id % 2 as string) as p"
    )
    _save(base, lake, partition_on="p")
    ds = Dataset.open(open_store(lake), "t")
    assert not ds.schema.field("id").nullable  # spark.range: NOT NULL
    tasks_before = spark.sparkContext.statusTracker().getJobIdsForGroup()

    wrong = base.selectExpr("id", "n", "cast(v as string) as v", "p", "true as extra")
    with pytest.raises(Exception) as info:  # noqa: PT011 - Spark wraps the error
        _save(wrong, lake)
    text = str(info.value)
    assert "A schema mismatch detected when writing to dataset 't'" in text
    assert "column 'v': dataset has double, data has string" in text
    assert "column 'extra' is not in the dataset (data has bool)" in text
    assert "mergeSchema=true" in text
    # Refused when the writer was created on the driver: no Spark job ran.
    assert spark.sparkContext.statusTracker().getJobIdsForGroup() == tasks_before

    # 'abc' into the double column is a string column: refused by type, even with merge.
    abc = base.selectExpr("id", "n", "'abc' as v", "p")
    with pytest.raises(Exception, match="column 'v': dataset has double, data has string"):
        _save(abc, lake, mergeSchema="true")
    # An overwrite with another schema is a mismatch too (no overwriteSchema).
    with pytest.raises(Exception, match="A schema mismatch detected"):
        _save(wrong, lake, mode="overwrite")
    with pytest.raises(Exception, match="overwriteSchema=true needs mode"):
        _save(wrong, lake, overwriteSchema="true")
    with pytest.raises(Exception, match="must be true or false"):
        _save(base, lake, mergeSchema="yes")

    # Values that cannot be stored fail in the tasks; the job commits nothing.
    big = spark.createDataFrame(
        [(10, 2**40, 1.0, "0")], "id long not null, n long, v double, p string"
    )
    with pytest.raises(Exception, match=r"column 'n'.*1099511627776"):
        _save(big, lake)
    nulls = spark.createDataFrame([(None, 1, 1.0, "0")], "id long, n int, v double, p string")
    with pytest.raises(Exception, match="column 'id' is NOT NULL but row 0 is null"):
        _save(nulls, lake)
    assert _version(lake) == 0
    assert _load(spark, lake).count() == 6

    # An in-range long into the int column is checked and stored as int.
    fits = spark.createDataFrame(
        [(11, 7, 1.0, "1")], "id long not null, n long, v double, p string"
    )
    _save(fits, lake)
    assert _version(lake) == 1
    back = _load(spark, lake)
    assert dict(back.dtypes)["n"] == "int"
    assert sorted(r.n for r in back.collect()) == [0, 1, 2, 3, 4, 5, 7]


def test_merge_schema_adds_columns_and_fields_and_widens(spark: Any, tmp_path: Path) -> None:
    lake = tmp_path.as_uri()
    base = spark.range(0, 4).selectExpr(
        "id",
        "cast(id as int) as n",
        "named_struct('a', cast(id as int)) as s",
        "cast(id % 2 as string) as p",
    )
    _save(base, lake, partition_on="p")
    more = spark.range(4, 6).selectExpr(
        "id",
        "id * 10000000000 as n",
        "named_struct('a', cast(id as int), 'b', concat('b', id)) as s",
        "cast(id % 2 as string) as p",
        "concat('x', id) as tag",
    )
    with pytest.raises(Exception, match="column 'tag' is not in the dataset"):
        _save(more, lake)
    assert _version(lake) == 0
    _save(more, lake, mergeSchema="true")
    ds = Dataset.open(open_store(lake), "t")
    assert ds.version == 1
    assert ds.schema.field("n").type == pa.int64()
    assert ds.schema.field("tag").nullable
    assert ds.schema.field("s").type == pa.struct([("a", pa.int32()), ("b", pa.string())])
    key = common_metadata_key("t")
    kartothek_schema = read_common_metadata(ds.store.get(key), key)
    assert {"tag", "s"} <= set(kartothek_schema.names)

    df = _load(spark, lake)
    assert dict(df.dtypes)["n"] == "bigint"
    rows = {r.id: (r.n, r.s.a, r.s.b, r.tag) for r in df.collect()}
    assert rows == {
        0: (0, 0, None, None),
        1: (1, 1, None, None),
        2: (2, 2, None, None),
        3: (3, 3, None, None),
        4: (40000000000, 4, "b4", "x4"),
        5: (50000000000, 5, "b5", "x5"),
    }
    # Filters on the added column: old files hold nulls.
    assert df.filter("tag = 'x5'").count() == 1
    assert df.filter("tag is null").count() == 4
    # The helper takes the same keyword; a DataFrame lacking the nullable 'tag' merges too.
    again = write_dataset(base, lake, "t", merge_schema=True)
    assert again.version == 2
    assert _load(spark, lake).filter("tag is null").count() == 8


def test_overwrite_schema_replaces_schema_and_layout(spark: Any, tmp_path: Path) -> None:
    lake = tmp_path.as_uri()
    _save(spark.range(0, 5).selectExpr("id", "cast(id % 2 as string) as p"), lake, partition_on="p")
    new = spark.range(0, 3).selectExpr("cast(id as string) as name", "id * 1.5 as score", "id as k")
    with pytest.raises(Exception, match="column 'id' is missing from the data"):
        _save(new, lake, mode="overwrite")
    assert _version(lake) == 0
    _save(new, lake, mode="overwrite", overwriteSchema="true", partition_on="k")
    ds = Dataset.open(open_store(lake), "t")
    assert ds.version == 1
    assert ds.partition_keys == ("k",)
    assert sorted(ds.schema.names) == ["k", "name", "score"]
    rows = sorted((r.name, r.score, r.k) for r in _load(spark, lake).collect())
    assert rows == [("0", 0.0, 0), ("1", 1.5, 1), ("2", 3.0, 2)]
    assert Dataset.open(open_store(lake), "t", version=0).read().num_rows == 5
    key = common_metadata_key("t")
    assert read_common_metadata(ds.store.get(key), key).names == ["k", "name", "score"]
