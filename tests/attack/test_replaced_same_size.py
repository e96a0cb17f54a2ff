"""A data file replaced under its committed name by another valid Parquet file of the same
size (so the one-GET read's size check passes) holding fewer rows: the version records the
file's row count, and a read, a row operation or a compaction must refuse the impostor
naming it (InvalidFormat), never commit a rewrite that silently drops the missing rows.
Before the fix delete_where/update_where/upsert committed without rows 6 and 7."""

from __future__ import annotations

import io
from collections.abc import Callable

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from parquetry.dataset import Dataset
from parquetry.errors import InvalidFormat
from parquetry.store import MemoryStore


def _rows(start: int, n: int = 4) -> pa.Table:
    ids = range(start, start + n)
    return pa.table(
        {
            "p": pa.array([0] * n, pa.int64()),
            "id": pa.array(ids, pa.int64()),
            "v": [f"s{i}" for i in ids],
        }
    )


def _same_size(table: pa.Table, size: int) -> bytes:
    for pad in range(4000):
        buf = io.BytesIO()
        pq.write_table(table.replace_schema_metadata({"x": "y" * pad}), buf)
        if len(buf.getvalue()) == size:
            return buf.getvalue()
    raise AssertionError("no padding gives that size")


OPS: dict[str, Callable[[Dataset], object]] = {
    "read": lambda ds: ds.read(),
    "delete": lambda ds: ds.delete_where([[("id", "in", [1, 5, 9])]]),
    "update": lambda ds: ds.update_where([[("id", "in", [1, 5, 9])]], set={"v": "z"}),
    "upsert": lambda ds: ds.upsert(
        pa.table({"p": pa.array([0, 0], pa.int64()), "id": pa.array([5, 9]), "v": ["u", "u"]}),
        on=["id"],
    ),
    "compact": lambda ds: ds.compact(),
}


@pytest.mark.parametrize("op", list(OPS))
def test_a_same_size_impostor_with_fewer_rows_is_refused(op: str) -> None:
    store = MemoryStore()
    ds = Dataset.create(store, "c", _rows(0), partition_on=["p"])
    ds = ds.append(_rows(4)).append(_rows(8))
    victim = next(f for f in ds.plan().files if 4 in ds.read_file(f).column("id").to_pylist())
    impostor = pa.table({"id": pa.array([4, 5], pa.int64()), "v": ["s4", "s5"]})
    store.put(victim.key, _same_size(impostor, len(store.get(victim.key))))
    with pytest.raises(InvalidFormat, match=r"record(s|ed) 4") as err:
        OPS[op](ds)
    assert err.value.key == victim.key
    assert Dataset.open(store, "c").version == ds.version
