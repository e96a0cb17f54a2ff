"""Round trips, decoding other writers' files by name, decode errors and file stats."""

from __future__ import annotations

import datetime as dt
import decimal
import io
import json
import math
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parquetry.codec import (
    ColumnStats,
    FileStats,
    InvalidFormat,
    ParquetCodec,
    ParquetCompression,
    ParquetField,
    ParquetSchema,
    ParquetType,
    SchemaViolation,
)
from parquetry.parquet.files import write_table_bytes
from parquetry.parquet.options import WriteOptions

UTC = dt.UTC
# Files kartothek's test suite wrote with each pyarrow release (vendored, MIT, see its README).
KARTOTHEK = Path(__file__).resolve().parents[1] / "data/kartothek-arrow-compat"

ALL = ParquetSchema(
    [
        ParquetField("i32", ParquetType.INT32),
        ParquetField("i64", ParquetType.INT64),
        ParquetField("f32", ParquetType.FLOAT32, nullable=True),
        ParquetField("f64", ParquetType.FLOAT64, nullable=True),
        ParquetField("s", ParquetType.STRING, nullable=True),
        ParquetField("b", ParquetType.BOOL, nullable=True),
        ParquetField("by", ParquetType.BYTES, nullable=True),
        ParquetField("ts", ParquetType.TIMESTAMP, nullable=True),
        ParquetField("d", ParquetType.DATE, nullable=True),
        ParquetField("dec", ParquetType.DECIMAL(18, 4), nullable=True),
    ]
)

timestamps = st.datetimes(
    min_value=dt.datetime(1, 1, 2), max_value=dt.datetime(9999, 12, 30), timezones=st.just(UTC)
)
records = st.fixed_dictionaries(
    {
        "i32": st.integers(-(2**31), 2**31 - 1),
        "i64": st.integers(-(2**63), 2**63 - 1) | st.integers(-(2**53), 2**53).map(float),
        "f32": st.none() | st.floats(width=32, allow_nan=False),
        "f64": st.none() | st.floats(allow_nan=False),
        "s": st.none() | st.text(),
        "b": st.none() | st.booleans(),
        "by": st.none() | st.binary(),
        "ts": st.none() | timestamps | timestamps.map(lambda t: t.isoformat()),
        "d": st.none() | st.dates(),
        "dec": st.none()
        | st.decimals(min_value=-(10**13), max_value=10**13, places=4, allow_nan=False),
    }
)


def normalise(record: dict[str, Any]) -> dict[str, Any]:
    out = dict(record)
    out["i64"] = int(out["i64"])
    if isinstance(out["ts"], str):
        out["ts"] = dt.datetime.fromisoformat(out["ts"])
    if isinstance(out["dec"], decimal.Decimal):
        out["dec"] = out["dec"].quantize(decimal.Decimal("0.0001"))
    return out


@settings(max_examples=60, deadline=None)
@given(st.lists(records, max_size=30))
def test_records_round_trip_to_their_normalised_form(rows: list[dict[str, Any]]) -> None:
    codec = ParquetCodec(ALL)
    decoded = codec.decode(codec.encode_bytes(rows))
    assert decoded == [normalise(r) for r in rows]
    assert all(r["ts"] is None or r["ts"].tzinfo is UTC for r in decoded)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.integers(-(2**63), 2**63 - 1) | st.none(), max_size=50),
    st.sampled_from([None, 1, 4]),
)
def test_file_stats_match_a_brute_force_oracle(
    values: list[int | None], row_group_size: int | None
) -> None:
    # Small row groups: the statistics of several groups (some all-null) are merged.
    codec = ParquetCodec(
        ParquetSchema([ParquetField("x", ParquetType.INT64, nullable=True)]),
        options=WriteOptions(row_group_size=row_group_size),
    )
    data = codec.encode_bytes([{"x": v} for v in values])
    groups = pq.ParquetFile(pa.BufferReader(data)).metadata.num_row_groups
    assert groups == math.ceil(len(values) / (row_group_size or max(len(values), 1)))
    stats = codec.file_stats()
    assert stats is not None
    present = [v for v in values if v is not None]
    column = stats.column("x")
    assert (column.min, column.max) == (min(present, default=None), max(present, default=None))
    assert column.null_count == len(values) - len(present)
    assert FileStats.from_json(json.loads(json.dumps(stats.to_json()))) == stats


