"""Interop both ways: files written with default options read by Spark 4, DuckDB, Polars and
pandas, and files written by those engines decoded by the codec (by column name)."""

from __future__ import annotations

import datetime as dt
import decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from parquetry.codec import ParquetCodec, ParquetField, ParquetSchema, ParquetType
from parquetry.parquet.files import read_table, write_table_bytes

UTC = dt.UTC
T0 = dt.datetime(2024, 3, 1, 12, 30, 15, 123456, tzinfo=UTC)
EPOCH = dt.datetime(1970, 1, 1, tzinfo=UTC)

DEFAULTS_TABLE = pa.table(
    {
        "id": pa.array([1, 2, 3], pa.int64()),
        "name": ["alice", None, "carol"],
        "price": pa.array(
            [decimal.Decimal("12.34"), None, decimal.Decimal("-0.01")], pa.decimal128(10, 2)
        ),
        "day": pa.array([dt.date(2024, 1, 1), dt.date(1999, 12, 31), None]),
        "ts": pa.array([T0, None, EPOCH], pa.timestamp("us", tz="UTC")),
        "tags": pa.array([["a", "b"], [], None], pa.list_(pa.string())),
        "addr": pa.array(
            [{"city": "Oslo", "zip": 150}, None, {"city": None, "zip": 7}],
            pa.struct([("city", pa.string()), ("zip", pa.int32())]),
        ),
        "score": [0.5, None, float("inf")],
    }
)
EXPECTED_ROWS = [
    (
        1,
        "alice",
        "12.34",
        "2024-01-01",
        (T0 - EPOCH) // dt.timedelta(microseconds=1),
        ["a", "b"],
        ("Oslo", 150),
        0.5,
    ),
    (2, None, None, "1999-12-31", None, [], None, None),
    (3, "carol", "-0.01", None, 0, None, (None, 7), float("inf")),
]

CODEC_SCHEMA = ParquetSchema(
    [
        ParquetField("id", ParquetType.INT64),
        ParquetField("name", ParquetType.STRING, nullable=True),
        ParquetField("price", ParquetType.DECIMAL(10, 2), nullable=True),
        ParquetField("day", ParquetType.DATE, nullable=True),
        ParquetField("ts", ParquetType.TIMESTAMP, nullable=True),
        ParquetField("score", ParquetType.FLOAT64, nullable=True),
    ]
)
CODEC_RECORDS = [
    {
        "id": 1,
        "name": "alice",
        "price": "12.34",
        "day": dt.date(2024, 1, 1),
        "ts": T0,
        "score": 0.5,
    },
    {"id": 2, "name": None, "price": None, "day": dt.date(1999, 12, 31), "ts": None, "score": None},
    {
        "id": 3,
        "name": "carol",
        "price": decimal.Decimal("-0.01"),
        "day": None,
        "ts": EPOCH,
        "score": float("inf"),
    },
]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("interop")
    defaults = root / "defaults.parquet"
    defaults.write_bytes(write_table_bytes(DEFAULTS_TABLE))
    codec = root / "codec.parquet"
    codec.write_bytes(ParquetCodec(CODEC_SCHEMA).encode_bytes(CODEC_RECORDS))
    return {"defaults": defaults, "codec": codec}


