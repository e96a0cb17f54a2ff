"""Schema on write in the dataset layer: enforce, evolve with merge_schema, never drop data."""

from __future__ import annotations

from decimal import Decimal

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

from parquetry.dataset import Dataset, write_files
from parquetry.dataset.evolve import compare, merged_schema, widens
from parquetry.dataset.naming import common_metadata_key
from parquetry.dataset.schema import read_common_metadata
from parquetry.errors import CommitConflict, SchemaMismatch
from parquetry.store import MemoryStore

BASE = pa.table(
    {"day": ["a", "a", "b"], "n": pa.array([1, 2, 3], pa.int32()), "x": [0.5, 1.5, 2.5]}
)


def _ds() -> Dataset:
    return Dataset.create(MemoryStore(), "ev", BASE, partition_on=["day"])


def test_mismatched_append_names_every_column_and_writes_nothing() -> None:
    ds = _ds()
    before = sorted(m.key for m in ds.store.list("ev/"))
    bad = pa.table({"day": ["c"], "n": ["one"], "y": [True]})
    with pytest.raises(SchemaMismatch) as info:
        ds.append(bad)
    text = str(info.value)
    assert text.startswith("A schema mismatch detected when writing to dataset 'ev'")
    assert "column 'n': dataset has int32, data has string" in text
    assert "column 'x' is missing from the data (dataset has double)" in text
    assert "column 'y' is not in the dataset (data has bool)" in text
    assert "mergeSchema=true" in text
    assert "overwriteSchema=true" in text
    # Checked before anything was written: no data file, no intent, no version.
    assert sorted(m.key for m in ds.store.list("ev/")) == before
    assert Dataset.open(ds.store, "ev").version == 0
    # double -> string, int -> double, string -> double: other kinds, never coerced.
    for column, values in (("x", ["1.5"]), ("n", [1.5])):
        data = BASE.slice(0, 1).drop_columns([column]).append_column(column, pa.array(values))
        with pytest.raises(SchemaMismatch, match=f"column '{column}': dataset has"):
            ds.append(data)
    # Even merge_schema refuses a change of kind.
    with pytest.raises(SchemaMismatch, match="column 'n': dataset has int32, data has string"):
        ds.append(bad.append_column("x", pa.array([1.0])), merge_schema=True)
    assert Dataset.open(ds.store, "ev").version == 0


def test_merge_schema_adds_columns_and_widens_old_files_read_null_and_wide() -> None:
    ds = _ds()
    new = pa.table(
        {
            "day": ["b", "c"],
            "n": pa.array([2**40, 7], pa.int64()),
            "x": [9.5, None],
            "tag": ["p", "q"],
        }
    )
    with pytest.raises(SchemaMismatch, match="column 'tag' is not in the dataset"):
        ds.append(new)
    ds2 = ds.append(new, merge_schema=True)
    assert ds2.version == 1
    assert ds2.schema.field("n").type == pa.int64()
    assert ds2.schema.field("tag").nullable
    assert ds2.schema.names == ["day", "n", "x", "tag"]
    rows = ds2.read().sort_by([("n", "ascending")]).to_pylist()
    assert rows == [
        {"day": "a", "n": 1, "x": 0.5, "tag": None},
        {"day": "a", "n": 2, "x": 1.5, "tag": None},
        {"day": "b", "n": 3, "x": 2.5, "tag": None},
        {"day": "c", "n": 7, "x": None, "tag": "q"},
        {"day": "b", "n": 2**40, "x": 9.5, "tag": "p"},
    ]
    # Version 0 still reads with its own schema.
    assert Dataset.open(ds.store, "ev", version=0).read().schema.field("n").type == pa.int32()
    # kartothek's schema file follows the committed schema.
    key = common_metadata_key("ev")
    cm = read_common_metadata(ds.store.get(key), key)
    assert "tag" in cm.names
    assert cm.field("n").type == pa.int64()
    # Predicates on the added column: old files hold nulls (== never matches a null).
    assert ds2.read(predicates=[[("tag", "==", "q")]]).column("n").to_pylist() == [7]
    assert ds2.read(predicates=[[("tag", "!=", "q")]]).column("n").to_pylist() == [2**40]
    assert ds2.read(predicates=[[("n", ">", 2)]]).num_rows == 3
    # A later plain append of the old shape still fits: the missing column is nullable...
    with pytest.raises(SchemaMismatch, match="column 'tag' is missing"):
        ds2.append(BASE)
    ds3 = ds2.append(BASE, merge_schema=True)
    assert ds3.read(columns=["tag"]).column("tag").null_count == 6


