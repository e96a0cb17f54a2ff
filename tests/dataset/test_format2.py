"""Format 2: entries, head, checkpoint roots, lazy segments, migration (docs/format.md)."""

from __future__ import annotations

import json
import re
import uuid as uuid_module

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from parquetry.dataset import Dataset, pointer
from parquetry.dataset import head as head_module
from parquetry.dataset.checkpoint import (
    checkpoint_key,
    decode_root,
    encode_root,
    list_checkpoints,
    state_from_root,
    write_checkpoint,
)
from parquetry.dataset.entry import (
    Change,
    apply_entry,
    decode_entry,
    empty_state,
    encode_entry,
    entry_of,
)
from parquetry.dataset.head import Lineage, decode_head, encode_head, head_key
from parquetry.dataset.metadata import encode_document
from parquetry.dataset.naming import metadata_key, version_key
from parquetry.dataset.state import Catalog
from parquetry.errors import PointerCorruptedWarning
from parquetry.store import MemoryStore
from parquetry.testing import CountingStore

_LABELS = st.text("abcdef=/", min_size=1, max_size=6).map(lambda s: f"p={s}.parquet")


def _rows(ds: Dataset) -> list[int]:
    return sorted(ds.read(columns=["v"]).column("v").to_pylist())


def _info(i: int) -> str:
    return json.dumps([i, 10 * i, {}])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    base=st.sets(_LABELS, max_size=30),
    steps=st.lists(
        st.tuples(st.sets(_LABELS, max_size=5), st.integers(0, 3), st.booleans()), max_size=6
    ),
)
def test_entries_round_trip_and_apply_like_a_dict(
    base: set[str], steps: list[tuple[set[str], int, bool]]
) -> None:
    """Oracle: a plain dict changed the same way; entries survive encode/decode."""
    store = MemoryStore()
    oracle = {lbl: ({"table": f"u/table/{lbl}"}, _info(i)) for i, lbl in enumerate(sorted(base))}
    doc = empty_state("u").evolve(
        partitions={k: v[0] for k, v in oracle.items()},
        files=empty_state("u").files.changed(set(), {}),
    )
    from parquetry.dataset.entry import with_catalog

    doc = with_catalog(doc, Catalog.of_dicts(doc.partitions, {k: v[1] for k, v in oracle.items()}))
    # Half the time the base lives in real segments (checkpointed), not in memory.
    from parquetry.dataset.metadata import VersionInfo

    version = VersionInfo(number=0, parent=None, committed_at="2020-01-01T00:00:00", operation="t")
    doc = doc.evolve(version=version, schema=pa.schema([("v", pa.int64())]))
    for i, (add, n_remove, replace_all) in enumerate(steps, 1):
        remove = sorted(oracle)[:n_remove]
        add = {lbl for lbl in add if lbl not in oracle or lbl in remove}
        adds = {lbl: ({"table": f"u/table/{lbl}"}, _info(i)) for lbl in sorted(add)}
        if replace_all:
            oracle = {}
        else:
            for lbl in remove:
                del oracle[lbl]
        oracle.update(adds)
        body = {
            "format": 2,
            "version": {**version.to_json(), "number": i, "parent": i - 1},
            "replace_all": replace_all,
            "remove": [] if replace_all else remove,
            "add": [[lbl, files, info] for lbl, (files, info) in adds.items()],
            "set": {},
        }
        body = decode_entry(json.loads(encode_entry(body)), "k")
        doc = apply_entry(doc, body, "k")
        assert dict(doc.partitions) == {k: v[0] for k, v in oracle.items()}
        assert len(doc.partitions) == len(oracle)
        assert {k: doc.files[k].rows for k in doc.files} == {
            k: json.loads(v[1])[0] for k, v in oracle.items()
        }
        if i % 2:
            root = decode_root(encode_root(write_checkpoint(store, doc)), "r")
            doc = state_from_root(store, "u", root, "r")
            assert dict(doc.partitions) == {k: v[0] for k, v in oracle.items()}


def test_head_round_trip_and_corrupted_heads_are_refused() -> None:
    entry = {"format": 2, "version": {"number": 5, "parent": 4}, "replace_all": False}
    lineage = Lineage(4, {"format": 2, "segments": []}, (entry,), 10, {"number": 5})
    data = encode_head(5, {"incarnation": "x", "epoch": 0}, lineage)
    body = decode_head(data, "h")
    assert (body["number"], body["checkpoint"], body["tail"], body["pointer"]) == (
        5,
        4,
        [entry],
        {"number": 5},
    )
    from parquetry.errors import MetadataCorrupted

    for bad in (b"", b"{}", data.replace(b'"number":5,"inc', b'"number":7,"inc')):
        with pytest.raises(MetadataCorrupted):
            decode_head(bad, "h")


