"""IndexSinks (indexsinks.py): a rewrite's index values spill as its files are written,
and the commit's index delta is the one built from the files' descriptions (the oracle:
``apply_change`` given the descriptions with their values, as every commit did before)."""

from __future__ import annotations

from unittest import mock

import hypothesis.strategies as st
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings

from parquetry.dataset import Dataset
from parquetry.dataset.indexsinks import IndexSinks
from parquetry.dataset.ops import apply_change
from parquetry.dataset.rewrite import FileEdit, rewrite_files
from parquetry.dataset.write import FileDescription
from parquetry.errors import InvalidArgument
from parquetry.store import MemoryStore
from parquetry.testing import CountingStore

from .ops_oracle import assert_index_exact

_KEYS = {
    "int": (pa.int64(), st.integers(-20, 20)),
    "str": (pa.string(), st.text("abcé", max_size=3)),
}


@st.composite
def _case(draw: st.DrawFn) -> tuple[pa.DataType, list[pa.Table], list[int]]:
    t, values = _KEYS[draw(st.sampled_from(sorted(_KEYS)))]
    tables = []
    for _ in range(draw(st.integers(1, 4))):
        n = draw(st.integers(1, 12))
        keys = draw(st.lists(st.one_of(st.none(), values), min_size=n, max_size=n))
        parts = draw(st.lists(st.sampled_from("pq"), min_size=n, max_size=n))
        tables.append(pa.table({"p": parts, "k": pa.array(keys, t), "v": list(range(n))}))
    # The files are taken in chunks of these sizes (the writer's flushes).
    chunks = draw(st.lists(st.integers(1, 3), min_size=1, max_size=6))
    return t, tables, chunks


def _base(t: pa.DataType) -> Dataset:
    first = pa.table({"p": ["p"], "k": pa.array([None], t), "v": [0]})
    return Dataset.create(MemoryStore(), "d", first, partition_on=["p"], secondary_indices=["k"])


def _commit(ds: Dataset, files: list[FileDescription], sinks: IndexSinks | None) -> object:
    return apply_change(
        ds.store,
        ds.document,
        number=1,
        parent=0,
        committed_at="2026-11-24T00:00:00Z",
        operation="rewrite",
        schema=ds.schema,
        add=files,
        remove=set(ds.document.partitions),
        index_sinks=sinks,
    )


def _taken(
    sinks: IndexSinks, files: list[FileDescription], chunks: list[int]
) -> list[FileDescription]:
    out: list[FileDescription] = []
    at = 0
    for n in chunks * len(files):
        if at >= len(files):
            break
        out += sinks.take(files[at : at + n])
        at += n
    return out


@given(case=_case(), run=st.sampled_from([1, 2, 5, 1 << 18]))
@settings(max_examples=40, deadline=None)
def test_the_delta_from_sinks_is_the_delta_from_the_descriptions(
    case: tuple[pa.DataType, list[pa.Table], list[int]], run: int
) -> None:
    t, tables, chunks = case
    ds = _base(t)
    files = [fd for table in tables for fd in ds._write(table, None, merge_schema=False)[0]]
    expected = _commit(ds, files, None)
    with IndexSinks(run_pairs=run) as sinks:
        taken = _taken(sinks, files, chunks)
        assert [fd.label for fd in taken] == [fd.label for fd in files]
        assert all(not fd.index_values for fd in taken)
        got = _commit(ds, taken, sinks)
        again = _commit(ds, taken, sinks)  # a retry on a newer base encodes the sink again
    want_pairs = _pairs(ds, expected)
    assert _pairs(ds, got) == _pairs(ds, again) == want_pairs
    if run == 1 << 18:
        # Nothing spilled: the very delta (inline pairs, or one piece) of the descriptions.
        assert got.change.index == expected.change.index  # type: ignore[attr-defined]
        assert got.index_states == expected.index_states  # type: ignore[attr-defined]
    # The oracle: each file's distinct non-null keys, labelled.
    oracle = set()
    for fd, table in zip(files, _file_tables(ds, files), strict=True):
        oracle |= {(v, fd.label) for v in pc.unique(table.column("k").drop_null()).to_pylist()}
    assert want_pairs == oracle


def _pairs(ds: Dataset, doc: object) -> set[tuple[object, str]]:
    state = doc.index_states["k"]  # type: ignore[attr-defined]
    pairs = state.full(ds.store).pairs()
    return set(
        zip(pairs.column("value").to_pylist(), pairs.column("label").to_pylist(), strict=True)
    )


def _file_tables(ds: Dataset, files: list[FileDescription]) -> list[pa.Table]:
    import pyarrow.parquet as pq

    return [pq.read_table(ds.store.open(fd.key, size=fd.size), columns=["k"]) for fd in files]


