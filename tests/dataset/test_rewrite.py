"""The rewrite engine (dataset/rewrite.py): streaming copy-on-write, conflicts, faults."""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from parquetry.dataset import Dataset
from parquetry.dataset.rewrite import FileEdit, plan_rewrite, rewrite, rewrite_files
from parquetry.errors import CommitConflict, InvalidArgument, ParquetryError, SchemaMismatch
from parquetry.store import MemoryStore
from parquetry.testing import CountingStore, FaultyStore

from .ops_oracle import assert_index_exact, orphan_data_files, rows

BASE = pa.table(
    {
        "p": ["a", "a", "a", "b", "b", "c"],
        "k": pa.array([1, 2, 3, 4, 5, 6], pa.int64()),
        "v": pa.array([10, 20, 30, 40, 50, 60], pa.int64()),
    }
)


def _make(store: Any, name: str = "d") -> Dataset:
    return Dataset.create(store, name, BASE, partition_on=["p"], secondary_indices=["k"])


def _label(ds: Dataset, p: str) -> str:
    (label,) = [lbl for lbl in ds.document.partitions if lbl.startswith(f"p={p}/")]
    return label


def _drop_even(label: str, table: pa.Table) -> FileEdit | None:
    even = pc.equal(pc.bit_wise_and(table["k"], 1), 0)
    hits = pc.sum(even).as_py() or 0
    if not hits:
        return None
    return FileEdit(label, table.filter(pc.invert(even)), rows_removed=hits)


def _expected(table: pa.Table, *, gone_p: str | None = None) -> Counter[tuple[Any, ...]]:
    out = Counter(r for r in rows(table) if r[1] % 2)
    return Counter({r: n for r, n in out.items() if r[0] != gone_p})


def test_rewrite_edits_drops_and_records_metrics() -> None:
    store = MemoryStore()
    ds = _make(store)
    seen: list[tuple[int, int]] = []
    labels = [_label(ds, "a"), _label(ds, "b")]
    state = rewrite_files(
        ds,
        labels,
        _drop_even,
        drop=[_label(ds, "c")],
        operation="delete",
        parameters={"predicate": "k even", "n": 2},
        metrics={"rows_deleted": 1},  # the dropped file's row
        progress=lambda done, total: seen.append((done, total)),
    )
    out = Dataset(store, state)
    assert rows(out.read()) == _expected(BASE, gone_p="c")
    assert seen == [(0, 2), (1, 2), (2, 2)]
    info = out.info
    assert info is not None
    assert info.operation == "delete"
    assert info.parameters == {"predicate": "k even", "n": "2"}
    assert dict(info.extra) == {"rows_deleted": 3, "rows_copied": 3, "files_rewritten": 2}
    assert (info.files_removed, info.files_added, info.rows_removed) == (3, 2, 6)
    # recorded in the stored version, shown by history, checked by the reader
    (entry,) = Dataset.open(store, "d").history(limit=1)
    assert entry.metrics["rows_deleted"] == 3
    assert entry.metrics["files_removed"] == 3
    stored = [Dataset.open(store, "d", version=n).info for n in (0, 1)]
    assert [dict(i.extra) for i in stored if i is not None] == [{}, dict(info.extra)]
    assert_index_exact(out, "k")
    assert orphan_data_files(store, "d") == set()


def test_a_version_without_metrics_keeps_its_old_document_bytes() -> None:
    store = MemoryStore()
    ds = _make(store)
    assert "metrics" not in ds.info.to_json()  # type: ignore[union-attr]
    ds = ds.append(BASE)
    assert "metrics" not in ds.info.to_json()  # type: ignore[union-attr]


def test_nothing_to_rewrite_commits_nothing() -> None:
    store = MemoryStore()
    ds = _make(store)
    state = rewrite_files(ds, [_label(ds, "c")], lambda _l, _t: None, operation="delete")
    assert state.number == 0
    assert Dataset.open(store, "d").version == 0


def test_dry_run_reads_but_writes_nothing() -> None:
    counting = CountingStore(MemoryStore())
    ds = _make(counting)
    counting.reset()
    plan = plan_rewrite(
        ds, [_label(ds, p) for p in "abc"], _drop_even, drop=[], metrics={"rows_updated": 0}
    )
    assert set(plan.rewritten) == {_label(ds, "a"), _label(ds, "b"), _label(ds, "c")}
    assert plan.unchanged == ()
    assert plan.dropped == ()
    assert dict(plan.metrics) == {
        "rows_deleted": 3,
        "rows_copied": 3,
        "files_rewritten": 2,
        "rows_updated": 0,
    }
    assert not any(kind in counting.counts for kind in ("put", "delete", "delete_many"))
    assert Dataset.open(counting, "d").version == 0