def _appends(n: int, store: MemoryStore | CountingStore, uuid: str = "ds") -> Dataset:
    ds = Dataset.create(store, uuid, pa.table({"p": [0], "v": [0]}), partition_on=["p"])
    for i in range(1, n + 1):
        ds = ds.append(pa.table({"p": [i % 7], "v": [i]}))
    return ds


def test_a_commit_writes_an_entry_and_a_checkpoint_every_n_entries(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(head_module, "CHECKPOINT_ENTRIES", 3)
    store = MemoryStore()
    ds = _appends(9, store)
    # The tail starts with the creating entry 0: checkpoints when it holds 3 entries.
    assert list_checkpoints(store, "ds") == [2, 5, 8]
    head = decode_head(store.get(head_key("ds")), "h")
    assert (head["number"], head["checkpoint"], len(head["tail"])) == (9, 8, 1)
    entry = json.loads(store.get(version_key("ds", 9)))["parquetry_entry"]
    assert [a[0] for a in entry["add"]]
    assert entry["remove"] == []
    assert entry["set"] == {}
    for k in range(10):  # time travel: checkpoint + entries, or the creating entry + entries
        assert _rows(Dataset.open(store, "ds", version=k)) == list(range(k + 1))
    assert _rows(ds) == list(range(10))


def _dataset_of(n: int) -> tuple[MemoryStore, Dataset]:
    store = MemoryStore()
    table = pa.table({"p": list(range(n)), "v": list(range(n))})
    return store, Dataset.create(store, "ds", table, partition_on=["p"])


def test_append_writes_o_of_change_not_o_of_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """Bytes written by a 1-row append do not grow from 100 to 2,000 partitions (the
    pointer, rewritten every commit while small, is set to checkpoint-only here)."""
    monkeypatch.setattr(pointer, "POINTER_EVERY_COMMIT_BYTES", 1024)
    written = {}
    for n in (100, 2000):
        inner, ds = _dataset_of(n)
        ds = ds.append(pa.table({"p": [0], "v": [-1]}))  # past the first checkpoint
        store = CountingStore(inner)
        ds = Dataset.open(store, "ds")
        store.reset()
        ds.append(pa.table({"p": [1], "v": [-2]}))
        data = {k for kind, k in store.log if kind == "put" and "/table/" in k}
        meta = store.bytes_written - sum(len(inner.get(k)) for k in data)
        written[n] = meta
        # No segment written (no checkpoint due); the duplicate-label check reads <= 1.
        assert not any(kind == "put" and "_segments" in k for kind, k in store.log)
        assert sum("_segments" in k for _, k in store.log) <= 1
    assert written[2000] <= written[100] + 2048, written
    assert written[2000] < 16 * 1024, written


def test_lookups_load_only_the_segments_holding_the_label() -> None:
    inner, _ = _dataset_of(5000)
    store = CountingStore(inner)
    ds = Dataset.open(store, "ds")
    assert store.total <= 3  # head (root inline), probe, pointer HEAD
    store.reset()
    doc = ds.document
    assert "p=4321" not in doc.partitions
    label = next(lbl for lbl in doc.files if lbl.startswith("p=4321/"))
    store.reset()
    doc = Dataset.open(store, "ds").document
    store.reset()
    assert label in doc.partitions
    assert doc.files[label].rows == 1
    segs = [k for kind, k in store.log if kind == "get" and "/_segments/" in k]
    assert len(segs) == 1
    store.reset()
    assert len(list(doc.partitions)) == 5000
    assert len({k for _, k in store.log}) == 2  # 5,000 labels: 3 segments, one was loaded


def _as_format_1(store: MemoryStore, newest: int) -> None:
    """Rewrite dataset ds as format 1 wrote it: full documents, the pointer, nothing else."""
    docs = {k: Dataset.open(store, "ds", version=k).document for k in range(newest + 1)}
    for k, doc in docs.items():
        store.put(version_key("ds", k), encode_document(doc))
    store.put(metadata_key("ds"), encode_document(docs[newest]))
    store.delete(head_key("ds"))
    for meta in list(store.list("ds/_checkpoints")):
        store.delete(meta.key)


def test_a_format_1_dataset_migrates_on_its_first_commit() -> None:
    """Full version documents (format 1) stay readable; the first commit writes an entry,
    a checkpoint at its version and the head."""
    store = MemoryStore()
    ds = _appends(3, store)
    _as_format_1(store, 3)
    assert _rows(Dataset.open(store, "ds")) == [0, 1, 2, 3]
    ds = Dataset.open(store, "ds").append(pa.table({"p": [1], "v": [4]}))
    assert list_checkpoints(store, "ds") == [4]
    assert store.exists(head_key("ds"))
    assert "parquetry_entry" in json.loads(store.get(version_key("ds", 4)))
    for k in range(5):
        assert _rows(Dataset.open(store, "ds", version=k)) == list(range(k + 1))
    assert [h.version for h in ds.history()] == [4, 3, 2, 1, 0]


def test_missing_or_corrupted_head_falls_back() -> None:
    store = MemoryStore()
    _appends(3, store)
    write_checkpoint(store, Dataset.open(store, "ds", version=2).document)
    store.put(head_key("ds"), b"not a head")
    with pytest.warns(PointerCorruptedWarning, match="head"):
        assert _rows(Dataset.open(store, "ds")) == [0, 1, 2, 3]
    store.delete(head_key("ds"))  # no head: the pointer, rolled forward
    assert _rows(Dataset.open(store, "ds")) == [0, 1, 2, 3]
    ds = Dataset.open(store, "ds").append(pa.table({"p": [0], "v": [4]}))
    assert decode_head(store.get(head_key("ds")), "h")["number"] == 4
    assert _rows(ds) == [0, 1, 2, 3, 4]


def test_a_lagging_head_is_rolled_forward_and_never_moves_back() -> None:
    store = MemoryStore()
    _appends(2, store)
    old = store.get(head_key("ds"))
    Dataset.open(store, "ds").append(pa.table({"p": [0], "v": [3]}))
    store.put(head_key("ds"), old)  # a head write that "lost" (or lags)
    assert _rows(Dataset.open(store, "ds")) == [0, 1, 2, 3]
    head_module.write_head(store, "ds", 1, old)  # an older head never replaces a newer one
    assert decode_head(store.get(head_key("ds")), "h")["number"] == 2


def test_entry_of_records_the_change_not_the_state() -> None:
    store = MemoryStore()
    ds = _appends(1, store)
    base = ds.document
    assert base.change is None
    after = Dataset.open(store, "ds").update(
        pa.table({"p": [5], "v": [9]}), delete_scope=[{"p": 0}, {"p": 1}]
    )
    body = json.loads(store.get(version_key("ds", after.version)))["parquetry_entry"]
    assert body["replace_all"] is True
    assert body["remove"] == []
    assert len(body["add"]) == 1
    assert isinstance(Change(), Change)
    assert entry_of(None, after.document)["replace_all"] is True
    assert store.exists(checkpoint_key("ds", 0)) is False
    assert str(uuid_module.UUID(int=0))  # keep imports honest


def test_restore_extends_the_newest_lineage_not_the_restored_one() -> None:
    """Regression: a restore's state came with the restored version's lineage, so the head
    it wrote did not lead to its number (read as corrupted, with a warning)."""
    import warnings

    store = MemoryStore()
    _appends(3, store).restore(1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        reopened = Dataset.open(store, "ds")
    assert (reopened.version, _rows(reopened)) == (4, [0, 1])
    head = decode_head(store.get(head_key("ds")), "h")
    assert head["number"] == 4
    assert _rows(reopened.append(pa.table({"p": [0], "v": [7]}))) == [0, 1, 7]


def test_a_plan_on_the_leading_partition_key_loads_only_its_segments() -> None:
    inner, _ = _dataset_of(5000)
    store = CountingStore(inner)
    ds = Dataset.open(store, "ds")
    opened = store.total
    plan = ds.plan([[("p", "==", 4321)]])
    assert [f.partition for f in plan.files] == [(("p", 4321),)]
    segs = [k for _, k in store.log if "/_segments/" in k]
    assert len(segs) == 1
    assert plan.requests == opened + 1
    assert ds.read(predicates=[[("p", "==", 4321)]]).column("v").to_pylist() == [4321]
    assert plan.summary()  # the pruned partitions are still counted (lazily)


def test_checkpoint_state_writes_root_pointer_and_head() -> None:
    from parquetry.dataset.commit import checkpoint_state

    store = MemoryStore()
    ds = _appends(2, store)
    doc = checkpoint_state(store, "ds", ds.document, "json")
    assert list_checkpoints(store, "ds") == [2]
    head = decode_head(store.get(head_key("ds")), "h")
    assert (head["checkpoint"], head["tail"], head["pointer"]["number"]) == (2, [], 2)
    assert doc.lineage is not None
    assert doc.lineage.checkpoint == 2
    assert _rows(Dataset.open(store, "ds")) == [0, 1, 2]


def test_a_migrating_commit_failing_at_any_call_loses_nothing() -> None:
    """FaultyStore fails the Nth call of the first (migrating) commit, for every N, also
    after performing a write (a lost acknowledgement): the dataset is the old or the new
    version, every version opens, and the next commit works."""
    from parquetry.errors import ParquetryError
    from parquetry.testing import FaultyStore
    from parquetry.testing.stores import KINDS

    outcomes = set()
    for after in (False, True):
        for n in range(1, 40):
            store = MemoryStore()
            _appends(2, store)
            _as_format_1(store, 2)
            kinds = ("put",) if after else KINDS
            faulty = FaultyStore(store, fail_on=n, after=after, kinds=kinds)
            try:
                Dataset.open(faulty, "ds").append(pa.table({"p": [1], "v": [3]}))
                outcomes.add("ok")
            except ParquetryError:
                outcomes.add("failed")
            rows = _rows(Dataset.open(store, "ds"))
            assert rows in ([0, 1, 2], [0, 1, 2, 3]), (after, n, rows)
            for k in range(Dataset.open(store, "ds").version + 1):
                assert _rows(Dataset.open(store, "ds", version=k)) == list(range(k + 1))
            ds = Dataset.open(store, "ds").append(pa.table({"p": [2], "v": [9]}))
            assert _rows(ds) == [*rows, 9]
            assert _rows(Dataset.open(store, "ds")) == [*rows, 9]
    assert outcomes == {"ok", "failed"}


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("rows_added", -1, "rows_added"),
        ("parameters", {"k": 3}, "parameters['k']"),
        ("committed_at", "yesterday", "committed_at"),
    ],
)
def test_a_bad_entry_is_metadata_corrupted_naming_the_field(
    field: str, value: object, problem: str
) -> None:
    from parquetry.errors import MetadataCorrupted

    store = MemoryStore()
    _appends(1, store)
    raw = json.loads(store.get(version_key("ds", 1)))
    raw["parquetry_entry"]["version"][field] = value
    store.put(version_key("ds", 1), json.dumps(raw).encode())
    store.delete(head_key("ds"))
    with pytest.raises(MetadataCorrupted, match=re.escape(problem)) as info:
        Dataset.open(store, "ds", version=1)
    assert info.value.key == version_key("ds", 1)
    store.put(version_key("ds", 1), b'{"parquetry_entry": {"format": 2, "version": NaN}}')
    with pytest.raises(MetadataCorrupted):
        Dataset.open(store, "ds", version=1)