def _normalise(row: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(
        None if v is None else str(v) if isinstance(v, decimal.Decimal | dt.date) else v
        for v in row
    )


# --- our files, read by the engines --------------------------------------------------------------

ROW_SQL = (
    "SELECT id, name, price, day, {micros}(ts) AS ts, tags, addr, score FROM {source} ORDER BY id"
)


def test_duckdb_reads_default_files(files: dict[str, Path]) -> None:
    duckdb = pytest.importorskip("duckdb")
    con = duckdb.connect()
    rows = con.sql(
        ROW_SQL.format(micros="epoch_us", source=f"read_parquet('{files['defaults']}')")
    ).fetchall()
    rows = [(*r[:6], None if r[6] is None else (r[6]["city"], r[6]["zip"]), r[7]) for r in rows]
    assert [_normalise(r) for r in rows] == EXPECTED_ROWS
    codec_rows = con.sql(
        f"SELECT id, epoch_us(ts), price FROM read_parquet('{files['codec']}') ORDER BY id"
    ).fetchall()
    assert codec_rows[0] == (1, EXPECTED_ROWS[0][4], decimal.Decimal("12.34"))


def test_polars_reads_default_files(files: dict[str, Path]) -> None:
    pl = pytest.importorskip("polars")
    frame = pl.read_parquet(files["defaults"])
    assert frame["ts"].dtype == pl.Datetime("us", "UTC")
    back = pa.table(frame.to_arrow())
    assert back.column("id").to_pylist() == [1, 2, 3]
    assert back.column("tags").to_pylist() == [["a", "b"], [], None]
    assert back.column("addr").to_pylist()[2] == {"city": None, "zip": 7}
    assert back.column("price").to_pylist()[0] == decimal.Decimal("12.34")
    assert back.column("ts").to_pylist()[0] == T0
    codec = pl.read_parquet(files["codec"])
    assert codec["day"].to_list() == [dt.date(2024, 1, 1), dt.date(1999, 12, 31), None]


def test_pandas_reads_default_files(files: dict[str, Path]) -> None:
    pd = pytest.importorskip("pandas")
    frame = pd.read_parquet(files["defaults"])
    assert list(frame["id"]) == [1, 2, 3]
    assert frame["ts"].iloc[0] == pd.Timestamp(T0)
    assert frame["price"].iloc[0] == decimal.Decimal("12.34")
    assert list(frame["tags"].iloc[0]) == ["a", "b"]
    codec = pd.read_parquet(files["codec"])
    assert codec["name"].iloc[2] == "carol"
    assert str(codec["ts"].dtype).startswith("datetime64[us")


@pytest.mark.spark
def test_spark_reads_default_files(files: dict[str, Path], parquet_spark: Any) -> None:
    frame = parquet_spark.read.parquet(str(files["defaults"]))
    frame.createOrReplaceTempView("defaults_view")
    rows = parquet_spark.sql(ROW_SQL.format(micros="unix_micros", source="defaults_view")).collect()
    got = [
        (
            r.id,
            r.name,
            r.price,
            r.day,
            r.ts,
            r.tags,
            None if r.addr is None else (r.addr.city, r.addr.zip),
            r.score,
        )
        for r in rows
    ]
    assert [_normalise(r) for r in got] == EXPECTED_ROWS
    types = dict(frame.dtypes)
    assert types["ts"] == "timestamp"
    assert types["price"] == "decimal(10,2)"
    codec = parquet_spark.read.parquet(str(files["codec"]))
    assert codec.selectExpr("sum(unix_micros(ts))").collect()[0][0] == EXPECTED_ROWS[0][4]


# --- engines' files, decoded by the codec --------------------------------------------------------


def _decode(path: Path) -> list[dict[str, Any]]:
    with path.open("rb") as file:
        rows = ParquetCodec(CODEC_SCHEMA).decode(file)
    return sorted(rows, key=lambda r: r["id"])


def _expected() -> list[dict[str, Any]]:
    return [
        {
            **r,
            "price": None
            if r["price"] is None
            else decimal.Decimal(str(r["price"])).quantize(decimal.Decimal("0.01")),
        }
        for r in CODEC_RECORDS
    ]


def test_codec_decodes_duckdb_files(files: dict[str, Path], tmp_path: Path) -> None:
    duckdb = pytest.importorskip("duckdb")
    out = tmp_path / "duck.parquet"
    duckdb.sql(f"COPY (SELECT * FROM read_parquet('{files['codec']}')) TO '{out}' (FORMAT parquet)")
    assert _decode(out) == _expected()


def test_codec_decodes_polars_files(files: dict[str, Path], tmp_path: Path) -> None:
    pl = pytest.importorskip("polars")
    out = tmp_path / "polars.parquet"
    frame = pl.read_parquet(files["codec"]).select(["score", "ts", "day", "price", "name", "id"])
    frame.write_parquet(out)  # large_string, other column order
    assert _decode(out) == _expected()


def test_codec_decodes_pandas_files(files: dict[str, Path], tmp_path: Path) -> None:
    pytest.importorskip("pandas")
    out = tmp_path / "pandas.parquet"
    frame = pq.read_table(files["codec"]).to_pandas()
    frame.index = [10, 11, 12]  # an index column the codec must ignore
    frame.to_parquet(out)
    assert "__index_level_0__" in pq.read_schema(out).names
    assert _decode(out) == _expected()


@pytest.mark.spark
def test_codec_decodes_spark_files(
    files: dict[str, Path], tmp_path: Path, parquet_spark: Any
) -> None:
    out = tmp_path / "spark-out"
    # Spark's defaults: INT96 timestamps, INT64 decimal(10,2), parquet-mr writer.
    parquet_spark.read.parquet(str(files["codec"])).coalesce(1).write.parquet(str(out))
    [part] = sorted(out.glob("part-*.parquet"))
    assert "parquet-mr" in pq.read_metadata(part).created_by
    assert _decode(part) == _expected()


def test_default_files_read_back_exactly() -> None:
    assert read_table(write_table_bytes(DEFAULTS_TABLE)).equals(DEFAULTS_TABLE)