@pytest.mark.parametrize("compression", list(ParquetCompression))
def test_every_compression_round_trips(compression: ParquetCompression) -> None:
    codec = ParquetCodec(ALL, compression=compression)
    rows = [{"i32": i, "i64": i * 10, "s": f"v{i % 3}"} for i in range(100)]
    data = codec.encode_bytes(rows)
    codecs = {c.compression for c in _chunks(data)}
    expected = {"NONE": "UNCOMPRESSED", "LZ4": "LZ4"}.get(compression.name, compression.name)
    assert codecs == {expected}
    assert [r["i64"] for r in codec.decode(data)] == [i * 10 for i in range(100)]


def _chunks(data: bytes) -> list[Any]:
    md = pq.ParquetFile(io.BytesIO(data)).metadata
    return [
        md.row_group(g).column(c) for g in range(md.num_row_groups) for c in range(md.num_columns)
    ]


def test_timestamps_are_written_as_utc_micros() -> None:
    codec = ParquetCodec(ALL)
    data = codec.encode_bytes([{"i32": 1, "i64": 1, "ts": "2024-01-01T00:00:00Z"}])
    column = pq.ParquetFile(io.BytesIO(data)).schema.column(7)
    assert column.physical_type == "INT64"
    assert "isAdjustedToUTC=true" in str(column.logical_type)
    assert "timeUnit=microseconds" in str(column.logical_type)


def test_empty_records_make_a_valid_zero_row_file() -> None:
    codec = ParquetCodec(ParquetSchema([ParquetField("id", ParquetType.INT64)]))
    data = codec.encode_bytes([])
    assert data.startswith(b"PAR1")
    assert data.endswith(b"PAR1")
    assert codec.decode(data) == []
    stats = codec.file_stats()
    assert stats == FileStats(
        row_count=0, columns=(ColumnStats(name="id", type=ParquetType.INT64),)
    )


def test_large_batch_keeps_order() -> None:
    schema = ParquetSchema(
        [ParquetField("id", ParquetType.INT64), ParquetField("value", ParquetType.STRING)]
    )
    codec = ParquetCodec(schema)
    rows = [{"id": i, "value": "test value with some content"} for i in range(10_000)]
    decoded = codec.decode(codec.encode_bytes(rows))
    assert len(decoded) == 10_000
    assert decoded[0]["id"] == 0
    assert decoded[-1]["id"] == 9999


# --- decode by name, other writers ----------------------------------------------------------------


def test_decode_maps_columns_by_name_not_position() -> None:
    table = pa.table(
        {
            "zzz_extra": ["ignored", "ignored"],
            "name": ["alice", "bob"],
            "id": pa.array([7, 8], pa.int32()),  # a narrower int: cast to INT64
            "ts": pa.array([0, 1_000], pa.timestamp("ns")),  # naive ns: read as UTC
        }
    )
    sink = io.BytesIO()
    pq.write_table(table, sink)
    schema = ParquetSchema(
        [
            ParquetField("id", ParquetType.INT64),
            ParquetField("name", ParquetType.STRING),
            ParquetField("ts", ParquetType.TIMESTAMP),
            ParquetField("absent", ParquetType.BOOL, nullable=True),
        ]
    )
    decoded = ParquetCodec(schema).decode(sink.getvalue())
    assert decoded == [
        {"id": 7, "name": "alice", "ts": dt.datetime(1970, 1, 1, tzinfo=UTC), "absent": None},
        {
            "id": 8,
            "name": "bob",
            "ts": dt.datetime(1970, 1, 1, 0, 0, 0, 1, tzinfo=UTC),
            "absent": None,
        },
    ]


def test_decode_rejects_files_lacking_required_columns_or_lossy_casts() -> None:
    sink = io.BytesIO()
    pq.write_table(pa.table({"a": [1]}), sink)
    with pytest.raises(SchemaViolation, match="no column 'b'") as info:
        ParquetCodec(ParquetSchema([ParquetField("b", ParquetType.INT64)])).decode(sink.getvalue())
    assert info.value.field == "b"
    sink = io.BytesIO()
    pq.write_table(pa.table({"a": [2**40]}), sink)
    with pytest.raises(SchemaViolation, match="cannot be read as int32"):
        ParquetCodec(ParquetSchema([ParquetField("a", ParquetType.INT32)])).decode(sink.getvalue())