def test_merge_schema_adds_nested_struct_fields() -> None:
    inner = pa.struct([("a", pa.int32())])
    ds = Dataset.create(MemoryStore(), "st", pa.table({"s": pa.array([{"a": 1}], inner)}))
    wider = pa.struct([("a", pa.int32()), ("b", pa.string())])
    data = pa.table({"s": pa.array([{"a": 2, "b": "z"}], wider)})
    with pytest.raises(SchemaMismatch, match=r"column 's\.b' is not in the dataset"):
        ds.append(data)
    ds = ds.append(data, merge_schema=True)
    assert ds.schema.field("s").type == wider
    assert ds.read().column("s").to_pylist() == [{"a": 1, "b": None}, {"a": 2, "b": "z"}]


def test_required_columns_refuse_nulls_and_values_are_checked() -> None:
    schema = pa.schema([pa.field("k", pa.int32(), nullable=False), pa.field("v", pa.float32())])
    ds = Dataset.create(MemoryStore(), "req", pa.table({"k": [1], "v": [1.0]}, schema=schema))
    assert not ds.schema.field("k").nullable
    with pytest.raises(SchemaMismatch, match="column 'k' is NOT NULL but row 1 is null"):
        ds.append(pa.table({"k": [2, None], "v": [1.0, 2.0]}))
    with pytest.raises(SchemaMismatch, match=r"column 'k'.* row 0 holds 4294967296"):
        ds.append(pa.table({"k": pa.array([2**32], pa.int64()), "v": [1.0]}))
    with pytest.raises(SchemaMismatch, match=r"column 'v'.* row 0 holds 0\.1"):
        ds.append(pa.table({"k": [3], "v": [0.1]}))
    assert Dataset.open(ds.store, "req").read().num_rows == 1
    # An in-range long into the int column is stored; merge_schema would widen instead.
    assert ds.append(pa.table({"k": pa.array([5], pa.int64()), "v": [0.25]})).version == 1


def test_update_and_commit_files_follow_the_same_rules() -> None:
    ds = _ds()
    extra = pa.table({"day": ["a"], "n": pa.array([9], pa.int32()), "x": [1.0], "z": [1]})
    with pytest.raises(SchemaMismatch, match="column 'z' is not in the dataset"):
        ds.update(extra, delete_scope=[{"day": "a"}])
    ds = ds.update(extra, delete_scope=[{"day": "a"}], merge_schema=True)
    assert sorted(ds.read().column("z").to_pylist(), key=str) == [1, None]
    files = write_files(ds.store, "ev", pa.table({"day": ["q"], "n": ["s"]}), partition_on=["day"])
    with pytest.raises(SchemaMismatch, match="column 'n': dataset has int32, data has string"):
        Dataset.commit_files(
            ds.store, "ev", files, schema=pa.schema([("day", pa.string()), ("n", pa.string())])
        )
    # overwrite_schema replaces schema and partitioning in one commit.
    replaced = Dataset.commit_files(
        ds.store,
        "ev",
        files,
        mode="overwrite",
        schema=pa.schema([("day", pa.string()), ("n", pa.string())]),
        partition_on=["day"],
        overwrite_schema=True,
    )
    assert replaced.schema.names == ["day", "n"]
    assert replaced.read().to_pylist() == [{"day": "q", "n": "s"}]
    assert replaced.info is not None
    assert replaced.info.rows_removed == 2


