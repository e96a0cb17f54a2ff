"""Corrupt metadata, data and index files: one ParquetryError naming the key, never a raw one.

Issue 11 §4: deeply nested JSON (RecursionError), ``Infinity`` and huge numbers
(OverflowError), per-file statistics decoded on demand (JSONDecodeError, TypeError, ...) and
corrupt Parquet objects (raw pyarrow errors). §2: user metadata that cannot be read back is
refused before anything is written.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import math
import uuid
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from parquetry.dataset import Dataset
from parquetry.dataset.metadata import DatasetDocument, decode_document
from parquetry.dataset.naming import metadata_key, version_key, version_number_from_key
from parquetry.dataset.write import write_files
from parquetry.errors import InvalidArgument, InvalidFormat, MetadataCorrupted
from parquetry.store import MemoryStore, Store


def _table(n: int = 12, offset: int = 0) -> pa.Table:
    ids = range(offset, offset + n)
    return pa.table(
        {
            "p": pa.array([i % 2 for i in ids], pa.int64()),
            "k": [f"k{i % 3}" for i in ids],
            "v": [float(i) for i in ids],
            "t": pa.array([i * 1_000_000 for i in ids], pa.timestamp("us")),
        }
    )


@pytest.fixture
def store() -> MemoryStore:
    return MemoryStore(f"validation-{uuid.uuid4().hex}")


def _dataset(store: Store, fmt: str = "json") -> Dataset:
    """A dataset whose pointer is its only metadata document, as kartothek writes them.

    With intact version documents a corrupt pointer is worked around (tested in
    test_commit_safety); here the pointer's own validation is what a reader meets.
    """
    ds = Dataset.create(
        store,
        "ds",
        _table(),
        partition_on=["p"],
        secondary_indices=["k"],
        metadata_format=fmt,
    ).append(_table(6, 100))
    for meta in list(store.list("ds/_versions")):
        if version_number_from_key(meta.key) is not None:
            store.delete(meta.key)
    # Format 2: the head and checkpoints go too (the pointer alone describes the dataset).
    store.delete("ds/_head.json", missing_ok=True)
    for meta in list(store.list("ds/_checkpoints")):
        store.delete(meta.key)
    return ds


def _pointer(store: Store) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(store.get(metadata_key("ds")))
    return doc


def _put_pointer(store: Store, doc: Any, *, newest_version: int | None = None) -> None:
    data = json.dumps(doc).encode()
    store.put(metadata_key("ds"), data)
    if newest_version is not None:  # the pointer is a copy of the newest version document
        store.put(version_key("ds", newest_version), data)


# --- documents -------------------------------------------------------------------------------


def test_deeply_nested_json_is_metadata_corrupted(store: MemoryStore) -> None:
    _dataset(store)
    store.put(metadata_key("ds"), b"[" * 100_000 + b"]" * 100_000)
    with pytest.raises(MetadataCorrupted, match="nested too deeply") as info:
        Dataset.open(store, "ds")
    assert info.value.key == metadata_key("ds")


def test_deep_user_metadata_in_a_document_is_refused(store: MemoryStore) -> None:
    _dataset(store)
    doc = _pointer(store)
    deep: Any = 1
    for _ in range(500):
        deep = [deep]
    doc["metadata"] = {"x": deep}
    _put_pointer(store, doc)
    with pytest.raises(MetadataCorrupted, match=r"metadata\.x\[0\].*nested more than"):
        Dataset.open(store, "ds")


@pytest.mark.parametrize(
    ("field", "text"),
    [
        ("number", "Infinity"),
        ("number", "NaN"),
        ("number", "1e999"),
        ("number", "1" + "0" * 400),
        ("rows_added", "-1"),
    ],
)
def test_non_finite_and_huge_numbers_are_refused(store: MemoryStore, field: str, text: str) -> None:
    _dataset(store)
    raw = store.get(metadata_key("ds")).decode()
    marker = f'"{field}": '
    start = raw.index(marker) + len(marker)
    end = min(raw.index(",", start), raw.index("}", start))
    store.put(metadata_key("ds"), (raw[:start] + text + raw[end:]).encode())
    with pytest.raises(MetadataCorrupted) as info:
        Dataset.open(store, "ds")
    assert info.value.key == metadata_key("ds")


def test_all_problems_of_a_document_in_one_error(store: MemoryStore) -> None:
    _dataset(store)
    doc = _pointer(store)
    doc["partition_keys"] = 5
    doc["parquetry"]["version"]["number"] = "x"
    doc["parquetry"]["version"]["committed_at"] = "yesterday"
    label = next(iter(doc["partitions"]))
    doc["partitions"][label] = {"files": [1]}
    _put_pointer(store, doc)
    with pytest.raises(MetadataCorrupted) as info:
        Dataset.open(store, "ds")
    message = str(info.value)
    for path in (
        "partition_keys",
        "parquetry.version.number",
        "parquetry.version.committed_at",
        f"partitions[{label!r}].files",
    ):
        assert path in message, (path, message)


@pytest.mark.parametrize(
    "entry",
    [
        "[",
        "[1]",
        "7",
        "[Infinity, 1, {}]",
        '[1, 2, {"v": [1]}]',
        '[1, 2, {"v": ["a", "b", 0]}]',
        '[1, 2, {"t": ["not a time", "2020-01-01T00:00:00", 0]}]',
        '[1, 2, {"v": [1.0, 2.0, -3]}]',
        '[1, 2, {"nope": [1, 2, 0]}]',
        "[" * 5000 + "]" * 5000,
    ],
)
def test_bad_per_file_statistics_raise_metadata_corrupted(store: MemoryStore, entry: str) -> None:
    _dataset(store)
    doc = _pointer(store)
    for label in doc["parquetry"]["files"]:
        doc["parquetry"]["files"][label] = entry
    _put_pointer(store, doc)
    ds = Dataset.open(store, "ds")  # statistics are checked when first decoded
    for call in (
        lambda: ds.plan([[("v", ">", 3.0)]]),
        lambda: ds.read(predicates=[[("v", ">", 3.0)]]),
        lambda: ds.plan(None).rows,
    ):
        with pytest.raises(MetadataCorrupted, match=r"parquetry\.files\[") as info:
            call()
        assert info.value.key == metadata_key("ds")
    assert ds.document.files.problems()


def test_index_footer_of_the_wrong_shape_is_refused(store: MemoryStore) -> None:
    _dataset(store)
    doc = _pointer(store)
    doc["parquetry"]["index_footers"]["k"]["tail"] = "bm90IHBhcnF1ZXQ="
    doc["parquetry"]["index_footers"]["k"]["size"] = -4
    _put_pointer(store, doc)
    with pytest.raises(MetadataCorrupted, match=r"index_footers\['k'\]\.(size|tail)"):
        Dataset.open(store, "ds")


def test_msgpack_pointer_with_wrong_types(store: MemoryStore) -> None:
    import msgpack
    import zstandard

    _dataset(store, "msgpack.zstd")
    key = metadata_key("ds", "msgpack.zstd")
    doc = msgpack.unpackb(zstandard.ZstdDecompressor().decompress(store.get(key)))
    doc["indices"] = {"k": 12}
    store.put(key, zstandard.ZstdCompressor().compress(msgpack.packb(doc)))
    with pytest.raises(MetadataCorrupted, match=r"indices\['k'\]"):
        Dataset.open(store, "ds")


def _valid_raw(store: Store) -> dict[str, Any]:
    _dataset(store)
    return _pointer(store)


WRONG = st.sampled_from(
    [None, "x", -1, 2**70, 1.5, math.inf, True, [], {}, [1, "a"], {"a": [None]}, "[1, 2, {}]"]
)


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _paths(v, (*prefix, i))
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_any_wrongly_typed_field_is_metadata_corrupted_or_works(data: st.DataObject) -> None:
    """Property: replacing any fields by values of the wrong type gives a usable document
    or MetadataCorrupted, at decode time or when statistics are used; nothing raw."""
    raw = copy.deepcopy(_RAW)
    paths = [p for p in _paths(raw) if p]
    for path in data.draw(st.lists(st.sampled_from(paths), min_size=1, max_size=3)):
        parent = raw
        try:
            for p in path[:-1]:
                parent = parent[p]
            parent[path[-1]] = copy.deepcopy(data.draw(WRONG))
        except (KeyError, IndexError, TypeError):
            continue  # an earlier replacement removed this path
    text = json.dumps(raw, allow_nan=True).encode()
    try:
        doc = decode_document(text, "json", key="k")
        for label in doc.partitions:
            doc.files.get(label)
    except MetadataCorrupted:
        return
    assert isinstance(doc, DatasetDocument)


_RAW = _valid_raw(MemoryStore(f"raw-doc-{uuid.uuid4().hex}"))


# --- data and index files --------------------------------------------------------------------


def _first_data_key(ds: Dataset) -> str:
    return ds.plan(None).files[0].key


@pytest.mark.parametrize("damage", ["truncate", "garbage", "empty", "flip_footer"])
def test_corrupt_data_file_is_invalid_format_naming_the_key(
    store: MemoryStore, damage: str
) -> None:
    ds = _dataset(store)
    key = _first_data_key(ds)
    data = store.get(key)
    if damage == "truncate":
        data = data[: len(data) // 2]
    elif damage == "garbage":
        data = b"not parquet at all" * 10
    elif damage == "empty":
        data = b""
    else:
        out = bytearray(data)
        for i in range(len(out) - 60, len(out) - 12):
            out[i] ^= 0xA5
        data = bytes(out)
    store.put(key, data)
    for call in (
        ds.read,
        lambda: list(ds.scan()),
        lambda: ds.read_file(ds.plan(None).files[0]),
        lambda: ds.read(predicates=[[("k", "==", "k1")]]),
    ):
        with pytest.raises((InvalidFormat, MetadataCorrupted)) as info:
            call()
        assert info.value.key == key


def test_corrupt_index_file_is_metadata_corrupted(store: MemoryStore) -> None:
    _dataset(store)
    key = _pointer(store)["indices"]["k"]  # the kartothek index file the pointer names
    data = store.get(key)
    store.put(key, data[:10] + bytes(len(data) - 10))  # the footer cached in the doc stays
    ds = Dataset.open(store, "ds")
    for call in (
        lambda: ds.plan([[("k", "==", "k1")]]),
        lambda: ds.read(predicates=[[("k", "==", "k1")]]),
        lambda: ds.index_pairs("k"),
    ):
        with pytest.raises(MetadataCorrupted) as info:
            call()
        assert info.value.key == key


# --- user metadata ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "metadata",
    [
        {1: "x"},
        {"a": {2: "b"}},
        {"n": math.nan},
        {"n": [math.inf]},
        {"big": 2**80},
        {"obj": object()},
        {"bytes": b"x"},
    ],
)
@pytest.mark.parametrize("fmt", ["json", "msgpack.zstd"])
def test_bad_user_metadata_is_refused_before_writing(
    store: MemoryStore, metadata: dict[Any, Any], fmt: str
) -> None:
    with pytest.raises(InvalidArgument, match="invalid user metadata"):
        Dataset.create(store, "ds", _table(), metadata=metadata, metadata_format=fmt)
    assert list(store.list("")) == []
    files = write_files(
        store, "ds2", _table(), partition_on=(), secondary_indices=(), schema=_table().schema
    )
    before = {m.key for m in store.list("")}
    with pytest.raises(InvalidArgument, match="invalid user metadata"):
        Dataset.commit_files(store, "ds2", files, metadata=metadata, metadata_format=fmt)
    assert {m.key for m in store.list("")} == before
    # The uuid is still free: a good create works.
    Dataset.create(store, "ds", _table(), metadata={"ok": [1, "x"]}, metadata_format=fmt)
    assert Dataset.open(store, "ds").metadata["ok"] == [1, "x"]


def test_deep_user_metadata_is_refused() -> None:
    deep: Any = "x"
    for _ in range(100):
        deep = {"a": deep}
    with pytest.raises(InvalidArgument, match="nested more than"):
        Dataset.create(
            MemoryStore(f"deep-{uuid.uuid4().hex}"), "ds", _table(), metadata={"d": deep}
        )


def test_build_index_over_a_corrupt_data_file_is_invalid_format(store: MemoryStore) -> None:
    ds = _dataset(store)
    key = _first_data_key(ds)
    store.put(key, store.get(key)[:-20])
    with pytest.raises(InvalidFormat) as info:
        ds.build_index("v")
    assert info.value.key == key


_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**65), 2**65)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=8)
    | st.sampled_from(["2020-01-01T00:00:00", "2020-13-01", "1.5", "NaN"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from("pktvx"), inner),
    max_leaves=12,
)
_ENTRY = _JSON | st.tuples(
    st.integers(-2, 2**64), st.integers(-2, 10), st.dictionaries(st.sampled_from("pktvx"), _JSON)
).map(list)


@settings(max_examples=200, deadline=None)
@given(entry=_ENTRY)
def test_any_statistics_entry_is_checked_or_usable(entry: Any) -> None:
    """Property: an arbitrary per-file statistics entry either raises MetadataCorrupted when
    decoded, or every column's statistics decode and evaluate against predicates."""
    from parquetry.dataset.predicates import eval_stats, validate_predicates
    from parquetry.dataset.stats import decode_stats

    raw = copy.deepcopy(_RAW)
    for label in raw["parquetry"]["files"]:
        raw["parquetry"]["files"][label] = json.dumps(entry, allow_nan=True)
    doc = decode_document(json.dumps(raw).encode(), "json", key="k")
    assert doc.schema is not None
    dnf = validate_predicates(
        [[("k", "==", "k1"), ("v", ">", 1.5), ("t", "<", dt.datetime(2021, 1, 1))]], doc.schema
    )
    assert dnf is not None
    for label in doc.partitions:
        try:
            info = doc.files[label]
        except MetadataCorrupted:
            continue
        for lit in dnf[0]:
            st_ = decode_stats(info.stats, lit.column, doc.schema.field(lit.column).type)
            if st_ is not None:
                eval_stats(lit, st_[0], st_[1], st_[2], info.rows)