@pytest.mark.parametrize("path", sorted(KARTOTHEK.glob("*.parquet")), ids=lambda p: p.stem)
def test_decodes_kartothek_reference_files(path: Path) -> None:
    schema = ParquetSchema(
        [
            ParquetField("int64", ParquetType.INT64),
            ParquetField("int8", ParquetType.INT32),
            ParquetField("uint32", ParquetType.INT64),
            ParquetField("float32", ParquetType.FLOAT32),
            ParquetField("unicode", ParquetType.STRING),
            ParquetField("bool", ParquetType.BOOL),
            ParquetField("byte", ParquetType.BYTES),
            ParquetField("date", ParquetType.DATE),
            ParquetField("datetime64", ParquetType.TIMESTAMP),
            ParquetField("null", ParquetType.STRING, nullable=True),
        ]
    )
    with path.open("rb") as file:
        [row] = ParquetCodec(schema).decode(file)
    assert row["int64"] == row["int8"] == row["uint32"] == 1
    assert row["unicode"] == "Ö"
    assert row["bool"] is True
    assert row["null"] is None
    assert row["date"] == dt.date(2018, 1, 1)
    assert row["datetime64"] == dt.datetime(2018, 1, 1, tzinfo=UTC)
    assert isinstance(row["byte"], bytes)
    assert len(row["byte"]) == 16


# --- decode errors -------------------------------------------------------------------------------


def _valid_file() -> bytes:
    codec = ParquetCodec(ParquetSchema([ParquetField("id", ParquetType.INT64)]))
    return codec.encode_bytes([{"id": i} for i in range(100)])


def _corrupt_footer(data: bytes) -> bytes:
    length = int.from_bytes(data[-8:-4], "little")
    start = len(data) - 8 - length
    garbage = bytes((b ^ 0x5A) for b in data[start : start + length])
    return data[:start] + garbage + data[-8:]


