"""Write modes of the ``parquetry`` data source and ``write_dataset`` on a real session:
replaceWhere, dynamic partition overwrite, error / ignore, NULL and empty partition values."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from parquetry.dataset import Dataset
from parquetry.errors import AlreadyExists, InvalidArgument
from parquetry.spark import read_dataset, write_dataset
from parquetry.store import open_store


@pytest.fixture
def lake(tmp_path: Path) -> str:
    return (tmp_path / "lake").as_uri()


def _rows(dataset: Any) -> Counter[tuple[Any, ...]]:
    table = dataset.read()
    names = sorted(table.column_names)
    return Counter(zip(*(table.column(n).to_pylist() for n in names), strict=True))


def _writer(df: Any, lake: str, uuid: str) -> Any:
    return df.write.format("parquetry").option("store", lake).option("dataset", uuid)


def test_replace_where_replaces_only_matching_rows_in_one_commit(spark: Any, lake: str) -> None:
    base = spark.range(0, 100).selectExpr("id", "cast(id % 4 as string) as part", "0 as gen")
    write_dataset(base, lake, "rw", partition_on=["part"], secondary_indices=["id"])
    # rows 50..99 of partitions 1 and 2: a partly matching file per partition
    new = spark.range(50, 60).selectExpr("id", "cast(1 + id % 2 as string) as part", "1 as gen")
    condition = "part IN ('1', '2') AND id >= 50"
    _writer(new, lake, "rw").option("replaceWhere", condition).mode("overwrite").save()
    ds = Dataset.open(open_store(lake), "rw")
    assert ds.version == 1
    assert ds.versions()[-1].operation == "overwrite"
    (latest,) = ds.history(limit=1)
    assert latest.parameters["replaceWhere"] == condition
    assert "part" in latest.parameters["predicate"]
    table = ds.read()
    assert table.num_rows == 100 - 25 + 10  # ids 50..99 of parts 1, 2 (25 rows) replaced
    got = Counter(zip(table["id"].to_pylist(), table["gen"].to_pylist(), strict=True))
    assert got == Counter(
        [(i, 0) for i in range(100) if not (i % 4 in (1, 2) and i >= 50)]
        + [(i, 1) for i in range(50, 60)]
    )
    assert ds.read(predicates=[[("id", "==", 53)]])["gen"].to_pylist() == [1]  # index follows
    # a row outside the condition: the job fails, nothing is committed, the message names it
    bad = spark.range(0, 3).selectExpr("id + 200 as id", "'3' as part", "2 as gen")
    with pytest.raises(Exception, match=r"does not conform.*part IN \('1', '2'\)") as err:
        _writer(bad, lake, "rw").option("replaceWhere", condition).mode("overwrite").save()
    assert "rows of Spark partition" in str(err.value)
    assert "'part': '3'" in str(err.value)
    again = Dataset.open(open_store(lake), "rw")
    assert again.version == 1
    assert _rows(again) == _rows(ds)
    # the helper takes the same condition; a date literal, BETWEEN and OR
    dated = spark.range(0, 10).selectExpr(
        "id", "date_add(date'2025-01-01', cast(id % 5 as int)) as day", "0 as gen"
    )
    write_dataset(dated, lake, "days", partition_on=["day"])
    fresh = spark.range(100, 102).selectExpr("id", "date'2025-01-02' as day", "1 as gen")
    out = write_dataset(
        fresh,
        lake,
        "days",
        mode="overwrite",
        replace_where="day BETWEEN '2025-01-02' AND date'2025-01-03' OR id = 100",
    )
    assert sorted(out.read()["id"].to_pylist()) == [0, 3, 4, 5, 8, 9, 100, 101]
    # refused before any task: a condition DNF cannot express, an unknown column, append
    for condition, match in [
        ("upper(part) = 'A'", "function upper"),
        ("NOT (part = '1')", "NOT"),
        ("nope = 1", "unknown column 'nope'"),
    ]:
        with pytest.raises(Exception, match=match):
            _writer(bad, lake, "rw").option("replaceWhere", condition).mode("overwrite").save()
    with pytest.raises(Exception, match=r"needs mode\('overwrite'\)"):
        _writer(bad, lake, "rw").option("replaceWhere", "part = '3'").mode("append").save()
    assert Dataset.open(open_store(lake), "rw").version == 1


def test_dynamic_partition_overwrite_replaces_only_written_partitions(
    spark: Any, lake: str
) -> None:
    base = spark.range(0, 40).selectExpr("id", "cast(id % 4 as string) as part", "0 as gen")
    write_dataset(base, lake, "dyn", partition_on=["part"])
    new = spark.range(0, 6).selectExpr(
        "id + 100 as id", "cast(id % 2 as string) as part", "1 as gen"
    )
    _writer(new, lake, "dyn").option("partitionOverwriteMode", "dynamic").mode("overwrite").save()
    ds = Dataset.open(open_store(lake), "dyn")
    per_part = Counter(
        zip(ds.read()["part"].to_pylist(), ds.read()["gen"].to_pylist(), strict=True)
    )
    assert per_part == Counter({("0", 1): 3, ("1", 1): 3, ("2", 0): 10, ("3", 0): 10})
    assert ds.version == 1
    # the session conf, read by the helper; an explicit argument wins over it
    spark.conf.set("spark.sql.sources.partitionOverwriteMode", "dynamic")
    try:
        more = spark.range(0, 2).selectExpr("id + 200 as id", "'2' as part", "2 as gen")
        out = write_dataset(more, lake, "dyn", mode="overwrite")
        assert sorted(out.read(predicates=[[("part", "==", "2")]])["id"].to_pylist()) == [200, 201]
        assert out.read().num_rows == 3 + 3 + 2 + 10
        empty = spark.range(0).selectExpr("id", "'9' as part", "3 as gen")
        assert write_dataset(empty, lake, "dyn", mode="overwrite").read().num_rows == 18
        static = write_dataset(
            more, lake, "dyn", mode="overwrite", partition_overwrite_mode="static"
        )
        assert static.read().num_rows == 2
    finally:
        spark.conf.unset("spark.sql.sources.partitionOverwriteMode")
    # static is the default: the whole dataset replaced
    assert write_dataset(new, lake, "dyn", mode="overwrite").read().num_rows == 6
    with pytest.raises(Exception, match="partitionOverwriteMode"):
        _writer(new, lake, "dyn").option("partitionOverwriteMode", "sometimes").mode(
            "overwrite"
        ).save()


def test_error_and_ignore_modes_of_write_dataset(spark: Any, lake: str) -> None:
    df = spark.range(0, 5).selectExpr("id", "cast(id % 2 as string) as part")
    created = write_dataset(df, lake, "em", partition_on=["part"], mode="error")
    assert created.read().num_rows == 5
    with pytest.raises(AlreadyExists, match="'em' already exists"):
        write_dataset(df, lake, "em", mode="errorifexists")
    ignored = write_dataset(
        spark.range(0, 50).selectExpr("id", "'x' as part"), lake, "em", mode="ignore"
    )
    assert ignored.version == 0
    assert ignored.read().num_rows == 5
    assert write_dataset(df, lake, "new", mode="ignore").read().num_rows == 5
    with pytest.raises(InvalidArgument, match="mode must be one of"):
        write_dataset(df, lake, "em", mode="upsert")
    # the option the helper uses, when the dataset appears between its check and the commit
    with pytest.raises(Exception, match="already exists"):
        _writer(df, lake, "em").option("save_mode", "error").mode("append").save()
    _writer(df, lake, "em").option("save_mode", "ignore").mode("append").save()
    ds = Dataset.open(open_store(lake), "em")
    assert ds.version == 0
    assert ds.read().num_rows == 5
    # the refused writes' files were deleted: every file on disk is referenced
    on_disk = {
        p.relative_to(Path(lake.removeprefix("file://"))).as_posix()
        for p in Path(lake.removeprefix("file://"), "em").rglob("*.parquet")
    }
    assert on_disk == {files["table"] for files in ds.document.partitions.values()}


def test_null_and_empty_partition_values_round_trip(spark: Any, lake: str) -> None:
    df = spark.range(0, 12).selectExpr(
        "id",
        "case id % 4 when 0 then null when 1 then '' else cast(id % 4 as string) end as part",
        "if(id % 3 = 0, null, cast(id % 3 as int)) as n",
    )
    write_dataset(df, lake, "nulls", partition_on=["part", "n"])
    back = spark.read.format("parquetry").option("store", lake).option("dataset", "nulls").load()
    assert back.count() == 12
    assert back.filter("part is null").count() == 3
    assert back.filter("part = ''").count() == 3
    assert back.filter("n is null").count() == 4
    assert back.filter("part is null and n is null").count() == 1
    assert sorted((r["id"], r["part"], r["n"]) for r in back.collect()) == sorted(
        (r["id"], r["part"], r["n"]) for r in df.collect()
    )
    native = read_dataset(spark, lake, "nulls", predicates=[[("part", "is null")]])
    assert sorted(r["id"] for r in native.collect()) == [0, 4, 8]
    empty = read_dataset(spark, lake, "nulls", predicates=[[("part", "==", "")]], native=False)
    assert sorted(r["id"] for r in empty.collect()) == [1, 5, 9]
    # replaceWhere on the null partition
    new = spark.range(0, 1).selectExpr("id + 100 as id", "cast(null as string) as part", "1 as n")
    _writer(new, lake, "nulls").option("replaceWhere", "part IS NULL").mode("overwrite").save()
    ds = Dataset.open(open_store(lake), "nulls")
    assert sorted(ds.read(predicates=[[("part", "is null")]])["id"].to_pylist()) == [100]
    assert ds.read().num_rows == 12 - 3 + 1


CONDITIONS = [
    "part = 'a'",
    "part == 'a' OR part <> 'b'",
    "part != ''",
    "part IS NULL",
    "part IS NOT NULL AND n > 1",
    "n IN (1, 3) OR part IN ('', 'b')",
    "n NOT IN (1, 3)",
    "n BETWEEN 1 AND 2",
    "n NOT BETWEEN 1 AND 2",
    "(part = 'a' OR n < 2) AND (x >= 1.5 OR `part` = 'b')",
    "d >= '2025-01-02' AND d < date'2025-01-04'",
    "x > 1e0 AND x <= 2.5",
    "flag = true OR n = -1",
    "part = 'it''s'",
]


def test_conditions_select_exactly_the_rows_spark_selects(spark: Any) -> None:
    """Oracle: Spark's own SQL evaluation of each condition (a NULL result is not a match)."""
    import pyarrow as pa

    from parquetry.dataset.predicates import validate_predicates
    from parquetry.dataset.replace import row_mask
    from parquetry.spark.condition import typed_condition

    df = spark.range(0, 24).selectExpr(
        "id",
        "case id % 6 when 0 then null when 1 then '' when 2 then 'a' when 3 then 'b' "
        "when 4 then 'it''s' else 'c' end as part",
        "if(id % 5 = 0, null, cast(id % 4 as int)) as n",
        "if(id % 7 = 0, null, id / 8) as x",
        "date_add(date'2025-01-01', cast(id % 5 as int)) as d",
        "id % 2 = 0 as flag",
    )
    exprs = [f"coalesce({c}, false) as c{i}" for i, c in enumerate(CONDITIONS)]
    spark_rows = df.selectExpr("id", *exprs).orderBy("id").toArrow()
    table = df.orderBy("id").toArrow()
    schema = pa.schema([pa.field(f.name, f.type) for f in table.schema])
    for i, condition in enumerate(CONDITIONS):
        dnf = validate_predicates(typed_condition(condition, schema), schema)
        assert dnf is not None
        got = row_mask(table, dnf).to_pylist()
        assert got == spark_rows.column(f"c{i}").to_pylist(), condition


def test_condition_parser_refusals() -> None:
    from parquetry.spark.condition import MAX_CONJUNCTIONS, parse_condition

    assert parse_condition("a = 1 AND (b = 2 OR c IS NULL)") == [
        [("a", "==", 1), ("b", "==", 2)],
        [("a", "==", 1), ("c", "is null", None)],
    ]
    for text, match in [
        ("", "empty"),
        ("a = NULL", "IS NULL"),
        ("a <=> 1", "<=>"),
        ("a = b + 1", "expected a literal|unexpected"),
        ("a = 1 AND", "expected a column"),
        ("a IN (1, NULL)", "NULL"),
        ("f(a) = 1", "function f"),
        ("a = 1)", "unexpected"),
    ]:
        with pytest.raises(InvalidArgument, match=match):
            parse_condition(text)
    deep = " AND ".join(f"(a = {i} OR b = {i})" for i in range(9))  # 2**9 conjunctions
    with pytest.raises(InvalidArgument, match=str(MAX_CONJUNCTIONS)):
        parse_condition(deep)
