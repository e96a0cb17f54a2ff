"""Dataset.compact: rows unchanged, files packed, indices exact, conflicts, faults, memory."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from parquetry.dataset import Dataset
from parquetry.dataset.compact_plan import CompactionPlan, pack
from parquetry.errors import CommitConflict, InvalidArgument, ParquetryError, PredicateError
from parquetry.store import LocalStore, MemoryStore, Store
from parquetry.testing import FaultyStore
from parquetry.testing.stores import KINDS


def _chunk(start: int, n: int) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table(
        {
            "p": pa.array([i % 3 for i in ids], pa.int64()),
            "id": pa.array(ids, pa.int64()),
            "tag": [f"t{i % 7}" for i in ids],
            "v": [float(i) / 3 for i in ids],
        }
    )


def _many_small(store: Store, appends: int = 6, rows: int = 12) -> Dataset:
    ds = Dataset.create(store, "c", _chunk(0, rows), partition_on=["p"], secondary_indices=["tag"])
    for i in range(1, appends):
        ds = ds.append(_chunk(i * rows, rows))
    return ds


def _sorted(table: pa.Table) -> pa.Table:
    return table.select(sorted(table.column_names)).sort_by([("id", "ascending")])


def _index_oracle(ds: Dataset, column: str) -> set[tuple[object, str]]:
    """(value, label) pairs rebuilt from the data of every file (independent of the index)."""
    pairs = set()
    for f in ds.plan().files:
        values = pc.unique(ds.read_file(f, columns=[column]).column(column)).drop_null()
        pairs |= {(v, f.label) for v in values.to_pylist()}
    return pairs


def _pairs(ds: Dataset, column: str) -> set[tuple[object, str]]:
    t = ds.index_pairs(column)
    return set(zip(t.column("value").to_pylist(), t.column("label").to_pylist(), strict=True))


def _partition_files(ds: Dataset) -> dict[tuple, int]:
    out: dict[tuple, int] = {}
    for f in ds.plan().files:
        out[f.partition] = out.get(f.partition, 0) + 1
    return out


def test_compact_packs_small_files_keeps_rows_and_indices_exact() -> None:
    ds = _many_small(MemoryStore())
    before = _sorted(ds.read())
    assert _partition_files(ds) == {(("p", p),): 6 for p in range(3)}
    plan = ds.compact(target_file_size=1 << 20, dry_run=True)
    assert isinstance(plan, CompactionPlan)
    assert plan.summary()["files_before"] == 18
    assert plan.summary()["files_after"] == 3
    assert Dataset.open(ds.store, "c").version == ds.version  # the dry run wrote nothing
    out = ds.compact(target_file_size=1 << 20)
    assert out.version == ds.version + 1
    assert _sorted(out.read()).equals(before)
    assert _partition_files(out) == {(("p", p),): 1 for p in range(3)}
    assert _pairs(out, "tag") == _index_oracle(out, "tag")
    assert (
        out.read(predicates=[[("tag", "==", "t3")]]).num_rows
        == before.filter(pc.equal(before.column("tag"), "t3")).num_rows
    )
    info = out.info
    assert info is not None
    assert info.operation == "compact"
    assert info.parameters["target_file_size"] == str(1 << 20)
    assert (info.files_removed, info.files_added) == (18, 3)
    assert info.rows_added == info.rows_removed == before.num_rows
    hist = out.history(limit=1)[0]
    assert hist.operation == "compact"
    assert hist.metrics["files_removed"] == 18
    assert hist.metrics["files_compacted"] == 18
    assert hist.metrics["partitions_compacted"] == 3
    assert hist.metrics["bytes_compacted"] == info.bytes_removed
    # Nothing left to do: no new version.
    assert out.compact(target_file_size=1 << 20).version == out.version
    # Old versions still read their own files.
    assert _sorted(Dataset.open(ds.store, "c", version=ds.version).read()).equals(before)


def test_large_files_single_small_files_and_unselected_partitions_stay() -> None:
    store = MemoryStore()
    ds = Dataset.create(store, "c", _chunk(0, 3000), partition_on=["p"])  # one big file each
    ds = ds.append(_chunk(3000, 6).filter(pc.equal(pc.field("p"), 0)))  # one small file in p=0
    for i in range(3):
        ds = ds.append(_chunk(4000 + 6 * i, 6).filter(pc.not_equal(pc.field("p"), 0)))
    sizes = {f.label: f.size for f in ds.plan().files}
    target = min(f.size for f in ds.plan().files if (f.rows or 0) >= 1000)
    # The big files are not below the target: never touched.
    before = _sorted(ds.read())
    plan = ds.compact(target_file_size=target, dry_run=True)
    touched = plan.labels
    assert all(sizes[lbl] < target for lbl in touched)
    assert {b.partition for b in plan.bins} == {(("p", 1),), (("p", 2),)}
    # Only partition 2 selected by a partition predicate.
    only2 = ds.compact(target_file_size=target, partitions=[[("p", "==", 2)]])
    kept = {f.label for f in only2.plan().files}
    p2 = {f.label for f in ds.plan().files if f.partition == (("p", 2),)}
    assert set(sizes) - p2 <= kept  # every file of other partitions untouched
    assert _sorted(only2.read()).equals(before)
    assert only2.info is not None
    assert only2.info.parameters["partitions"] == "(p == 2)"
    # min_files: partition 1 has 4 files of which 3 small: min_files=4 leaves it alone.
    assert ds.compact(target_file_size=target, partitions=[[("p", "==", 1)]], min_files=4) is ds
    with pytest.raises(PredicateError, match="'id' is not a partition key"):
        ds.compact(partitions=[[("id", "==", 1)]])
    with pytest.raises(InvalidArgument, match="target_file_size"):
        ds.compact(target_file_size=0)
    with pytest.raises(InvalidArgument, match="partition key"):
        ds.compact(sort_by="p")


def test_sort_by_sorts_each_output() -> None:
    store = MemoryStore()
    ds = Dataset.create(
        store, "c", _chunk(0, 30).sort_by([("id", "descending")]), partition_on=["p"]
    )
    for i in range(1, 4):
        ds = ds.append(_chunk(i * 30, 30).sort_by([("id", "descending")]))
    out = ds.compact(target_file_size=1 << 20, sort_by=[("v", "ascending")])
    assert _sorted(out.read()).equals(_sorted(ds.read()))
    for f in out.plan().files:
        v = out.read_file(f).column("v").to_pylist()
        assert v == sorted(v)
        assert len(v) == 40
    assert out.info is not None
    assert out.info.parameters["sort_by"] == "v ASC"


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(1, 300), max_size=40),
    st.integers(20, 400),
)
def test_pack_is_first_fit_decreasing_property(sizes: list[int], target: int) -> None:
    bins = pack(sizes, target)
    used = [i for b in bins for i in b]
    assert len(used) == len(set(used))  # each file in at most one output
    for b in bins:
        assert len(b) >= 2
        assert sum(sizes[i] for i in b) <= target
        assert all(sizes[i] < target for i in b)
    # First-fit decreasing leaves no two single small files that would fit together.
    alone = sorted(sizes[i] for i in range(len(sizes)) if i not in used and sizes[i] < target)
    assert len(alone) < 2 or alone[0] + alone[1] > target


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(st.integers(1, 60), min_size=1, max_size=8), st.integers(1, 8))
def test_compact_random_file_sizes_property(rows: list[int], kib: int) -> None:
    store = MemoryStore()
    ds = Dataset.create(
        store, "c", _chunk(0, rows[0]), partition_on=["p"], secondary_indices=["tag"]
    )
    start = rows[0]
    for n in rows[1:]:
        ds = ds.append(_chunk(start, n))
        start += n
    before = _sorted(ds.read())
    plan = ds.compact(target_file_size=kib << 10, dry_run=True)
    out = ds.compact(target_file_size=kib << 10)
    assert _sorted(out.read()).equals(before)
    assert len(out.plan().files) == plan.files_after
    assert _pairs(out, "tag") == _index_oracle(out, "tag")


def test_compaction_and_concurrent_append_both_land() -> None:
    store = MemoryStore()
    ds = _many_small(store)
    # The append lands between planning (on ds) and the compaction's commit point.
    Dataset.open(store, "c").append(_chunk(1000, 9))
    out = ds.compact(target_file_size=1 << 20)
    assert out.version == ds.version + 2
    expect = _sorted(pa.concat_tables([ds.read(), _chunk(1000, 9)]))
    assert _sorted(Dataset.open(store, "c").read()).equals(expect)
    assert _pairs(out, "tag") == _index_oracle(out, "tag")
    # Real threads, repeatedly: every append and every compaction lands.
    for rnd in range(3):
        base = Dataset.open(store, "c")
        errors: list[BaseException] = []

        def append(k: int, rnd: int = rnd, errors: list[BaseException] = errors) -> None:
            try:
                Dataset.open(store, "c").append(_chunk(10_000 + 100 * rnd + 10 * k, 5))
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=append, args=(k,)) for k in range(2)]
        for t in threads:
            t.start()
        base.compact(target_file_size=1 << 20)
        for t in threads:
            t.join()
        assert not errors
    final = Dataset.open(store, "c")
    assert final.read().num_rows == expect.num_rows + 3 * 2 * 5
    assert len(set(final.read().column("id").to_pylist())) == final.read().num_rows
    assert _pairs(final, "tag") == _index_oracle(final, "tag")
    ops = [h.operation for h in final.history()]
    assert ops.count("compact") == 4


def test_compaction_conflicts_when_an_input_was_removed() -> None:
    store = MemoryStore()
    ds = _many_small(store)
    gone = sorted(f.key for f in ds.plan().files if f.partition == (("p", 1),))
    Dataset.open(store, "c").update(delete_scope=[{"p": 1}])
    before_keys = {m.key for m in store.list("c/table/")}
    with pytest.raises(CommitConflict, match="removed 6 of the files") as info:
        ds.compact(target_file_size=1 << 20)
    assert any(k in str(info.value) for k in gone)
    # Nothing committed, its outputs deleted.
    assert Dataset.open(store, "c").info.operation == "update"  # type: ignore[union-attr]
    assert {m.key for m in store.list("c/table/")} == before_keys
    # A row-level delete rewriting one input of partition 2 conflicts the same way.
    stale = Dataset.open(store, "c")
    victim = next(f for f in stale.plan().files if f.partition == (("p", 2),))
    one_id = stale.read_file(victim).column("id")[0].as_py()
    Dataset.open(store, "c").delete_where([[("id", "==", one_id)]])
    with pytest.raises(CommitConflict, match="removed 1 of the files") as info:
        stale.compact(target_file_size=1 << 20)
    assert victim.key in str(info.value)
    # Two compactions of the same files: the first wins, the second conflicts.
    first, second = Dataset.open(store, "c"), Dataset.open(store, "c")
    rows = _sorted(first.read())
    first.compact(target_file_size=1 << 20)
    with pytest.raises(CommitConflict):
        second.compact(target_file_size=1 << 20)
    assert _sorted(Dataset.open(store, "c").read()).equals(rows)


def _count_calls() -> int:
    inner = MemoryStore(uuid.uuid4().hex)
    _many_small(inner, appends=3, rows=6)
    counter = FaultyStore(inner)
    Dataset.open(counter, "c").compact(target_file_size=1 << 20)
    return counter.calls


@pytest.mark.parametrize("after", [False, True], ids=["fail", "lost-ack"])
def test_every_store_call_failing_leaves_old_or_new_version(after: bool) -> None:
    total = _count_calls()
    assert total > 10
    outcomes = set()
    for n in range(1, total + 1):
        inner = MemoryStore(uuid.uuid4().hex)
        ds = _many_small(inner, appends=3, rows=6)
        rows = _sorted(ds.read())
        faulty = FaultyStore(inner, fail_on=n, after=after, kinds=("put",) if after else KINDS)
        try:
            Dataset.open(faulty, "c").compact(target_file_size=1 << 20)
            outcomes.add("ok")
        except ParquetryError:
            outcomes.add("failed")
        now = Dataset.open(inner, "c")
        assert now.version in (ds.version, ds.version + 1), n
        assert _sorted(now.read()).equals(rows), n
        assert len(now.plan().files) in (9, 3), n
        assert _pairs(now, "tag") == _index_oracle(now, "tag"), n
        assert now.append(_chunk(500, 3)).read().num_rows == rows.num_rows + 3
    assert outcomes == {"ok", "failed"}


MEMORY_CHILD = """
import sys
from parquetry.dataset import Dataset
from parquetry.store import LocalStore


