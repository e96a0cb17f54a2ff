"""Parallel part encoding, bounded streaming writes, range-reading projections, and
hypothesis round trips of random tables and split sizes."""

from __future__ import annotations

import contextlib
import math
import threading
import uuid

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parquetry import ParquetDatasetStore
from parquetry.store import MemoryStore, PutMode, Store
from parquetry.store.wrappers import WrapperStore
from parquetry.testing import CountingStore


class ThreadRecordingStore(WrapperStore):
    """Records which threads put staged parts, and a hook run before each put."""

    def __init__(self, inner: Store):
        super().__init__(inner)
        self.threads: set[int] = set()
        self.on_put: list[str] = []
        self.produced_at_put: list[tuple[str, int]] = []
        self.produced = 0

    def _put(
        self, key: str, data: bytes | memoryview, mode: PutMode, expected_version: str | None
    ) -> object:  # type: ignore[override]
        if "/_staging/" in key:
            self.threads.add(threading.get_ident())
            self.produced_at_put.append((key.rsplit("/", 1)[1], self.produced))
        return self.inner._put(key, data, mode, expected_version)


class MeetingStore(ThreadRecordingStore):
    """The first two staged puts wait (bounded) for each other: parts encoded in parallel
    always meet there, however the OS schedules the pool's threads (on a loaded machine one
    thread could otherwise encode every part before another ever ran)."""

    def __init__(self, inner: Store):
        super().__init__(inner)
        self.meeting = threading.Barrier(2, timeout=60)
        self.arrivals = 0
        self.lock = threading.Lock()

    def _put(
        self, key: str, data: bytes | memoryview, mode: PutMode, expected_version: str | None
    ) -> object:  # type: ignore[override]
        if "/_staging/" in key:
            with self.lock:
                self.arrivals += 1
                meet = self.arrivals <= 2
            if meet:
                # Sequential encoding breaks the barrier after the timeout: the assertion on
                # threads then fails.
                with contextlib.suppress(threading.BrokenBarrierError):
                    self.meeting.wait()
        return super()._put(key, data, mode, expected_version)


def test_parts_encoded_on_several_threads() -> None:
    store = MeetingStore(MemoryStore())
    table = pa.table({"i": np.arange(40_000), "f": np.random.default_rng(1).random(40_000)})
    pds = ParquetDatasetStore(store, max_rows_per_file=5_000, max_workers=4)
    m = pds.write_dataset(table, "ds")
    assert len(m.parts) == 8
    assert len(store.threads) > 1
    assert pds.read_dataset("ds").equals(table)


def test_streaming_reads_ahead_at_most_one_part() -> None:
    store = ThreadRecordingStore(MemoryStore())
    per_part_batches = 4

    def batches():  # type: ignore[no-untyped-def]
        for n in range(10 * per_part_batches):
            store.produced += 1
            yield pa.record_batch({"i": pa.array(range(n * 100, n * 100 + 100), pa.int64())})

    pds = ParquetDatasetStore(store, max_rows_per_file=100 * per_part_batches, max_workers=4)
    m = pds.write_dataset(batches(), "ds")
    assert len(m.parts) == 10
    assert m.row_count == 4000
    for name, produced in store.produced_at_put:
        index = int(name.split(".")[0])
        # While part k uploads, at most part k+1 has been pulled from the input.
        assert produced <= (index + 2) * per_part_batches, (name, produced)
    assert pds.read_dataset("ds").column("i").to_pylist() == list(range(4000))


def test_streaming_single_part_row_groups() -> None:
    store = MemoryStore()
    pds = ParquetDatasetStore(store, row_group_size=1000)
    reader = pa.table({"i": list(range(3500))}).to_reader(max_chunksize=300)
    assert pds.write_dataset(reader, "ds").parts == ["data.parquet"]
    meta = pq.ParquetFile(pa.BufferReader(store.get("ds/data.parquet"))).metadata
    assert meta.num_rows == 3500
    assert meta.num_row_groups == 4
    assert all(meta.row_group(i).num_rows <= 1200 for i in range(4))


