"""Corrupted snapshot metadata (issue 11): a truncated, bit-flipped, deeply nested or
wrongly typed ``manifest.json``, ``_SUCCESS`` or switch journal. Every operation either
works or raises a ``ParquetryError`` naming the key; ``repair()`` converges where it can.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
import uuid
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from parquetry import ManifestCorrupted, ParquetDatasetStore, ParquetryError
from parquetry.cli.targets import find_datasets
from parquetry.store import LocalStore, MemoryStore, Store
from parquetry.testing import FaultyStore

KEY = "c/ds"
OLD = pa.table({"id": [1, 2, 3], "v": ["a", "b", "c"]})
NEW = pa.table({"id": [7], "v": ["new"]})
OBJECTS = ("manifest.json", "_SUCCESS", "_parquetry_switch.json")


def _dataset(with_journal: bool, kind: str = "memory") -> Store:
    store: Store
    if kind == "local":
        store = LocalStore(tempfile.mkdtemp(prefix="corrupt-"), fsync=False)
    else:
        store = MemoryStore(f"corrupt-{uuid.uuid4().hex}")
    ParquetDatasetStore(store, max_rows_per_file=2).write_dataset(OLD, KEY)
    if with_journal:
        # A write that failed right after deciding: its journal stays (released).
        faulty = FaultyStore(store, fail_on=1, kinds=("delete",))
        with pytest.raises(ParquetryError):
            ParquetDatasetStore(faulty).write_dataset(NEW, KEY, overwrite=True)
        assert store.exists(f"{KEY}/_parquetry_switch.json")
    return store


hostile_text = st.sampled_from(["\ud800", "../x", "a/b", "", ".", "\x00", "data.parquet"])
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8) | hostile_text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=8,
)


@st.composite
def mutations(draw: st.DrawFn) -> tuple[str, Callable[[bytes], bytes]]:
    kind = draw(
        st.sampled_from(["truncate", "flip", "nested", "garbage", "field", "document", "huge"])
    )
    if kind == "truncate":
        cut = draw(st.integers(0, 400))
        return f"truncate {cut}", lambda raw: raw[: min(cut, max(len(raw) - 1, 0))]
    if kind == "flip":
        pos, bit = draw(st.integers(0, 2000)), draw(st.integers(0, 7))

        def flip(raw: bytes) -> bytes:
            if not raw:
                return b"\x80"
            data = bytearray(raw)
            data[pos % len(data)] ^= 1 << bit
            return bytes(data)

        return f"flip {pos}/{bit}", flip
    if kind == "nested":
        depth = draw(st.sampled_from([1_000, 100_000]))
        opener = draw(st.sampled_from(["[", '{"a":']))
        return f"nested {depth}", lambda raw: (opener * depth).encode()
    if kind == "garbage":
        junk = draw(st.binary(max_size=64))
        return f"garbage {junk!r}", lambda raw: junk
    if kind == "huge":
        text = draw(st.sampled_from(["Infinity", "NaN", "-Infinity", "1e400", "9" * 5000]))
        return f"number {text[:10]}", lambda raw: text.encode()
    if kind == "document":
        value = draw(json_values)
        return f"document {value!r}", lambda raw: json.dumps(value).encode()
    field_value = draw(json_values)
    field_name = draw(st.text(max_size=12) | st.sampled_from(_FIELDS))

    def replace_field(raw: bytes) -> bytes:
        try:
            data: Any = json.loads(raw)
        except ValueError:
            data = {}
        if not isinstance(data, dict):
            data = {}
        data[field_name] = field_value
        return json.dumps(data).encode()

    return f"field {field_name}={field_value!r}", replace_field


_FIELDS = [
    "dataset_key",
    "parts",
    "row_count",
    "schema_hash",
    "compression",
    "created_at_utc",
    "run_id",
    "metadata",
    "format_version",
    "write_id",
    "manifest",
    "moves",
    "owner",
    "released",
    "kind",
    "overwrite",
]


def _call(what: str, fn: Callable[[], object]) -> str:
    error: ParquetryError | None = None
    try:
        fn()
    except ParquetryError as exc:
        error = exc
    if error is None:
        return f"{what}: ok"
    assert error.key is None or KEY in error.key or KEY in str(error), (what, error)
    return f"{what}: {type(error).__name__}"


def _every_operation(store: Store) -> list[str]:
    pds = ParquetDatasetStore(store)
    return [
        _call("read", lambda: pds.read_dataset(KEY)),
        _call("read columns", lambda: pds.read_dataset(KEY, columns=["v"])),
        _call("manifest", lambda: pds.read_manifest(KEY)),
        _call("exists", lambda: pds.dataset_exists(KEY)),
        _call("list", lambda: find_datasets(store)),
        _call("gc", lambda: pds.collect_garbage(KEY, retention=3600)),
        _call("repair", lambda: pds.repair(KEY)),
        _call("write new", lambda: pds.write_dataset(NEW, KEY)),
    ]


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    target=st.sampled_from(OBJECTS),
    journal=st.booleans(),
    kind=st.sampled_from(["memory", "local"]),
    mutation=mutations(),
)
def test_corrupt_metadata_gives_parquetry_errors(
    target: str, journal: bool, kind: str, mutation: tuple[str, Callable[[bytes], bytes]]
) -> None:
    label, mutate = mutation
    store = _dataset(with_journal=journal or target == "_parquetry_switch.json", kind=kind)
    key = f"{KEY}/{target}"
    store.put(key, mutate(store.get(key)))
    _every_operation(store)
    # Convergence: once the corrupt journal is past its lease (0 here), repair discards
    # it or completes the switch; an overwrite then always works, whatever was corrupt.
    fresh = ParquetDatasetStore(store, switch_lease=0)
    _call("repair after lease", lambda: fresh.repair(KEY))
    assert not store.exists(f"{KEY}/_parquetry_switch.json"), label
    fresh.write_dataset(NEW, KEY, overwrite=True)
    assert fresh.read_dataset(KEY).equals(NEW), label
    assert fresh.repair(KEY) is False
    if isinstance(store, LocalStore):
        shutil.rmtree(store.root)


def test_garbage_success_marker_is_just_a_marker() -> None:
    """``_SUCCESS`` is an empty marker; its content is never interpreted."""
    store = _dataset(with_journal=False)
    store.put(f"{KEY}/_SUCCESS", b"[" * 100_000)
    assert ParquetDatasetStore(store).read_dataset(KEY).equals(OLD)


@pytest.mark.parametrize(
    "content",
    [b"[" * 100_000, b'{"format_version": 1, "moves": [[1, 2, Infinity]]}', b"\xff\xfe", b""],
    ids=["nested", "infinity", "not-utf8", "empty"],
)
def test_corrupt_journal_is_named_then_repaired(content: bytes) -> None:
    store = _dataset(with_journal=True)
    store.put(f"{KEY}/_parquetry_switch.json", content)
    pds = ParquetDatasetStore(store)
    # Young: it might be a newer parquetry's switch in progress, so it is not discarded.
    with pytest.raises(ParquetryError, match=re.escape("_parquetry_switch.json")) as info:
        pds.repair(KEY)
    assert info.value.key == f"{KEY}/_parquetry_switch.json"
    with pytest.raises(ParquetryError, match=KEY):
        pds.write_dataset(NEW, KEY, overwrite=True)
    assert ParquetDatasetStore(store, switch_lease=0).repair(KEY) is False
    # The failed write had not touched the dataset: the old version is still whole.
    assert pds.read_dataset(KEY).equals(OLD)


def test_corrupt_manifest_named_and_overwritable() -> None:
    store = _dataset(with_journal=False)
    store.put(f"{KEY}/manifest.json", b"[" * 100_000)
    pds = ParquetDatasetStore(store)
    with pytest.raises(ParquetryError, match=KEY) as info:
        pds.read_dataset(KEY)
    assert info.value.key == KEY
    with pytest.raises(ParquetryError, match=KEY):
        pds.read_manifest(KEY)
    pds.write_dataset(NEW, KEY, overwrite=True)
    assert pds.read_dataset(KEY).equals(NEW)


@pytest.mark.parametrize("name", ["\ud800x", "../x", "a/b", "", "\x00"])
def test_manifest_part_names_that_name_no_file(local_store: Store, name: str) -> None:
    pds = ParquetDatasetStore(local_store)
    pds.write_dataset(OLD, KEY)
    doc = json.loads(local_store.get(f"{KEY}/manifest.json"))
    doc["parts"] = [name]
    local_store.put(f"{KEY}/manifest.json", json.dumps(doc).encode())
    with pytest.raises(ManifestCorrupted, match="invalid part names") as info:
        pds.read_dataset(KEY)
    assert info.value.key == KEY
    pds.write_dataset(NEW, KEY, overwrite=True)
    assert pds.read_dataset(KEY).equals(NEW)