def status(field):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(field))


import pyarrow as pa
from parquetry.store import MemoryStore

# Warm up on a tiny dataset: imports, pools and caches are not the compaction's memory.
tiny = Dataset.create(MemoryStore(), "t", pa.table({"i": [1], "x": [0.5]}))
tiny.append(pa.table({"i": [2], "x": [1.5]})).compact()
ds = Dataset.open(LocalStore(sys.argv[1]), "m")
base = status("VmRSS:")
out = ds.compact(target_file_size=int(sys.argv[2]))
growth, arrow_peak = status("VmHWM:") - base, pa.default_memory_pool().max_memory()
print(len(ds.plan().files), len(out.plan().files), out.read(columns=["i"]).num_rows)
print(growth)
print(arrow_peak)
"""


def test_compaction_memory_is_bounded(tmp_path: Path) -> None:
    """128 MB of data (decoded; 85 MB in 32 files): a compaction with an 8 MiB target
    allocates at most about 4 targets in pyarrow (34 MiB measured: the encoded output and
    its growth, one row-group buffer, the read-ahead) and grows the peak RSS of a warmed-up
    process by 65 MiB (16 MiB target: 51 and 102 MiB), less than the data.

    Under RLIMIT_AS (system allocator, two arenas): test_ops_memory_compact.py; jemalloc
    reserves address space up front, so this test measures pyarrow's own allocations."""
    import numpy as np

    store = LocalStore(tmp_path)
    rng = np.random.default_rng(1)
    rows = 250_000  # 4 MB per file decoded
    ds = None
    for k in range(32):
        t = pa.table({"i": pa.array(np.arange(k * rows, (k + 1) * rows)), "x": rng.random(rows)})
        ds = Dataset.create(store, "m", t) if ds is None else ds.append(t)
    assert ds is not None
    target = 8 << 20
    proc = subprocess.run(
        [sys.executable, "-c", MEMORY_CHILD, str(tmp_path), str(target)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        # jemalloc and glibc's per-thread arenas keep freed pages: the system allocator with
        # one arena shows what is in use.
        env={**os.environ, "ARROW_DEFAULT_MEMORY_POOL": "system", "MALLOC_ARENA_MAX": "1"},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    counts, growth, arrow_peak = proc.stdout.splitlines()
    before, after, total = map(int, counts.split())
    assert (before, total) == (32, 32 * rows)
    assert after <= before // 2
    assert int(growth) < 12 * target, f"peak RSS grew by {int(growth) >> 20} MiB"
    # pyarrow's own peak allocation (buffers, the encoded output): about 4 targets.
    assert int(arrow_peak) < 5 * target, f"pyarrow peak {int(arrow_peak) >> 20} MiB"


def test_a_corrupt_input_fails_naming_it_and_commits_nothing() -> None:
    from parquetry.errors import InvalidFormat

    store = MemoryStore()
    ds = _many_small(store, appends=3, rows=6)
    victim = ds.plan().files[1]
    data = store.get(victim.key)
    store.put(victim.key, data[:8] + b"\x00" * (len(data) - 16) + data[-8:])  # footer kept
    with pytest.raises(InvalidFormat, match=victim.key):
        ds.compact(target_file_size=1 << 20)
    assert Dataset.open(store, "c").version == ds.version
    data_keys = {m.key for m in store.list("c/table/") if "=" in m.key}
    assert data_keys == {f.key for f in ds.plan().files}  # outputs written so far deleted


_HOSTILE_FOOTERS = """
import sys
import pyarrow as pa
from parquetry.dataset import Dataset
from parquetry.errors import InvalidFormat
from parquetry.parquet.thrift import read_struct, write_struct
from parquetry.parquet.thrift_schema import FILE_META_DATA
from parquetry.store import MemoryStore

def width(meta):
    for group in meta[4]:
        for chunk in group[1]:
            chunk[3].setdefault(12, {})[6] = b"abc"  # 3-byte max for an 8-byte type

def physical(meta):
    for group in meta[4]:
        group[1][-1][3][1] = 6  # the id chunk says BYTE_ARRAY, the schema INT64

def chunks(meta):
    for group in meta[4]:
        group[1].pop()

def name(meta):
    meta[2][-1][4] = b"\\xe2"  # not UTF-8

rows = lambda start: pa.table({"p": [0] * 4, "id": pa.array(range(start, start + 4), pa.int64())})
for patch in (width, physical, chunks, name):
    store = MemoryStore()
    ds = Dataset.create(store, "c", rows(0), partition_on=["p"])
    ds = ds.append(rows(4)).append(rows(8))
    victim = ds.plan().files[1].key
    data = store.get(victim)
    length = int.from_bytes(data[-8:-4], "little")
    meta, _ = read_struct(data[-8 - length : -8], 0, FILE_META_DATA)
    patch(meta)
    footer = write_struct(meta, FILE_META_DATA)
    store.put(victim, data[: -8 - length] + footer + len(footer).to_bytes(4, "little") + b"PAR1")
    for action in (lambda: ds.compact(target_file_size=1 << 20), ds.read):
        try:
            action()
        except InvalidFormat as exc:
            assert victim in str(exc), exc
        else:
            sys.exit(f"{patch.__name__}: no error")
    assert Dataset.open(store, "c").version == ds.version
    print("named", patch.__name__)
"""


def test_hostile_footers_fail_naming_the_file_and_never_abort() -> None:
    """Footers pyarrow may abort the process on (std::terminate; see
    parquetry.parquet.footer_check) in a file that compaction or a read takes: the error names
    the file, nothing is committed, and the process lives (a subprocess, so an abort shows)."""
    done = subprocess.run(
        [sys.executable, "-c", _HOSTILE_FOOTERS], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert done.stdout.split() == [
        "named",
        "width",
        "named",
        "physical",
        "named",
        "chunks",
        "named",
        "name",
    ]
