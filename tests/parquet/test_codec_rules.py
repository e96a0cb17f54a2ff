"""Every record rule of seed 002 and the Python traps, with the exact boundary values."""

from __future__ import annotations

import datetime as dt
import decimal
import math
from collections import OrderedDict
from typing import Any

import numpy as np
import pytest

from parquetry.codec import ParquetCodec, ParquetField, ParquetSchema, ParquetType, SchemaViolation

UTC = dt.UTC


def codec_for(ptype: ParquetType, nullable: bool = False) -> ParquetCodec:
    return ParquetCodec(ParquetSchema([ParquetField("v", ptype, nullable=nullable)]))


def round_trip(ptype: ParquetType, value: Any) -> Any:
    codec = codec_for(ptype)
    return codec.decode(codec.encode_bytes([{"v": value}]))[0]["v"]


def rejects(ptype: ParquetType, value: Any, match: str | None = None) -> SchemaViolation:
    codec = codec_for(ptype)
    # The bad value sits at index 2, after two good ones, to check the reported index.
    good = {"v": None}
    records = [good, good, {"v": value}]
    codec = codec_for(ptype, nullable=True)
    with pytest.raises(SchemaViolation, match=match) as info:
        codec.encode_bytes(records)
    assert info.value.index == 2
    assert info.value.field == "v"
    assert codec.file_stats() is None
    return info.value


# --- integers ------------------------------------------------------------------------------


@pytest.mark.parametrize("value", [2147483647, -2147483648, 2147483647.0, -2147483648.0, 0, -0.0])
def test_int32_accepts_its_exact_range(value: Any) -> None:
    result = round_trip(ParquetType.INT32, value)
    assert result == int(value)
    assert type(result) is int


@pytest.mark.parametrize("value", [2147483648, -2147483649, 2147483648.0, -2147483649.0, 3e9, -3e9])
def test_int32_rejects_one_past_the_range(value: Any) -> None:
    rejects(ParquetType.INT32, value, "int32 range")


@pytest.mark.parametrize("value", [2**53, -(2**53), 2.0**53, -(2.0**53), 9999999999.0])
def test_int64_accepts_floats_up_to_2_pow_53(value: Any) -> None:
    assert round_trip(ParquetType.INT64, value) == int(value)


@pytest.mark.parametrize("value", [2.0**53 + 2, -(2.0**53) - 2, 1e18])
def test_int64_rejects_floats_beyond_2_pow_53(value: float) -> None:
    rejects(ParquetType.INT64, value, "2\\^53")


@pytest.mark.parametrize("value", [2**63 - 1, -(2**63), 2**53 + 1])
def test_int64_accepts_python_ints_in_range(value: int) -> None:
    assert round_trip(ParquetType.INT64, value) == value


@pytest.mark.parametrize("value", [2**63, -(2**63) - 1, 10**30])
def test_int64_rejects_python_ints_out_of_range(value: int) -> None:
    rejects(ParquetType.INT64, value, "int64 range")


@pytest.mark.parametrize("ptype", [ParquetType.INT32, ParquetType.INT64])
@pytest.mark.parametrize(
    ("value", "match"),
    [
        (42.5, "fractional"),
        (math.nan, "not an integer"),
        (math.inf, "not an integer"),
        (-math.inf, "not an integer"),
        (True, "bool"),
        (False, "bool"),
        (np.bool_(True), "bool"),
        ("42", "got str"),
        (decimal.Decimal("42"), "got Decimal"),
    ],
)
def test_ints_reject_non_whole_and_non_numbers(ptype: ParquetType, value: Any, match: str) -> None:
    rejects(ptype, value, match)


def test_whole_float_and_numpy_ints_coerce_to_int() -> None:
    assert round_trip(ParquetType.INT32, 42.0) == 42
    assert round_trip(ParquetType.INT64, np.int64(7)) == 7
    assert round_trip(ParquetType.INT32, np.float32(3.0)) == 3


# --- floats ----------------------------------------------------------------------------------


