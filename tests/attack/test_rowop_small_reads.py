"""Row operations read each small file with one GET and decode its footer through
templates (``staleread.read_base_file(memo=...)``): the safety of the checked read stays.

- hostile footers (pyarrow may abort on them: ``parquetry.parquet.footer_check``) in a
  file ``delete_where`` / ``update_where`` / ``upsert`` rewrites: a ParquetryError naming
  the file, nothing committed, the process alive (a subprocess, so an abort shows);
- a footer damaged at random (same length, so it meets a template, or not): either the
  operation is refused naming a ParquetryError and commits nothing, or its result is the
  oracle (the rows ``Dataset.read`` gave before, filtered by pyarrow);
- one GET per file rewritten, no ranged reads of data files.
"""

from __future__ import annotations

import random
import struct
import subprocess
import sys

import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from parquetry.dataset import Dataset
from parquetry.errors import ParquetryError
from parquetry.parquet.footer import MAGIC
from parquetry.store import MemoryStore
from parquetry.testing.stores import CountingStore

_HOSTILE = """
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
ops = {
    "delete": lambda ds: ds.delete_where([[("id", "in", [1, 5, 9])]]),
    "update": lambda ds: ds.update_where([[("id", "in", [1, 5, 9])]], set={"id": 100}),
    "upsert": lambda ds: ds.upsert(pa.table({"p": [0, 0], "id": pa.array([5, 9])}), on=["id"]),
}
for patch in (width, physical, chunks, name):
    for op, action in ops.items():
        store = MemoryStore()
        ds = Dataset.create(store, "c", rows(0), partition_on=["p"])
        ds = ds.append(rows(4)).append(rows(8))
        victim = ds.plan().files[1].key
        data = store.get(victim)
        length = int.from_bytes(data[-8:-4], "little")
        meta, _ = read_struct(data[-8 - length : -8], 0, FILE_META_DATA)
        patch(meta)
        footer = write_struct(meta, FILE_META_DATA)
        tail = footer + len(footer).to_bytes(4, "little") + b"PAR1"
        store.put(victim, data[: -8 - length] + tail)
        try:
            action(ds)
        except InvalidFormat as exc:
            assert victim in str(exc), exc
        else:
            sys.exit(f"{patch.__name__} {op}: no error")
        assert Dataset.open(store, "c").version == ds.version
    print("named", patch.__name__)
"""


def test_hostile_footers_fail_naming_the_file_and_never_abort() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _HOSTILE], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    names = ["width", "physical", "chunks", "name"]
    assert done.stdout.split() == [word for n in names for word in ("named", n)]


def _rows(start: int) -> pa.Table:
    ids = range(start, start + 30)
    return pa.table(
        {
            "p": [start % 2] * 30,
            "id": pa.array(ids, pa.int64()),
            "s": [f"v{i % 5}" if i % 7 else None for i in ids],
            "x": pa.array([i * 0.5 for i in ids]),
        }
    )


def _dataset(store: MemoryStore | CountingStore) -> Dataset:
    ds = Dataset.create(store, "c", _rows(0), partition_on=["p"], secondary_indices=["id"])
    for k in range(1, 6):
        ds = ds.append(_rows(30 * k))
    return ds


def _canon(table: pa.Table) -> list[str]:
    return sorted(map(repr, table.select(["p", "id", "s", "x"]).to_pylist()))


def test_one_get_per_small_file_rewritten() -> None:
    store = CountingStore(MemoryStore())
    ds = _dataset(store)
    data_keys = {f.key for f in ds.plan().files}
    store.reset()
    ds.delete_where([[("x", "<", 40.0)]])  # x < 40: ids < 80, in 3 files
    reads = [(kind, key) for kind, key in store.log if key in data_keys]
    assert sorted(kind for kind, _ in reads) == ["get"] * 3


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    seed=st.integers(0, 2**32 - 1),
    kind=st.sampled_from(["flip", "byte", "splice"]),
    op=st.sampled_from(["delete", "update"]),
)
def test_a_damaged_footer_is_refused_or_the_result_is_the_oracle(
    seed: int, kind: str, op: str
) -> None:
    rng = random.Random(seed)
    store = MemoryStore()
    ds = _dataset(store)
    keys = sorted(f.key for f in ds.plan().files)
    victim = keys[rng.randrange(len(keys))]
    data = store.get(victim)
    n = struct.unpack("<i", data[-8:-4])[0]
    body, footer = data[: -8 - n], bytearray(data[-8 - n : -8])
    at = rng.randrange(len(footer))
    if kind == "flip":
        footer[at] ^= 1 << rng.randrange(8)
    elif kind == "byte":
        footer[at] = rng.randrange(256)
    else:
        footer[at : at + rng.randint(1, 4)] = rng.randbytes(rng.randint(0, 4))
    store.put(victim, body + bytes(footer) + struct.pack("<i", len(footer)) + MAGIC)
    try:
        before: pa.Table | None = Dataset.open(store, "c").read()
    except ParquetryError:
        before = None
    version = ds.version
    wanted = [5, 35, 65, 95, 125, 155]  # one row of every file: each is read
    predicate = [[("id", "in", wanted)]]
    try:
        if op == "delete":
            out = ds.delete_where(predicate)
        else:
            out = ds.update_where(predicate, set={"s": "new"})
    except ParquetryError:
        assert Dataset.open(store, "c").version == version  # nothing committed
        return
    assert before is not None  # the operation read every file the read did
    hit = pc.is_in(before.column("id"), pa.array(wanted))
    if op == "delete":
        expected = before.filter(pc.invert(hit))
    else:
        s = pc.if_else(hit, pa.scalar("new"), before.column("s"))
        expected = before.set_column(before.schema.get_field_index("s"), "s", s)
    assert _canon(out.read()) == _canon(expected)
