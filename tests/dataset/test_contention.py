"""What a contended commit costs after its commit point (issue 13, commit throughput).

A newer version's writer publishes the pointer and the head after its own commit point, so
a writer that sees one leaves both to it, and of the writers that did put the pointer only
the last one republishes the newest version.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import given, settings
from hypothesis import strategies as st

from parquetry.dataset import Dataset
from parquetry.dataset.format2 import load_head_state
from parquetry.dataset.indexpieces import normalise_pairs, pairs_schema
from parquetry.dataset.versions import read_pointer
from parquetry.store import LocalStore, Store
from parquetry.store.base import ObjectMeta, PutMode
from parquetry.store.wrappers import WrapperStore

UUID = "cont"


def _row(value: int) -> pa.Table:
    return pa.table({"p": [value % 3], "k": [value % 13], "w": [value]})


def _create(store: Store) -> None:
    Dataset.create(store, UUID, _row(-1), partition_on=["p"], secondary_indices=["k"])


class _Scripted(WrapperStore):
    """Runs ``before(n)`` / ``after(n)`` around the n-th PUT whose key contains ``part``
    (rivals use the inner store, so only this writer's requests are counted)."""

    def __init__(
        self,
        inner: Store,
        part: str,
        before: Callable[[int], None] = lambda n: None,
        after: Callable[[int], None] = lambda n: None,
    ):
        super().__init__(inner)
        self.part, self.before, self.after = part, before, after
        self.seen = 0
        self.puts: list[str] = []
        self.log: list[tuple[str, str]] = []  # (request, key), GETs and PUTs in order

    def _get(self, key: str) -> bytes:
        self.log.append(("get", key))
        return super()._get(key)

    def _put(
        self, key: str, data: bytes | memoryview, mode: PutMode, expected: str | None
    ) -> ObjectMeta:
        self.puts.append(key)
        self.log.append(("put", key))
        if self.part not in key:
            return super()._put(key, data, mode, expected)
        self.seen += 1
        n = self.seen
        self.before(n)
        meta = super()._put(key, data, mode, expected)
        self.after(n)
        return meta


def _rival(store: Store, value: int) -> Callable[[int], None]:
    def run(n: int) -> None:
        if n == 1:
            Dataset.open(store, UUID).append(_row(value))

    return run


def _pointer_number(store: Store) -> int:
    doc = read_pointer(store, UUID)[0]
    assert doc.version is not None
    return int(doc.version.number)


def test_a_writer_overtaken_after_its_commit_point_leaves_pointer_and_head_to_the_newer(
    tmp_path: Path,
) -> None:
    """It wrote the pointer (and its index files) and the head anyway, then republished."""
    inner = LocalStore(tmp_path, fsync=False)
    _create(inner)
    lose_once = _rival(inner, 100)  # takes version 1: this writer's first attempt loses

    def overtake(n: int) -> None:
        if n == 2:  # after this writer created version 2: a rival commits version 3
            Dataset.open(inner, UUID).append(_row(101))

    writer = _Scripted(inner, "/_versions/", before=lose_once, after=overtake)
    committed = Dataset.open(writer, UUID).append(_row(7))
    assert committed.version == 2
    assert [k for k in writer.puts if "by-dataset-metadata" in k or "/indices/" in k] == []
    assert [k for k in writer.puts if k.endswith("/_head.json")] == []
    # The newer version's writer published both, covering this commit.
    assert _pointer_number(inner) == 3
    got = load_head_state(inner, UUID)
    assert got is not None
    assert got[1]["number"] == 3
    ds = Dataset.open(inner, UUID)
    assert sorted(ds.read()["w"].to_pylist()) == [-1, 7, 100, 101]
    assert ds.read(predicates=[[("k", "==", 7)]])["w"].to_pylist() == [7]
    assert len(read_pointer(inner, UUID)[0].partitions) == 4


def test_an_uncontended_writer_still_publishes_pointer_and_head(tmp_path: Path) -> None:
    inner = LocalStore(tmp_path, fsync=False)
    _create(inner)
    writer = _Scripted(inner, "/_versions/")
    Dataset.open(writer, UUID).append(_row(7))
    assert sum("by-dataset-metadata" in k for k in writer.puts) == 1
    assert sum(k.endswith("/_head.json") for k in writer.puts) == 1
    assert _pointer_number(inner) == 1


def test_a_pointer_writer_overwritten_by_a_newer_one_does_not_republish(tmp_path: Path) -> None:
    """Only the last writer of the pointer republishes (every writer did, before)."""
    inner = LocalStore(tmp_path, fsync=False)
    _create(inner)
    # Right after this writer's pointer PUT (version 1), a rival commits version 2 and
    # puts the pointer itself: the pointer is no longer this writer's, so it stops.
    writer = _Scripted(inner, "by-dataset-metadata", after=_rival(inner, 100))
    Dataset.open(writer, UUID).append(_row(7))
    assert sum("by-dataset-metadata" in k for k in writer.puts) == 1
    # ... and reads no entry after it (one probe of the next number, one HEAD of the pointer)
    after = writer.log[writer.log.index(("put", f"{UUID}.by-dataset-metadata.json")) :]
    assert [key for op, key in after if op == "get" and "/_versions/" in key] == []
    assert _pointer_number(inner) == 2
    assert sorted(Dataset.open(inner, UUID).read()["w"].to_pylist()) == [-1, 7, 100]


def test_the_last_pointer_writer_republishes_the_newest_version(tmp_path: Path) -> None:
    """A slow writer that put an older version back over a newer one repairs it."""
    inner = LocalStore(tmp_path, fsync=False)
    _create(inner)
    rival_pointer: list[bytes] = []

    def newer_first(n: int) -> None:
        # Before this writer's pointer PUT (version 1): version 2 is committed and its
        # pointer written, so this writer's PUT puts an older version back.
        if n == 1:
            Dataset.open(inner, UUID).append(_row(100))
            rival_pointer.append(inner.get(f"{UUID}.by-dataset-metadata.json"))

    writer = _Scripted(inner, "by-dataset-metadata", before=newer_first)
    Dataset.open(writer, UUID).append(_row(7))
    assert rival_pointer  # the rival did publish version 2 first
    assert sum("by-dataset-metadata" in k for k in writer.puts) == 2
    assert _pointer_number(inner) == 2
    assert len(read_pointer(inner, UUID)[0].partitions) == 3


def _reference(pairs: pa.Table, t: pa.DataType) -> pa.Table:
    pairs = pairs.select(["value", "label"]).cast(pairs_schema(t))
    keep = pc.and_(pc.is_valid(pairs.column("value")), pc.is_valid(pairs.column("label")))
    return pairs.filter(keep)


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(st.one_of(st.none(), st.integers(-5, 5)), max_size=6),
    labels=st.lists(st.one_of(st.none(), st.sampled_from(["a", "b/c"])), max_size=6),
    source=st.sampled_from([pa.int8(), pa.int64()]),
    target=st.sampled_from([pa.int64(), pa.int32()]),
    extra=st.booleans(),
)
def test_normalised_pairs_match_cast_and_filter(
    values: list[int | None],
    labels: list[str | None],
    source: pa.DataType,
    target: pa.DataType,
    extra: bool,
) -> None:
    """The fast path (no cast, no filter when nothing changes) gives what the full
    normalisation gives, with nulls and other types among the inputs."""
    n = min(len(values), len(labels))
    columns = {"value": pa.array(values[:n], source), "label": pa.array(labels[:n], pa.string())}
    if extra:
        columns = {"other": pa.array([0] * n), **columns}
    pairs = pa.table(columns)
    got = normalise_pairs(pairs, target)
    assert got.schema.equals(pairs_schema(target))
    assert got.equals(_reference(pairs, target))
