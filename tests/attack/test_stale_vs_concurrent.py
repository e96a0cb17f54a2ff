"""Every operation run on a stale version after every kind of concurrent commit.

A writer holds version N while another commits (an evolve_schema that widened or added a
column with an append, build_index, compact, delete_where, restore, a partition move,
upsert, append); the writer then runs its own operation on version N. Whatever the pair,
the operation either commits or raises a ParquetryError (a raw exception is a defect: this
matrix found ``build_index`` raising ArrowInvalid after a concurrent widening and an upsert
re-run raising SchemaMismatch after a concurrent added column); when it raises, nothing is
committed; afterwards the dataset reads, each secondary index agrees with a full scan, and
the rows the concurrent commit wrote survive unless the stale operation's own semantics
(delete, update, upsert, replace) touch them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest

from parquetry.dataset import Dataset
from parquetry.errors import ParquetryError
from parquetry.store import MemoryStore

Op = Callable[[Dataset], Any]


def _rows(p: str, k: int, n: int, s: str) -> pa.Table:
    return pa.table({"p": [p], "k": [k], "n": pa.array([n], pa.int32()), "s": [s]})


CONCURRENT: dict[str, Op] = {
    "widen+append": lambda d: d.evolve_schema(widen={"n": pa.float64()}).append(
        pa.table({"p": ["a"], "k": [5], "n": [1.5], "s": ["v"]})
    ),
    "add+append": lambda d: d.evolve_schema(add=[pa.field("c", pa.string())]).append(
        pa.table({"p": ["a"], "k": [5], "n": pa.array([5], pa.int32()), "s": ["v"], "c": ["q"]})
    ),
    "build_index": lambda d: d.build_index("n"),
    "compact": lambda d: d.compact(),
    "delete": lambda d: d.delete_where([[("k", "==", 1)]]),
    "restore": lambda d: d.restore(0),
    "move": lambda d: d.update_where([[("k", "==", 2)]], set={"p": "a"}),
    "upsert": lambda d: d.upsert(
        pa.table(
            {"p": ["b", "b"], "k": [3, 6], "n": pa.array([30, 60], pa.int32()), "s": ["zz", "u"]}
        ),
        on=["k"],
    ),
    "append": lambda d: d.append(_rows("c", 7, 7, "t")),
    # The stale version's files are gone: its reads find missing files.
    "compact+gc": lambda d: d.compact().garbage_collect(retention=0),
    "delete+gc": lambda d: d.delete_where([[("p", "==", "a")]]).garbage_collect(retention=0),
    "merge upsert": lambda d: d.upsert(
        pa.table({"p": ["a"], "k": [3], "n": [2**40], "s": ["m"], "c": [1.5]}),
        on=["k"],
        merge_schema=True,
    ),
}

STALE: dict[str, Op] = {
    "append": lambda d: d.append(_rows("a", 8, 8, "s")),
    "upsert old key": lambda d: d.upsert(_rows("a", 3, 33, "zzz"), on=["k"]),
    "upsert new key": lambda d: d.upsert(_rows("a", 5, 55, "v5"), on=["k"]),
    "delete by n": lambda d: d.delete_where([[("n", ">", 2)]]),
    "delete by index": lambda d: d.delete_where([[("s", "==", "y")]]),
    "update": lambda d: d.update_where([[("k", "<", 3)]], set={"n": 9}),
    "compact": lambda d: d.compact(),
    "build_index n": lambda d: d.build_index("n"),
    "build_index k": lambda d: d.build_index("k"),
    "evolve add": lambda d: d.evolve_schema(add=[pa.field("c", pa.int64())]),
    "evolve widen": lambda d: d.evolve_schema(widen={"n": pa.int64()}),
    "replace": lambda d: d.replace_where([[("p", "==", "a")]], _rows("a", 9, 9, "r")),
    "gc": lambda d: d.garbage_collect(retention=0),
}
#: Stale operations that may remove or change rows the concurrent commit wrote.
TOUCHING = {"upsert old key", "upsert new key", "delete by n", "delete by index", "update"}
TOUCHING |= {"replace"}


def _base() -> tuple[MemoryStore, Dataset]:
    store = MemoryStore()
    ds = Dataset.create(
        store,
        "e",
        pa.table(
            {
                "p": ["a", "b", "a"],
                "k": [1, 2, 3],
                "n": pa.array([1, 2, 3], pa.int32()),
                "s": ["x", "y", "z"],
            }
        ),
        partition_on=["p"],
        secondary_indices=["s"],
    )
    return store, ds.append(_rows("b", 4, 4, "w"))


def _check_indices(ds: Dataset) -> None:
    full = ds.read()
    for col in ds.secondary_indices:
        values = full.column(col).to_pylist()
        for v in set(values) - {None}:
            got = ds.read(predicates=[[(col, "==", v)]]).num_rows
            assert got == values.count(v), (col, v)


@pytest.mark.parametrize("stale_op", sorted(STALE))
@pytest.mark.parametrize("concurrent", sorted(CONCURRENT))
def test_stale_operation_after_a_concurrent_commit(concurrent: str, stale_op: str) -> None:
    store, stale = _base()
    CONCURRENT[concurrent](Dataset.open(store, "e"))
    after = Dataset.open(store, "e")
    before_rows = {r["k"]: r for r in after.read().to_pylist()}
    try:
        STALE[stale_op](stale)
    except ParquetryError:
        # Nothing committed.
        assert Dataset.open(store, "e").version == after.version
    newest = Dataset.open(store, "e")
    _check_indices(newest)
    rows = {r["k"]: r for r in newest.read().to_pylist()}
    if stale_op not in TOUCHING:
        # Every row survives with its values (columns may have been added: old ones compared).
        for k, old in before_rows.items():
            assert {c: rows[k][c] for c in old} == old, (k, rows.get(k))