def test_a_lost_race_is_re_applied_on_the_new_base() -> None:
    store = MemoryStore()
    stale = _make(store)
    labels = [_label(stale, p) for p in "abc"]
    # meanwhile: an append into a partition being rewritten, and a disjoint rewrite
    more = pa.table({"p": ["a", "c"], "k": [8, 9], "v": [0, 0]})
    other = stale.append(more)
    rewrite_files(
        other,
        [labels[2]],
        lambda lbl, t: FileEdit(lbl, t.set_column(2, "v", pa.array([61], pa.int64()))),
        operation="update_where",
    )
    state = rewrite_files(stale, labels[:2], _drop_even, operation="delete")
    out = Dataset(store, state)
    assert out.version == 3
    # rows the stale rewrite did not read (the append's k == 8) stay, as in Delta
    want = Counter([("a", 1, 10), ("a", 3, 30), ("b", 5, 50), ("c", 6, 61)])
    assert rows(out.read()) == want + Counter([("a", 8, 0), ("c", 9, 0)])
    assert_index_exact(out, "k")
    assert orphan_data_files(store, "d") == set()


def test_a_concurrent_removal_of_a_file_read_conflicts_naming_it() -> None:
    store = MemoryStore()
    stale = _make(store)
    a, b = _label(stale, "a"), _label(stale, "b")
    rewrite_files(stale, [], _drop_even, drop=[b], operation="delete")
    with pytest.raises(CommitConflict, match=b) as err:
        rewrite_files(stale, [a, b], _drop_even, operation="delete")
    assert "concurrent commit removed 1 of the files" in str(err.value)
    assert err.value.key == stale.document.partitions[b]["table"]
    assert Dataset.open(store, "d").version == 1
    assert orphan_data_files(store, "d") == set()  # its rewritten files were abandoned
    assert not list(store.list("d/_intents/"))


def test_a_failing_edit_or_bad_table_abandons_what_was_written() -> None:
    store = MemoryStore()
    ds = _make(store)
    labels = [_label(ds, p) for p in "abc"]

    def boom(label: str, table: pa.Table) -> FileEdit | None:
        if label == labels[2]:
            raise ParquetryError("edit failed")
        return _drop_even(label, table)

    with pytest.raises(ParquetryError, match="edit failed"):
        rewrite_files(ds, labels, boom, operation="delete")
    assert orphan_data_files(store, "d") == set()
    assert not list(store.list("d/_intents/"))

    def retyped(label: str, table: pa.Table) -> FileEdit:
        return FileEdit(label, table.set_column(2, "v", table["v"].cast(pa.string())))

    with pytest.raises(SchemaMismatch):
        rewrite_files(ds, labels, retyped, operation="update_where")
    with pytest.raises(InvalidArgument, match="no partition label 'p=zz/1'"):
        rewrite_files(ds, ["p=zz/1"], _drop_even, operation="delete")
    with pytest.raises(InvalidArgument, match="both rewritten and dropped"):
        rewrite_files(ds, labels, _drop_even, drop=labels[:1], operation="delete")
    with pytest.raises(InvalidArgument, match="expected FileEdit"):
        rewrite_files(ds, labels, lambda lbl, t: FileEdit("x", t), operation="delete")
    assert Dataset.open(store, "d").version == 0
    assert orphan_data_files(store, "d") == set()


def test_rows_whose_partition_value_changes_move_to_their_partition() -> None:
    store = MemoryStore()
    ds = _make(store)

    def move(label: str, table: pa.Table) -> FileEdit:
        return FileEdit(label, table.set_column(0, "p", pa.repeat(pa.scalar("z"), len(table))))

    out = Dataset(store, rewrite_files(ds, [_label(ds, "b")], move, operation="update_where"))
    assert {lbl.split("/")[0] for lbl in out.document.partitions} == {"p=a", "p=c", "p=z"}
    assert rows(out.read(predicates=[[("p", "==", "z")]])) == Counter([("z", 4, 40), ("z", 5, 50)])
    assert_index_exact(out, "k")


def _fault_op(store: Any) -> None:
    ds = Dataset.open(store, "f")
    labels = [_label(ds, p) for p in "ab"]
    rewrite_files(ds, labels, _drop_even, drop=[_label(ds, "c")], operation="delete")


def test_every_failing_store_call_of_a_rewrite_leaves_the_old_or_new_version() -> None:
    def setup() -> MemoryStore:
        inner = MemoryStore(uuid.uuid4().hex)
        _make(inner, "f")
        return inner

    before, after = rows(BASE), _expected(BASE, gone_p="c")
    counter = FaultyStore(setup())
    _fault_op(counter)
    total = counter.calls
    assert total > 10
    outcomes: set[str] = set()
    for n in range(1, total + 1):
        for lost_ack in (False, True):
            inner = setup()
            faulty = FaultyStore(
                inner, fail_on=n, after=lost_ack, **({"kinds": ("put",)} if lost_ack else {})
            )
            try:
                _fault_op(faulty)
                outcomes.add("ok")
            except ParquetryError:
                outcomes.add("failed")
            ds = Dataset.open(inner, "f")
            got = rows(ds.read())
            assert got in (before, after), (n, lost_ack)
            assert (ds.version == 0) == (got == before), (n, lost_ack)
            assert_index_exact(ds, "k")
            grown = ds.append(pa.table({"p": ["d"], "k": [7], "v": [0]}))
            assert grown.read().num_rows == sum(got.values()) + 1
    assert outcomes == {"ok", "failed"}