def test_concurrent_schema_change_is_a_conflict_not_a_wrong_schema() -> None:
    ds = _ds()
    widened = ds.append(
        pa.table({"day": ["z"], "n": pa.array([1], pa.int32()), "x": [1.0], "w": [1]}),
        merge_schema=True,
    )
    # ds is stale (version 0): its merge commits on top of version 1 and keeps 'w'.
    again = ds.append(
        pa.table({"day": ["y"], "n": pa.array([1], pa.int32()), "x": [1.0], "v": ["s"]}),
        merge_schema=True,
    )
    assert again.schema.names == ["day", "n", "x", "w", "v"]
    assert widened.version == 1
    assert again.version == 2
    # A stale writer adding 'w' as string, when 'w' became int64 meanwhile: refused.
    with pytest.raises(CommitConflict, match="column 'w': dataset has int64, data has string"):
        ds.append(
            pa.table({"day": ["y"], "n": pa.array([1], pa.int32()), "x": [1.0], "w": ["s"]}),
            merge_schema=True,
        )
    latest = Dataset.open(ds.store, "ev")
    assert latest.version == 2
    assert latest.schema.field("w").type == pa.int64()


_INTS = [pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint16(), pa.uint32()]
_TYPES = [*_INTS, pa.float16(), pa.float32(), pa.float64()]


_BIG = {pa.float16(): 65504.0, pa.float32(): 3.0e38, pa.float64(): 1e300}


def _extremes(t: pa.DataType) -> pa.Array:
    """Values at the edges of ``t``: the ones a narrower or other type would change."""
    if pa.types.is_integer(t):
        bits = t.bit_width - (1 if pa.types.is_signed_integer(t) else 0)
        low = -(2**bits) if pa.types.is_signed_integer(t) else 0
        return pa.array([low, 2**bits - 1, low + 1, 2**bits - 2], t)
    return pa.array([0.1, 1.0000001, -_BIG[t], None], pa.float64()).cast(t, safe=False)


@settings(max_examples=100, deadline=None)
@given(hs.sampled_from(_TYPES), hs.sampled_from(_TYPES))
def test_widening_accepted_iff_every_value_round_trips(old: pa.DataType, new: pa.DataType) -> None:
    arr = _extremes(old)
    try:
        exact = arr.cast(new).to_pylist() == arr.to_pylist()
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        exact = False
    assert widens(old, new) == exact, (old, new)


def test_decimal_and_merge_rules() -> None:
    assert widens(pa.decimal128(10, 2), pa.decimal128(12, 2))
    assert not widens(pa.decimal128(10, 2), pa.decimal128(12, 3))
    assert not widens(pa.date32(), pa.string())
    assert not widens(pa.int64(), pa.float64())  # 2**53 + 1 would round
    assert not widens(pa.int8(), pa.string())
    assert not widens(pa.date32(), pa.timestamp("us"))
    ds = Dataset.create(
        MemoryStore(), "dec", pa.table({"d": pa.array([Decimal("1.25")], pa.decimal128(5, 2))})
    )
    ds = ds.append(
        pa.table({"d": pa.array([Decimal("123456.78")], pa.decimal128(10, 2))}), merge_schema=True
    )
    assert ds.read().column("d").to_pylist() == [Decimal("1.25"), Decimal("123456.78")]
    a = pa.schema([("p", pa.int16()), ("s", pa.struct([("x", pa.int8())]))])
    b = pa.schema([("s", pa.struct([("y", pa.string()), ("x", pa.int32())])), ("q", pa.bool_())])
    assert [(d.column, d.kind) for d in compare(a, b)] == [
        ("p", "missing"),
        ("s.x", "type"),
        ("s.y", "extra"),
        ("q", "extra"),
    ]
    assert merged_schema(a, b) == pa.schema(
        [
            ("p", pa.int16()),
            ("s", pa.struct([("x", pa.int32()), ("y", pa.string())])),
            ("q", pa.bool_()),
        ]
    )


def test_repair_rewrites_common_metadata_an_interrupted_evolution_left_stale() -> None:
    from parquetry.dataset.create import put_common_metadata

    ds = _ds()
    stale = ds.schema
    ds = ds.append(BASE.append_column("tag", pa.array(["s"] * 3)), merge_schema=True)
    # As if the writer died between its commit point and the schema file.
    put_common_metadata(ds.store, "ev", "table", stale, ("day",), replace_stale=True)
    key = common_metadata_key("ev")
    assert "tag" not in read_common_metadata(ds.store.get(key), key).names
    assert "rewrote _common_metadata" in Dataset.repair(ds.store, "ev")
    assert "tag" in read_common_metadata(ds.store.get(key), key).names
    assert "nothing to repair" in Dataset.repair(ds.store, "ev")