@pytest.mark.parametrize("ptype", [ParquetType.FLOAT32, ParquetType.FLOAT64])
def test_floats_keep_nan_and_infinities(ptype: ParquetType) -> None:
    assert math.isnan(round_trip(ptype, math.nan))
    assert round_trip(ptype, math.inf) == math.inf
    assert round_trip(ptype, -math.inf) == -math.inf
    assert round_trip(ptype, 3) == 3.0


@pytest.mark.parametrize("ptype", [ParquetType.FLOAT32, ParquetType.FLOAT64])
@pytest.mark.parametrize("value", [True, "1.5", decimal.Decimal("1.5"), 2**53 + 1])
def test_floats_reject_bools_strings_and_inexact_ints(ptype: ParquetType, value: Any) -> None:
    rejects(ptype, value)


def test_float64_is_exact_and_float32_rounds() -> None:
    assert round_trip(ParquetType.FLOAT64, 0.1) == 0.1
    assert round_trip(ParquetType.FLOAT32, 0.1) == float(np.float32(0.1))
    assert round_trip(ParquetType.FLOAT32, 3.4028234663852886e38) == 3.4028234663852886e38


@pytest.mark.parametrize("value", [3.5e38, -1e39])
def test_float32_rejects_overflow_instead_of_infinity(value: float) -> None:
    rejects(ParquetType.FLOAT32, value, "overflows float32")


# --- strings, bools, bytes -----------------------------------------------------------------------


def test_string_rules() -> None:
    assert round_trip(ParquetType.STRING, "héllo ✓") == "héllo ✓"
    rejects(ParquetType.STRING, b"bytes", "got bytes")
    rejects(ParquetType.STRING, 5, "got int")
    rejects(ParquetType.STRING, "bad \ud800 surrogate", "UTF-8")


def test_bool_rules() -> None:
    assert round_trip(ParquetType.BOOL, True) is True
    assert round_trip(ParquetType.BOOL, np.bool_(False)) is False
    rejects(ParquetType.BOOL, 1, "got int")
    rejects(ParquetType.BOOL, "true", "got str")


def test_bytes_rules() -> None:
    assert round_trip(ParquetType.BYTES, b"\x00\xff") == b"\x00\xff"
    assert round_trip(ParquetType.BYTES, "é") == "é".encode()
    assert round_trip(ParquetType.BYTES, bytearray(b"ab")) == b"ab"
    assert round_trip(ParquetType.BYTES, memoryview(b"cd")) == b"cd"
    rejects(ParquetType.BYTES, 12, "got int")


# --- timestamps ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024-01-15T10:30:00Z", dt.datetime(2024, 1, 15, 10, 30, tzinfo=UTC)),
        ("2024-01-15T10:30:00+05:30", dt.datetime(2024, 1, 15, 5, 0, tzinfo=UTC)),
        ("2024-01-15T23:30:00-05:00", dt.datetime(2024, 1, 16, 4, 30, tzinfo=UTC)),
        ("2024-01-15t10:30:00.5z", dt.datetime(2024, 1, 15, 10, 30, 0, 500000, tzinfo=UTC)),
        ("2024-01-15T10:30:00.123456Z", dt.datetime(2024, 1, 15, 10, 30, 0, 123456, tzinfo=UTC)),
        ("2024-01-15T10:30:00.123456000Z", dt.datetime(2024, 1, 15, 10, 30, 0, 123456, tzinfo=UTC)),
        ("1969-12-31T23:59:59.999999Z", dt.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)),
    ],
)
def test_rfc3339_strings_are_normalised_to_utc(text: str, expected: dt.datetime) -> None:
    result = round_trip(ParquetType.TIMESTAMP, text)
    assert result == expected
    assert result.utcoffset() == dt.timedelta(0)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("not-a-valid-timestamp", "RFC 3339"),
        ("", "RFC 3339"),
        ("2024-01-15T10:30:00", "RFC 3339"),  # no offset
        ("2024-01-15", "RFC 3339"),  # date only
        ("2024-01-15 10:30:00Z", "RFC 3339"),  # space separator
        ("2024-02-30T10:30:00Z", "not a valid timestamp"),
        ("2024-01-15T10:30:00.1234567Z", "sub-microsecond"),
        ("2024-01-15T10:30:00.123456789Z", "sub-microsecond"),
    ],
)
def test_bad_timestamp_strings_are_rejected(text: str, match: str) -> None:
    rejects(ParquetType.TIMESTAMP, text, match)