def test_a_reader_walking_entries_while_gc_tombstones_them_lists_checkpoints_again() -> None:
    """GC checkpoints the oldest version it keeps, then tombstones older entries. A reader of
    that version that listed checkpoints just before (none) meets the tombstones in its walk:
    it lists again and finds the checkpoint (before: MetadataCorrupted "needs version 0")."""
    from collections.abc import Iterator

    from parquetry.dataset.format2 import load_state
    from parquetry.dataset.gc import garbage_collect
    from parquetry.store.base import ObjectMeta

    class GcDuringList(MemoryStore):
        armed = raced = False

        def list(self, prefix: str = "") -> Iterator[ObjectMeta]:
            found = list(super().list(prefix))
            if "_checkpoints/" in prefix and self.armed and not self.raced:
                self.raced = True
                garbage_collect(self, "r", retention=0)  # keeps only the newest: v3
            return iter(found)

    store = GcDuringList()
    ds = Dataset.create(store, "r", pa.table({"x": [0]}))
    for i in range(1, 4):
        ds = ds.append(pa.table({"x": [i]}))
    assert ds.version == 3
    assert list_checkpoints(store, "r") == []
    store.armed = True
    state = load_state(store, "r", 3)
    assert store.raced
    assert list_checkpoints(store, "r") == [3]
    assert state.version is not None
    assert state.version.number == 3
    assert Dataset.open(store, "r").read().column("x").to_pylist() == [0, 1, 2, 3]
