"""An upsert re-run after a concurrent commit that added a nullable column.

An upsert whose keys a concurrent commit added is run again on the newest version. When that
concurrent commit had also added a nullable column (``evolve_schema``, a ``merge_schema``
append), the re-run checked the data against the newest schema and raised SchemaMismatch
("column 'c' is missing from the data"), though the data fitted the version the upsert was
called on, and the same upsert succeeds when its keys do not collide (the engine accepts
files lacking a nullable column added meanwhile, as append does). Found by a matrix of stale
operations against concurrent ones (no other cell misbehaved).
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from parquetry.dataset import Dataset
from parquetry.errors import SchemaMismatch
from parquetry.store import MemoryStore


def _stale_and_concurrent() -> tuple[MemoryStore, Dataset]:
    store = MemoryStore()
    stale = Dataset.create(
        store,
        "u",
        pa.table({"p": ["a", "b"], "k": [1, 2], "v": ["one", "two"]}),
        partition_on=["p"],
    )
    newer = stale.evolve_schema(add=[pa.field("c", pa.string())])
    newer.append(pa.table({"p": ["a"], "k": [5], "v": ["five"], "c": ["q"]}))
    return store, stale


@pytest.mark.parametrize("when_matched", ["update", "delete", "ignore"])
@pytest.mark.parametrize("batch", [False, True])
def test_stale_upsert_of_a_concurrently_added_key_after_an_added_column(
    when_matched: str, batch: bool
) -> None:
    store, stale = _stale_and_concurrent()
    data = pa.table({"p": ["b", "a"], "k": [5, 6], "v": ["FIVE", "six"]})
    out = stale.upsert(data.to_batches()[0] if batch else data, on=["k"], when_matched=when_matched)
    got = {r["k"]: r for r in Dataset.open(store, "u").read().to_pylist()}
    assert out.version == Dataset.open(store, "u").version
    five = {
        "update": {"p": "b", "k": 5, "v": "FIVE", "c": None},
        "ignore": {"p": "a", "k": 5, "v": "five", "c": "q"},
    }
    if when_matched == "delete":
        assert 5 not in got
    else:
        assert got[5] == five[when_matched]
    assert got[6] == {"p": "a", "k": 6, "v": "six", "c": None}
    assert sorted(got) == sorted({1, 2, 6} | ({5} if when_matched != "delete" else set()))


def test_a_column_the_data_lacked_from_the_start_is_still_refused() -> None:
    # Only columns added by a concurrent commit are filled: the check at call time stays.
    store, stale = _stale_and_concurrent()
    with pytest.raises(SchemaMismatch, match=r"column 'v' is missing from the data"):
        stale.upsert(pa.table({"p": ["b"], "k": [5]}), on=["k"])
    assert Dataset.open(store, "u").read().num_rows == 3