@pytest.mark.s3
def test_projection_on_s3_fetches_only_footers_and_chunks(s3_store: Store) -> None:
    rng = np.random.default_rng(7)
    n = 200_000
    table = pa.table(
        {
            "id": np.arange(n),
            "value": rng.random(n),
            "text": pa.array([f"row-{i}" for i in rng.integers(0, 10**9, n)]),
            "other": rng.integers(0, 10**12, n),
        }
    )
    ParquetDatasetStore(s3_store, max_rows_per_file=50_000).write_dataset(table, "ds")
    counting = CountingStore(s3_store)
    pds = ParquetDatasetStore(counting)
    manifest = pds.read_manifest("ds")
    counting.reset()
    out = pds.read_dataset("ds", columns=["value", "id"])
    assert out.equals(table.select(["value", "id"]))
    chunk_bytes = 0
    for part in manifest.parts:
        meta = pq.ParquetFile(pa.BufferReader(s3_store.get(f"ds/{part}"))).metadata
        for rg in range(meta.num_row_groups):
            for col in range(meta.num_columns):
                chunk = meta.row_group(rg).column(col)
                if chunk.path_in_schema in ("value", "id"):
                    chunk_bytes += chunk.total_compressed_size
    part_reads = [key for kind, key in counting.log if kind == "get" and key.endswith(".parquet")]
    assert part_reads == []  # no whole-file downloads
    manifest_bytes = 2 * len(s3_store.get("ds/manifest.json"))
    assert counting.bytes_read - manifest_bytes <= 1.2 * chunk_bytes
    assert counting.bytes_read < 0.6 * sum(s3_store.head(f"ds/{p}").size for p in manifest.parts)


columns = st.fixed_dictionaries(
    {},
    optional={
        "i": st.lists(st.none() | st.integers(-(2**63), 2**63 - 1)),
        "f": st.lists(st.none() | st.floats(allow_nan=False)),
        "s": st.lists(st.none() | st.text(max_size=5)),
        "b": st.lists(st.none() | st.booleans()),
    },
)


@settings(max_examples=60, deadline=None)
@given(
    data=st.data(),
    n=st.integers(0, 40),
    max_rows=st.none() | st.integers(1, 15),
    chunk=st.integers(1, 17),
    stream=st.booleans(),
)
def test_roundtrip_random_tables(
    data: st.DataObject, n: int, max_rows: int | None, chunk: int, stream: bool
) -> None:
    types = {"i": pa.int64(), "f": pa.float64(), "s": pa.string(), "b": pa.bool_()}
    names = data.draw(st.lists(st.sampled_from(sorted(types)), min_size=1, unique=True))
    arrays = {
        c: pa.array(
            data.draw(
                st.lists(
                    st.none()
                    | {
                        "i": st.integers(-(2**63), 2**63 - 1),
                        "f": st.floats(allow_nan=False),
                        "s": st.text(max_size=5),
                        "b": st.booleans(),
                    }[c],
                    min_size=n,
                    max_size=n,
                )
            ),
            types[c],
        )
        for c in names
    }
    table = pa.table(arrays)
    store = MemoryStore(f"h-{uuid.uuid4().hex}")
    pds = ParquetDatasetStore(store, max_rows_per_file=max_rows, max_workers=3)
    source: object = table.to_reader(max_chunksize=chunk) if stream else table
    m = pds.write_dataset(source, "ds")
    expected_parts = 1 if max_rows is None or n <= max_rows else math.ceil(n / max_rows)
    assert len(m.parts) == expected_parts
    assert m.row_count == n
    out = pds.read_dataset("ds")
    assert out.equals(table)
    assert pds.read_dataset("ds", columns=names[::-1]).equals(table.select(names[::-1]))
