"""upsert by keys of every type against an oracle of the documented key equality.

The docs: "a data row matches the dataset rows whose values in all of ``on`` are equal",
with the predicate semantics of equality (docs/concepts.md: ``NaN = NaN``, ``-0.0 = 0.0``,
timestamps of any zone compare as instants). Hypothesis draws a dataset of unique keys of
one type (odd UTF-8 strings, binary, timestamps in several zones, decimals, dates, floats
with NaN and signed zeros, composite keys with the partition key, null keys) written in
several files, some indexed on the key, then upserts random data (matching and new keys) and
compares the result with a pure-Python MERGE whose key equality is ``ds.read(predicates=
[[(k, "==", v)]])``'s: the same dataset must never answer "equal" to a predicate and
"different" to upsert.
"""

from __future__ import annotations

import datetime as dt
import math
import os
import struct
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from parquetry.dataset import Dataset
from parquetry.store import MemoryStore

PLUS5 = dt.timezone(dt.timedelta(hours=5, minutes=30))
MINUS8 = dt.timezone(dt.timedelta(hours=-8))

# NFC and NFD spellings of é are different keys (bytes differ), as in Spark.
#: A NaN with the sign bit set, as x86 arithmetic makes it (``inf - inf`` in numpy).
NEG_NAN = struct.unpack(">d", bytes.fromhex("fff8000000000000"))[0]

_TEXT = st.lists(
    st.sampled_from(["a", "é", "e\u0301", "\x00", "€", "𝄞", "\ufeff", "\u200b", "Z"]), max_size=3
).map("".join)

#: key type -> (arrow type, strategy of values, canonical form for equality)
KEY_TYPES: dict[str, tuple[pa.DataType, st.SearchStrategy[Any]]] = {
    "string": (pa.string(), _TEXT),
    "binary": (pa.binary(), st.binary(max_size=3)),
    "int8": (pa.int8(), st.integers(-128, 127)),
    "uint64": (pa.uint64(), st.sampled_from([0, 1, 2**63, 2**64 - 1])),
    "ts_utc": (
        pa.timestamp("us", tz="UTC"),
        st.datetimes(
            min_value=dt.datetime(1950, 1, 1),
            max_value=dt.datetime(2100, 1, 1),
            timezones=st.sampled_from([dt.UTC, PLUS5, MINUS8]),
        ),
    ),
    "ts_naive": (
        pa.timestamp("us"),
        st.datetimes(min_value=dt.datetime(1, 1, 2), max_value=dt.datetime(9999, 12, 30)),
    ),
    "date": (pa.date32(), st.dates()),
    "decimal": (
        pa.decimal128(7, 3),
        st.decimals(min_value=Decimal("-9999.999"), max_value=Decimal("9999.999"), places=3),
    ),
    "double": (
        pa.float64(),
        # -0.0 and a NaN with the sign bit set included: equal to 0.0 and NaN for MERGE.
        st.one_of(
            st.sampled_from([math.nan, NEG_NAN, math.inf, -math.inf, 1.5, 0.0, -0.0]),
            st.floats(-4, 4),
        ),
    ),
    "bool": (pa.bool_(), st.booleans()),
}


def _canon(v: Any) -> Any:
    """The equality of the predicates: NaN = NaN, instants for zoned timestamps. (Python
    already has -0.0 == 0.0 and Decimal('1.0') == Decimal('1.00').)"""
    if isinstance(v, float) and math.isnan(v):
        return "NaN"
    if isinstance(v, dt.datetime) and v.tzinfo is not None:
        return v.astimezone(dt.UTC)
    if isinstance(v, float) and v == 0.0:
        return 0.0  # -0.0 == 0.0, and hashes alike
    return v


def _key(row: dict[str, Any], on: list[str]) -> tuple[Any, ...]:
    return tuple(_canon(row[c]) for c in on)


