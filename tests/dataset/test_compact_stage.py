"""compact_stage: which footers may be staged, and what a staging decode gives back."""

from __future__ import annotations

import copy
import datetime as dt

import pyarrow as pa
import pyarrow.parquet as pq

from parquetry.dataset import Dataset
from parquetry.dataset.compact_stage import stageable
from parquetry.parquet.footer import footer_from_bytes
from parquetry.store import MemoryStore


def _file(table: pa.Table) -> tuple[bytes, dict, int]:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, row_group_size=3)
    data = sink.getvalue().to_pybytes()
    raw = footer_from_bytes(data)
    assert raw.metadata is not None
    return data, raw.metadata, len(data) - 8 - raw.footer_length


def test_stageable_only_when_every_chunk_is_complete_and_inside_the_data() -> None:
    _, meta, start = _file(pa.table({"a": list(range(7)), "s": ["x", "y", None] * 2 + ["z"]}))
    assert stageable(meta, start, 2)
    assert not stageable(meta, start, 3)  # another number of leaf columns
    past = copy.deepcopy(meta)
    past[4][1][1][1][3][7] = start  # a chunk running into the footer
    assert not stageable(past, start, 2)
    missing = copy.deepcopy(meta)
    del missing[4][2][1][0][3][9]  # no data page offset
    assert not stageable(missing, start, 2)
    external = copy.deepcopy(meta)
    external[4][0][1][0][1] = b"other.parquet"  # a chunk in another file
    assert not stageable(external, start, 2)
    assert not stageable({4: [{1: "not a list of chunks", 3: 1}]}, start, 2)


def test_staged_files_keep_types_rows_statistics_and_index_values() -> None:
    """Oracle: the rows read before; the index rebuilt from them (every value of ``s``
    now in the one output file)."""

    def rows(k: int, tz: str) -> pa.Table:
        return pa.table(
            {
                "id": pa.array(range(10 * k, 10 * k + 10), pa.int64()),
                "t": pa.array(
                    [
                        dt.datetime(2024, 1, 1, tzinfo=dt.UTC) + dt.timedelta(hours=i)
                        for i in range(10)
                    ],
                    pa.timestamp("us", tz=tz),
                ),
                "s": pa.array([f"k{(10 * k + i) % 3}" for i in range(10)]),
            }
        )

    ds = Dataset.create(MemoryStore(), "c", rows(0, "UTC"), secondary_indices=["s"])
    for k in range(1, 4):
        ds = ds.append(rows(k, "UTC"))
    before = ds.read().sort_by("id")
    out = ds.compact(target_file_size=1 << 20)
    assert len(out.plan().files) == 1
    after = out.read().sort_by("id")
    assert after.equals(before)
    f = out.plan().files[0]
    info = out.document.files[f.label]
    assert info.stats["id"] == [0, 39, 0]
    pairs = {tuple(r.values()) for r in out.index_pairs("s").to_pylist()}
    assert pairs == {(v, f.label) for v in set(before.column("s").to_pylist())}