@pytest.mark.parametrize(
    "make",
    [
        lambda d: b"",
        lambda d: b"not parquet data at all",
        lambda d: b"PAR",
        lambda d: d[: len(d) // 2],
        lambda d: d[:-1],
        lambda d: d[:4] + d[-12:],
        _corrupt_footer,
        lambda d: d[:-8] + (10**6).to_bytes(4, "little") + b"PAR1",
        lambda d: d[:4] + b"\x00" * (len(d) - 12) + d[-8:],  # data zeroed, footer intact
    ],
    ids=["empty", "text", "PAR", "half", "minus-1", "no-data", "footer", "length", "zeroed"],
)
def test_bad_input_raises_invalid_format(make: Any) -> None:
    codec = ParquetCodec(ParquetSchema([ParquetField("id", ParquetType.INT64)]))
    bad = make(_valid_file())
    with pytest.raises(InvalidFormat):
        codec.decode(bad)
    with pytest.raises(InvalidFormat):
        codec.decode(io.BytesIO(bad))


# --- stats (Lode tests 28-34) ---------------------------------------------------------------------


def test_file_stats_basic_nullable_bool_bytes_and_timestamps() -> None:
    schema = ParquetSchema(
        [
            ParquetField("id", ParquetType.INT64),
            ParquetField("name", ParquetType.STRING, nullable=True),
            ParquetField("score", ParquetType.FLOAT64),
            ParquetField("flag", ParquetType.BOOL),
            ParquetField("data", ParquetType.BYTES),
            ParquetField("at", ParquetType.TIMESTAMP),
            ParquetField("none", ParquetType.INT64, nullable=True),
        ]
    )
    codec = ParquetCodec(schema)
    assert codec.file_stats() is None
    codec.encode_bytes(
        [
            {
                "id": 10,
                "name": "alice",
                "score": 95.5,
                "flag": True,
                "data": b"hello",
                "at": "2024-06-15T12:00:00Z",
            },
            {
                "id": 1,
                "name": None,
                "score": math.nan,
                "flag": False,
                "data": b"world",
                "at": "2024-01-01T00:00:00Z",
            },
            {
                "id": 5,
                "name": "gamma",
                "score": 87.3,
                "flag": True,
                "data": b"x",
                "at": "2024-03-10T08:00:00+00:00",
            },
        ]
    )
    stats = codec.file_stats()
    assert stats is not None
    assert stats.row_count == 3
    assert [c.name for c in stats.columns] == list(schema.names)
    assert (stats.column("id").min, stats.column("id").max) == (1, 10)
    name = stats.column("name")
    assert (name.min, name.max, name.null_count) == ("alice", "gamma", 1)
    assert (stats.column("score").min, stats.column("score").max) == (87.3, 95.5)  # NaN skipped
    for no_min_max in ("flag", "data"):
        assert (stats.column(no_min_max).min, stats.column(no_min_max).max) == (None, None)
    at = stats.column("at")
    assert at.min == dt.datetime(2024, 1, 1, tzinfo=UTC)
    assert at.max == dt.datetime(2024, 6, 15, 12, tzinfo=UTC)
    assert stats.column("none") == ColumnStats(name="none", type=ParquetType.INT64, null_count=3)
    doc = json.loads(json.dumps(stats.to_json()))
    assert doc["columns"][5]["min"] == "2024-01-01T00:00:00.000000Z"
    assert FileStats.from_json(doc) == stats


def test_int96_timestamps_outside_the_nanosecond_range_decode() -> None:
    # Spark writes INT96 by default; as nanoseconds these would overflow before 1677/after 2262.
    stamps = [dt.datetime(3000, 1, 1), dt.datetime(1500, 6, 1, 0, 0, 0, 5)]
    sink = io.BytesIO()
    table = pa.table({"ts": pa.array(stamps, pa.timestamp("us"))})
    pq.write_table(table, sink, use_deprecated_int96_timestamps=True)
    assert pq.ParquetFile(io.BytesIO(sink.getvalue())).schema.column(0).physical_type == "INT96"
    codec = ParquetCodec(ParquetSchema([ParquetField("ts", ParquetType.TIMESTAMP)]))
    assert [r["ts"] for r in codec.decode(sink.getvalue())] == [
        s.replace(tzinfo=UTC) for s in stamps
    ]


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.floats(allow_nan=True, allow_infinity=True) | st.none(), max_size=30),
    st.sampled_from([None, 1, 3]),
)
def test_float_stats_skip_nan_across_row_groups(
    values: list[float | None], row_group_size: int | None
) -> None:
    codec = ParquetCodec(
        ParquetSchema([ParquetField("x", ParquetType.FLOAT64, nullable=True)]),
        options=WriteOptions(row_group_size=row_group_size),
    )
    codec.encode_bytes([{"x": v} for v in values])
    stats = codec.file_stats()
    assert stats is not None
    ordered = [v for v in values if v is not None and not math.isnan(v)]
    column = stats.column("x")
    assert (column.min, column.max) == (min(ordered, default=None), max(ordered, default=None))
    assert column.null_count == sum(v is None for v in values)


_MIN_US = -62135596800000000  # 0001-01-01T00:00:00Z
_MAX_US = 253402300799999999  # 9999-12-31T23:59:59.999999Z


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.none(),
            st.integers(_MIN_US - 10**12, _MAX_US + 10**12),
            st.sampled_from([_MIN_US, _MAX_US, _MIN_US - 1, _MAX_US + 1, 2**63 - 1, -(2**63)]),
        ),
        min_size=1,
        max_size=20,
    )
)
def test_timestamps_decode_exactly_or_name_the_first_row_out_of_range(
    micros: list[int | None],
) -> None:
    """Oracle: epoch + timedelta for years 1-9999, else SchemaViolation at the first bad row."""
    epoch = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    data = write_table_bytes(pa.table({"t": pa.array(micros, pa.timestamp("us", "UTC"))}))
    codec = ParquetCodec(ParquetSchema([ParquetField("t", ParquetType.TIMESTAMP, nullable=True)]))
    bad = [i for i, m in enumerate(micros) if m is not None and not _MIN_US <= m <= _MAX_US]
    if bad:
        with pytest.raises(SchemaViolation) as info:
            codec.decode(data)
        assert (info.value.field, info.value.index) == ("t", bad[0])
        return
    expected = [None if m is None else epoch + dt.timedelta(microseconds=m) for m in micros]
    assert [r["t"] for r in codec.decode(data)] == expected