def test_a_rewrite_commits_its_index_delta_without_reading_the_files_it_wrote() -> None:
    """The commit takes the written files' keys from the sinks: it reads no data file
    (the fallback for files without values reads each one back)."""
    store = CountingStore(MemoryStore())
    data = pa.table({"p": ["a", "a", "b", "c"], "k": ["x", "y", "z", "w"], "v": [1, 2, 3, 4]})
    ds = Dataset.create(store, "d", data, partition_on=["p"], secondary_indices=["k"])
    labels = sorted(ds.document.partitions)

    def edit(label: str, table: pa.Table) -> FileEdit:
        return FileEdit(label, table.set_column(2, "v", pc.multiply(table["v"], 10)))

    store.reset()
    rewrite_files(ds, labels, edit, operation="test", concurrency=2)
    out = Dataset.open(store.inner, "d")
    assert out.version == 1
    data_gets = [
        key for kind, key in store.log if kind.startswith("get") and key.endswith(".parquet")
    ]
    written = {out.document.partitions[lbl]["table"] for lbl in out.document.partitions}
    read = {ds.document.partitions[lbl]["table"] for lbl in labels}
    assert set(data_gets) <= read  # the inputs only, never an output
    assert not written & read
    assert_index_exact(out, "k")
    assert sorted(out.read().column("v").to_pylist()) == [10, 20, 30, 40]


def test_a_value_that_is_not_utf8_is_refused_when_taken() -> None:
    values = pa.array([b"ok", b"\xff"], pa.binary()).cast(pa.string(), safe=False)
    fd = FileDescription(
        table="table", key="d/table/x.parquet", label="x", partition=(), rows=2, size=1,
        index_values={"k": values},
    )  # fmt: skip
    with IndexSinks() as sinks, pytest.raises(InvalidArgument, match="not valid UTF-8"):
        sinks.take([fd])


def test_a_widened_index_type_at_commit_reads_the_values_from_the_files() -> None:
    """A concurrent schema change widened the indexed column (uint32 -> int64): the sinks
    (uint64 pairs, the index type of uint32) do not apply, the commit reads each written
    file's keys back."""
    data = pa.table({"p": ["a", "b"], "k": pa.array([1, 2], pa.uint32()), "v": [1, 2]})
    ds = Dataset.create(MemoryStore(), "d", data, partition_on=["p"], secondary_indices=["k"])
    more = pa.table({"p": ["a", "c", "c"], "k": pa.array([7, 8, 9], pa.uint32()), "v": [0, 0, 0]})
    files = ds._write(more, None, merge_schema=False)[0]
    wide = ds.schema.set(1, pa.field("k", pa.int64()))
    with IndexSinks() as sinks:
        taken = sinks.take(files)
        assert sinks.sink("k", pa.int64(), taken) is None
        assert sinks.sink("k", pa.uint64(), taken) is not None
        assert sinks.sink("k", pa.uint64(), taken[:1]) is None  # not the files taken
        doc = apply_change(
            ds.store,
            ds.document,
            number=1,
            parent=0,
            committed_at="2026-11-24T00:00:00Z",
            operation="append",
            schema=wide,
            add=taken,
            index_sinks=sinks,
        )
    got = _pairs(ds, doc)
    want = {(1, lbl) for lbl in ds.document.partitions if lbl.startswith("p=a")}
    want |= {(2, lbl) for lbl in ds.document.partitions if lbl.startswith("p=b")}
    want |= {(7, fd.label) for fd in files if fd.label.startswith("p=a")}
    want |= {(v, fd.label) for fd in files if fd.label.startswith("p=c") for v in (8, 9)}
    assert got == want


def test_a_compaction_takes_its_outputs_index_values_into_the_sinks() -> None:
    """Compaction writes its outputs before the engine runs: their keys go to the sinks
    as each output is written (the descriptions handed over carry none), and the commit
    reads no output back to index it."""
    store = CountingStore(MemoryStore())
    first = pa.table({"p": ["a", "a"], "k": ["x", "y"], "v": [1, 2]})
    ds = Dataset.create(store, "d", first, partition_on=["p"], secondary_indices=["k"])
    for n in range(3):
        ds = ds.append(pa.table({"p": ["a", "b"], "k": [f"a{n}", f"b{n}"], "v": [n, n]}))
    taken: list[list[FileDescription]] = []
    real = rewrite_files

    def spy(*args: object, **kwargs: object) -> object:
        taken.append(list(kwargs["add"]))  # type: ignore[call-overload]
        return real(*args, **kwargs)  # type: ignore[arg-type]

    store.reset()
    with mock.patch("parquetry.dataset.compact.rewrite_files", spy):
        out = ds.compact()
    assert len(taken) == 1
    assert taken[0]
    assert all(not fd.index_values for fd in taken[0])
    outputs = {fd.key for fd in taken[0]}
    gets = {k for kind, k in store.log if kind.startswith("get")}
    assert not outputs & gets  # never read back
    assert out.version == ds.version + 1
    assert_index_exact(out, "k")
    assert sorted(out.read().column("k").to_pylist()) == sorted(
        ["x", "y", "a0", "b0", "a1", "b1", "a2", "b2"]
    )