def test_small_outputs_are_written_together_and_concurrency_changes_nothing() -> None:
    outcomes = []
    for concurrency, buffer_bytes in ((1, 0), (1, 4 << 20), (3, 0), (3, 4 << 20)):
        store = MemoryStore()
        ds = _make(store)
        for _ in range(3):
            ds = ds.append(BASE)
        labels = list(ds.document.partitions)
        assert len(labels) == 12
        seen: list[tuple[int, int]] = []
        result = rewrite(
            ds,
            labels,
            _drop_even,
            operation="delete",
            concurrency=concurrency,
            buffer_bytes=buffer_bytes,
            progress=lambda d, t: seen.append((d, t)),  # noqa: B023 - called within the loop
        )
        out = Dataset(store, result.state)
        assert seen == [(i, 12) for i in range(13)]
        assert result.plan.rewritten == tuple(labels)  # in order, whatever the concurrency
        assert set(result.plan.emptied) == {lbl for lbl in labels if lbl.startswith("p=c/")}
        assert rows(out.read()) == Counter(dict.fromkeys(_expected(BASE), 4))
        assert_index_exact(out, "k")
        # one output file per input file, or (buffered) per partition
        assert len(out.document.partitions) == (8 if buffer_bytes == 0 else 2)
        outcomes.append(dict(result.plan.metrics))
    assert all(m == outcomes[0] for m in outcomes)


def test_a_failure_with_concurrent_files_abandons_every_written_file() -> None:
    store = MemoryStore()
    ds = _make(store)
    for _ in range(3):
        ds = ds.append(BASE)
    labels = list(ds.document.partitions)

    def boom(label: str, table: pa.Table) -> FileEdit | None:
        if label == labels[7]:
            raise ParquetryError("edit failed")
        return _drop_even(label, table)

    with pytest.raises(ParquetryError, match="edit failed"):
        rewrite(ds, labels, boom, operation="delete", concurrency=3, buffer_bytes=0)
    assert orphan_data_files(store, "d") == set()
    assert not list(store.list("d/_intents/"))
    assert Dataset.open(store, "d").version == 3
    with pytest.raises(InvalidArgument, match="concurrency"):
        rewrite(ds, labels, boom, operation="delete", concurrency=0)


def test_a_recorded_metric_that_is_not_an_int_makes_the_document_unreadable() -> None:
    import json

    from parquetry.dataset.naming import metadata_key
    from parquetry.errors import PointerCorruptedWarning

    store = MemoryStore()
    ds = _make(store)
    rewrite_files(ds, [_label(ds, "a")], _drop_even, operation="delete")
    doc = json.loads(store.get(metadata_key("d")))
    assert doc["parquetry"]["version"]["metrics"]["rows_deleted"] == 1
    doc["parquetry"]["version"]["metrics"]["rows_deleted"] = "one"
    store.put(metadata_key("d"), json.dumps(doc).encode())
    # the pointer is refused (named); the version entries still say what the commit did
    with pytest.warns(PointerCorruptedWarning, match=r"version\.metrics\['rows_deleted'\]"):
        reopened = Dataset.open(store, "d")
    assert reopened.info is not None
    assert reopened.info.extra["rows_deleted"] == 1


def test_small_files_are_rewritten_together_large_ones_alone() -> None:
    """concurrency=2 overlaps two files only while their estimated decoded sizes fit
    ``parallel_bytes`` together: a large file keeps the memory bound of one file."""
    import threading
    import time

    from parquetry.dataset.rewrite_walk import walk

    store = MemoryStore()
    ds = _make(store).append(BASE)
    labels = list(ds.document.partitions)
    lock = threading.Lock()
    running, peak = [0], [0]
    barrier = threading.Barrier(2, timeout=10)

    def tracked(wait_for_other: bool) -> Any:
        def edit(label: str, table: pa.Table) -> FileEdit | None:
            with lock:
                running[0] += 1
                peak[0] = max(peak[0], running[0])
            if wait_for_other:
                barrier.wait()  # broken (raises) unless two files are edited at once
            else:
                time.sleep(0.02)
            with lock:
                running[0] -= 1
            return _drop_even(label, table)

        return edit

    walk(ds, labels[:2], tracked(True), None, lambda _: None, 2, parallel_bytes=1 << 20)
    assert peak[0] == 2
    peak[0] = 0
    done = walk(ds, labels, tracked(False), None, lambda _: None, 2, parallel_bytes=0)
    assert peak[0] == 1
    assert set(done[0]) | set(done[1]) == set(labels)