def test_aware_datetimes_convert_to_utc_and_naive_ones_are_utc_wall_time() -> None:
    plus2 = dt.timezone(dt.timedelta(hours=2))
    aware = dt.datetime(2024, 6, 1, 12, 0, tzinfo=plus2)
    assert round_trip(ParquetType.TIMESTAMP, aware) == dt.datetime(2024, 6, 1, 10, tzinfo=UTC)
    naive = dt.datetime(2024, 6, 1, 12, 0, 0, 7)
    assert round_trip(ParquetType.TIMESTAMP, naive) == naive.replace(tzinfo=UTC)


def test_naive_rule_holds_on_the_per_value_path_too() -> None:
    # A string in the same column forces the per-value path for the naive datetime.
    codec = codec_for(ParquetType.TIMESTAMP)
    naive = dt.datetime(2024, 6, 1, 12)
    out = codec.decode(codec.encode_bytes([{"v": naive}, {"v": "2024-06-01T12:00:00Z"}]))
    assert out[0]["v"] == out[1]["v"] == naive.replace(tzinfo=UTC)


def test_pandas_timestamp_with_nanoseconds_is_rejected() -> None:
    pd = pytest.importorskip("pandas")
    rejects(ParquetType.TIMESTAMP, pd.Timestamp("2024-01-01T00:00:00.000000001Z"), "nanosecond")
    ok = pd.Timestamp("2024-01-01T00:00:00.000001Z")
    assert round_trip(ParquetType.TIMESTAMP, ok) == dt.datetime(2024, 1, 1, 0, 0, 0, 1, tzinfo=UTC)


def test_timestamps_reject_other_types() -> None:
    rejects(ParquetType.TIMESTAMP, 1700000000, "got int")
    rejects(ParquetType.TIMESTAMP, dt.date(2024, 1, 1), "got date")


# --- dates and decimals --------------------------------------------------------------------------


def test_date_rules() -> None:
    assert round_trip(ParquetType.DATE, dt.date(2024, 2, 29)) == dt.date(2024, 2, 29)
    assert round_trip(ParquetType.DATE, "0001-01-01") == dt.date(1, 1, 1)
    rejects(ParquetType.DATE, dt.datetime(2024, 1, 1), "datetime")
    rejects(ParquetType.DATE, "2023-02-29", "not a valid date")
    rejects(ParquetType.DATE, "2024/01/01", "YYYY-MM-DD")


def test_decimal_rules() -> None:
    d10_2 = ParquetType.DECIMAL(10, 2)
    assert round_trip(d10_2, decimal.Decimal("12345678.99")) == decimal.Decimal("12345678.99")
    assert round_trip(d10_2, "-0.5") == decimal.Decimal("-0.50")
    assert round_trip(d10_2, 7) == decimal.Decimal("7.00")
    rejects(d10_2, decimal.Decimal("123456789.00"), "does not fit")
    rejects(d10_2, decimal.Decimal("1.234"), "more than 2 fractional")
    rejects(d10_2, 1.5, "got float")
    rejects(d10_2, decimal.Decimal("NaN"), "finite")
    rejects(d10_2, "abc", "not a decimal")
    rejects(d10_2, True, "bool")
    big = ParquetType.DECIMAL(38, 0)
    assert round_trip(big, 10**38 - 1) == decimal.Decimal(10**38 - 1)
    rejects(big, 10**38, "does not fit")


# --- record-level rules --------------------------------------------------------------------------


SCHEMA = ParquetSchema(
    [
        ParquetField("id", ParquetType.INT64),
        ParquetField("name", ParquetType.STRING),
        ParquetField("tag", ParquetType.STRING, nullable=True),
    ]
)


