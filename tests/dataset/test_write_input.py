"""Input conversion on write and column names pyarrow would read as paths."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from parquetry.dataset import Dataset
from parquetry.errors import InvalidArgument, SchemaMismatch
from parquetry.store import MemoryStore

NS = pa.timestamp("ns")
US = pa.timestamp("us")


def _ts_table(values: list[int | None], t: pa.DataType) -> pa.Table:
    return pa.table({"t": pa.array(values, t), "i": pa.array(range(len(values)), pa.int64())})


def test_whole_microsecond_ns_input_converts_into_a_us_dataset() -> None:
    """Regression: timestamp[ns] input was refused against a timestamp[us] dataset."""
    ds = Dataset.create(MemoryStore(), "ds", _ts_table([0], US))
    ds = ds.append(_ts_table([None, 1_000_000_000_000, -5_000], NS))
    assert ds.schema.field("t").type == US
    assert ds.read().column("t").to_pylist() == [
        dt.datetime(1970, 1, 1),
        None,
        dt.datetime(1970, 1, 1, 0, 16, 40),
        dt.datetime(1969, 12, 31, 23, 59, 59, 999995),
    ]
    # create with ns input stores µs, as documented.
    created = Dataset.create(MemoryStore(), "ns", _ts_table([2_000], NS))
    assert created.schema.field("t").type == US
    assert created.read().column("t").to_pylist() == [dt.datetime(1970, 1, 1, 0, 0, 0, 2)]


@pytest.mark.parametrize("tz", [None, "Europe/Berlin"])
def test_sub_microsecond_input_is_refused_naming_column_row_and_value(tz: str | None) -> None:
    store = MemoryStore()
    ds = Dataset.create(store, "ds", _ts_table([0], pa.timestamp("us", tz=tz)))
    bad = _ts_table([1_000, None, 1_000_000_000_001], pa.timestamp("ns", tz=tz))
    with pytest.raises(SchemaMismatch, match=r"column 't'.* row 2 holds .*40\.000000001"):
        ds.append(bad)
    assert Dataset.open(store, "ds").read().num_rows == 1


def test_other_lossless_casts_and_their_refusals() -> None:
    base = pa.table({"i": pa.array([1], pa.int32()), "f": pa.array([1.0], pa.float32())})
    ds = Dataset.create(MemoryStore(), "ds", base)
    ok = pa.table({"i": pa.array([2, -(2**31)], pa.int64()), "f": pa.array([0.5, 2.0**100])})
    ds = ds.append(ok)
    assert ds.read().column("i").to_pylist() == [1, 2, -(2**31)]
    with pytest.raises(SchemaMismatch, match=r"column 'i'.* row 1 holds 2147483648"):
        ds.append(pa.table({"i": pa.array([0, 2**31], pa.int64()), "f": [1.0, 1.0]}))
    with pytest.raises(SchemaMismatch, match=r"column 'f'.* row 0 holds 1e\+300"):
        ds.append(pa.table({"i": pa.array([0], pa.int64()), "f": [1e300]}))
    # Rounding is a lossy cast too: 0.1 has no exact float32 (NaN is stored as NaN).
    with pytest.raises(SchemaMismatch, match=r"column 'f'.* row 1 holds 0\.1\b"):
        ds.append(pa.table({"i": pa.array([0, 0], pa.int64()), "f": [float("nan"), 0.1]}))
    assert ds.read().num_rows == 3
    ms = Dataset.create(MemoryStore(), "ms", _ts_table([0], US))
    with pytest.raises(SchemaMismatch, match=r"row 0 holds 4611686018427387904 ms"):
        ms.append(_ts_table([2**62], pa.timestamp("ms")))
    with pytest.raises(SchemaMismatch, match="timestamp"):
        ms.append(_ts_table([0], pa.timestamp("us", tz="UTC")))


NAMES = [".x", "a.b", "x.", "[0]", "a[0]", ".0", "a,b", " x"]


@pytest.mark.parametrize("name", NAMES)
def test_partition_and_index_columns_with_path_like_names(name: str) -> None:
    """Regression: pyarrow read ".x" as a nested field path in create (ArrowInvalid)."""
    table = pa.table({name: [1, 2, 2], "v": [1.0, 2.0, 3.0], "w": ["a", "b", "c"]})
    for kwargs in ({"partition_on": [name]}, {"partition_on": ["w"], "secondary_indices": [name]}):
        ds = Dataset.create(MemoryStore(), "ds", table, **kwargs)  # type: ignore[arg-type]
        ds = ds.append(table)
        assert ds.read(predicates=[[(name, "==", 2)]]).num_rows == 4
        assert ds.read(predicates=[[(name, "in", [1])]]).column("v").to_pylist() == [1.0] * 2
    plain = Dataset.create(MemoryStore(), "plain", table).build_index(name)
    assert sorted(plain.index_pairs(name).column("value").to_pylist()) == [1, 2]


def test_index_column_that_cannot_be_a_key_segment_is_refused_up_front() -> None:
    store = MemoryStore()
    table = pa.table({"..": [1, 2], "v": [1.0, 2.0]})
    with pytest.raises(InvalidArgument, match=r"'\.\.' cannot be indexed"):
        Dataset.create(store, "ds", table, secondary_indices=[".."])
    assert list(store.list("")) == []