def _canon_rows(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    out = [
        tuple((c, _canon(v), repr(v) if isinstance(v, float) else None) for c, v in r.items())
        for r in rows
    ]
    return sorted(out, key=repr)


def _unique(rows: list[dict[str, Any]], on: list[str]) -> list[dict[str, Any]]:
    seen: set[tuple[Any, ...]] = set()
    out = []
    for r in rows:
        k = _key(r, on)
        if any(x is None for x in k) or k not in seen:
            seen.add(k)
            out.append(r)
    return out


def _merge(
    old: list[dict[str, Any]], data: list[dict[str, Any]], on: list[str], when_matched: str
) -> list[dict[str, Any]]:
    by_key = {_key(r, on): r for r in data if None not in _key(r, on)}
    out: list[dict[str, Any]] = []
    matched: set[tuple[Any, ...]] = set()
    for r in old:
        k = _key(r, on)
        if None in k or k not in by_key:
            out.append(r)
            continue
        matched.add(k)
        if when_matched == "update":
            out.append(by_key[k])
        elif when_matched == "ignore":
            out.append(r)
    out += [r for r in data if None in _key(r, on) or _key(r, on) not in matched]
    return out


@st.composite
def _case(draw: st.DrawFn) -> dict[str, Any]:
    name = draw(st.sampled_from(sorted(KEY_TYPES)))
    t, values = KEY_TYPES[name]
    composite = draw(st.booleans())
    on = ["k", "p"] if composite else ["k"]
    keys = st.one_of(st.none(), values)

    def rows(n: int) -> list[dict[str, Any]]:
        return [
            {"p": draw(st.sampled_from(["x", "y"])), "k": draw(keys), "v": draw(st.integers(0, 99))}
            for _ in range(n)
        ]

    files = [_unique(rows(draw(st.integers(1, 4))), on) for _ in range(draw(st.integers(1, 3)))]
    # Unique keys across files: the oracle's MERGE of a unique dataset.
    seen: list[dict[str, Any]] = []
    clean = []
    for f in files:
        f = [r for r in f if None in _key(r, on) or _key(r, on) not in {_key(s, on) for s in seen}]
        seen += f
        if f:
            clean.append(f)
    old_values = [r["k"] for r in seen if r["k"] is not None]
    reuse = st.sampled_from(old_values) if old_values else values
    data = [
        {
            "p": draw(st.sampled_from(["x", "y"])),
            "k": draw(st.one_of(st.none(), values, reuse)),
            "v": 100 + i,
        }
        for i in range(draw(st.integers(1, 4)))
    ]
    return {
        "type": t,
        "on": on,
        "files": clean,
        "data": _unique(data, on),
        "when_matched": draw(st.sampled_from(["update", "delete", "ignore"])),
        "index": draw(st.booleans()) and not pa.types.is_boolean(t),
        "partition": draw(st.booleans()),
    }


def _schema(t: pa.DataType) -> pa.Schema:
    return pa.schema([("p", pa.string()), ("k", t), ("v", pa.int64())])


def _build(case: dict[str, Any]) -> Dataset:
    schema = _schema(case["type"])
    store = MemoryStore()
    ds = Dataset.create(
        store,
        "u",
        pa.Table.from_pylist(case["files"][0], schema=schema),
        partition_on=["p"] if case["partition"] else (),
        secondary_indices=["k"] if case["index"] else (),
    )
    for rows in case["files"][1:]:
        ds = ds.append(pa.Table.from_pylist(rows, schema=schema))
    return ds


@settings(
    max_examples=int(os.environ.get("A12_EXPLORE", "0")) or 80,
    deadline=None,
    derandomize=not os.environ.get("A12_EXPLORE"),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(case=_case())
def test_upsert_equals_the_merge_oracle_for_every_key_type(case: dict[str, Any]) -> None:
    ds = _build(case)
    schema = _schema(case["type"])
    old = [r for f in case["files"] for r in f]
    data = case["data"]
    out = ds.upsert(
        pa.Table.from_pylist(data, schema=schema), on=case["on"], when_matched=case["when_matched"]
    )
    got = out.read().to_pylist()
    assert _canon_rows(got) == _canon_rows(_merge(old, data, case["on"], case["when_matched"]))


@pytest.mark.parametrize("layout", ["plain", "indexed", "composite"])
@pytest.mark.parametrize(("stored", "given"), [(0.0, -0.0), (math.nan, NEG_NAN)])
def test_upsert_float_key_equal_by_the_predicates_matches(
    layout: str, stored: float, given: float
) -> None:
    store = MemoryStore()
    ds = Dataset.create(
        store,
        "z",
        pa.table({"k": [stored, 1.0], "j": [1, 1], "v": [1, 2]}),
        secondary_indices=["k"] if layout == "indexed" else (),
    )
    on = ["k", "j"] if layout == "composite" else ["k"]
    # The predicates' equality: the dataset's key equals the given one.
    assert ds.read(predicates=[[("k", "==", given)]]).column("v").to_pylist() == [1]
    out = ds.upsert(pa.table({"k": [given], "j": [1], "v": [9]}), on=on)
    # MERGE updated the row of that key: the key is still there once.
    assert sorted(out.read().column("v").to_pylist()) == [2, 9]