def test_missing_and_none_required_fields_name_index_and_field() -> None:
    codec = ParquetCodec(SCHEMA)
    with pytest.raises(SchemaViolation, match="record 1: required field 'name' is missing") as info:
        codec.encode_bytes([{"id": 1, "name": "a"}, {"id": 2}])
    assert (info.value.index, info.value.field) == (1, "name")
    with pytest.raises(SchemaViolation, match="'id' is None") as info:
        codec.encode_bytes([{"id": None, "name": "a"}])
    assert (info.value.index, info.value.field) == (0, "id")


def test_non_mapping_record_is_a_violation() -> None:
    codec = ParquetCodec(SCHEMA)
    with pytest.raises(SchemaViolation, match="record 1 is not a mapping") as info:
        codec.encode_bytes([{"id": 1, "name": "a"}, "not a map"])
    assert info.value.index == 1
    with pytest.raises(SchemaViolation):
        codec.encode_bytes("not a list")  # type: ignore[arg-type]


def test_extra_fields_are_ignored_and_missing_nullable_is_null() -> None:
    codec = ParquetCodec(SCHEMA)
    data = codec.encode_bytes(
        [{"id": 1, "name": "a", "extra_field": "ignored"}, OrderedDict(id=2, name="b", tag="t")]
    )
    assert codec.decode(data) == [
        {"id": 1, "name": "a", "tag": None},
        {"id": 2, "name": "b", "tag": "t"},
    ]


def test_failed_encode_writes_nothing_to_the_sink() -> None:
    import io

    codec = ParquetCodec(SCHEMA)
    sink = io.BytesIO()
    with pytest.raises(SchemaViolation):
        codec.encode(sink, [{"id": 1, "name": "a"}, {"id": "x", "name": "b"}])
    assert sink.getvalue() == b""
    codec.encode(sink, [{"id": 1, "name": "a"}])
    assert sink.getvalue().startswith(b"PAR1")


def test_all_types_nullable_all_none() -> None:
    types = [
        ParquetType.INT32,
        ParquetType.INT64,
        ParquetType.FLOAT32,
        ParquetType.FLOAT64,
        ParquetType.STRING,
        ParquetType.BOOL,
        ParquetType.BYTES,
        ParquetType.TIMESTAMP,
        ParquetType.DATE,
        ParquetType.DECIMAL(9, 3),
    ]
    schema = ParquetSchema([ParquetField(f"f{i}", t, nullable=True) for i, t in enumerate(types)])
    codec = ParquetCodec(schema)
    assert codec.decode(codec.encode_bytes([{}])) == [{f"f{i}": None for i in range(len(types))}]


def test_any_iterable_of_records_is_accepted_but_not_a_single_mapping() -> None:
    codec = ParquetCodec(SCHEMA)
    data = codec.encode_bytes({"id": i, "name": "n"} for i in range(3))
    assert [r["id"] for r in codec.decode(data)] == [0, 1, 2]
    with pytest.raises(SchemaViolation, match="list of mappings"):
        codec.encode_bytes({"id": 1, "name": "n"})  # type: ignore[arg-type]


def test_naive_datetimes_ignore_the_local_time_zone() -> None:
    import os
    import subprocess
    import sys

    code = (
        "import datetime as dt\n"
        "from parquetry.codec import ParquetCodec, ParquetField, ParquetSchema, ParquetType\n"
        "c = ParquetCodec(ParquetSchema([ParquetField('v', ParquetType.TIMESTAMP)]))\n"
        "naive = {'v': dt.datetime(2024, 6, 1, 12)}\n"
        "fast = [naive]\n"  # only datetimes: the vectorised path
        "slow = [naive, {'v': '2024-06-01T12:00:00Z'}]\n"  # mixed: the per-value path
        "rows = c.decode(c.encode_bytes(fast)) + c.decode(c.encode_bytes(slow))\n"
        "print(sorted({r['v'].isoformat() for r in rows}), flush=True)\n"
        # No interpreter finalization: pyarrow may abort there (apache/arrow#34314).
        "import os; os._exit(0)\n"
    )
    env = {**os.environ, "TZ": "Asia/Kolkata"}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "['2024-06-01T12:00:00+00:00']"
