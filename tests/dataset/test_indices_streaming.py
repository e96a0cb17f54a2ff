"""Large indices answer point lookups with one ranged read; inputs are streamed."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from parquetry.dataset import Dataset, write_files
from parquetry.dataset.indexfile import INDEX_ROW_GROUP
from parquetry.errors import InvalidArgument
from parquetry.store import MemoryStore
from parquetry.testing import CountingStore


@pytest.fixture(scope="module")
def big_index() -> tuple[MemoryStore, pa.Table]:
    n = INDEX_ROW_GROUP * 6
    table = pa.table(
        {
            "p": pa.array([i % 7 for i in range(n)], pa.int64()),
            "c": pa.array([(i * 7919) % (n // 2) for i in range(n)], pa.int64()),
            "s": [f"s{(i * 31) % 5000:05d}" for i in range(n)],
        }
    )
    store = MemoryStore()
    Dataset.create(store, "ix", table, partition_on=["p"], secondary_indices=["c", "s"])
    return store, table


@pytest.mark.parametrize(
    ("pred", "ranged"),
    [
        (("c", "==", 12345), True),
        (("s", "==", "s01234"), True),
        (("c", "in", [5, 17, 4000]), None),
        (("c", "<", 100), True),
        (("c", ">=", 3), None),
        (("c", "!=", 3), None),
        (("c", "==", -1), 0),
    ],
)
def test_lookup_results_and_cost(
    big_index: tuple[MemoryStore, pa.Table], pred: tuple, ranged: bool | int | None
) -> None:
    inner, table = big_index
    store = CountingStore(inner)
    ds = Dataset.open(store, "ix")
    store.reset()
    plan = ds.plan([[pred]])
    if ranged is None:  # few ranges or the whole file
        assert store.total <= 3
    elif ranged == 0:  # no row group's min/max can hold the value: no request at all
        assert store.total == 0
    else:  # only the row groups that may hold the value, in one ranged GET
        assert store.counts == {"get_range": 1}
    want_parts = set(table.filter(_expr(pred))["p"].to_pylist())
    assert {dict(f.partition)["p"] for f in plan.files} == want_parts
    assert ds.read(predicates=[[pred]]).num_rows == table.filter(_expr(pred)).num_rows


def _expr(pred: tuple) -> pc.Expression:
    col, op, value = pred
    field = pc.field(col)
    if op == "in":
        return field.isin(value)
    return {"==": field == value, "<": field < value, ">=": field >= value, "!=": field != value}[
        op
    ]


def test_partitioned_input_is_written_while_streaming() -> None:
    store = MemoryStore()
    seen_files: list[int] = []

    def batches() -> Iterator[pa.RecordBatch]:
        for i in range(6):
            seen_files.append(sum(1 for _ in store.list("st")))
            yield pa.record_batch({"p": [i % 2] * 1000, "v": list(range(1000))})

    files = write_files(store, "st", batches(), partition_on=["p"], flush_bytes=20_000)
    assert seen_files[0] == 0
    assert seen_files[-1] > 0  # files were written before the input was exhausted
    assert sum(f.rows for f in files) == 6000
    ds = Dataset.commit_files(store, "st", files, mode="create")
    assert ds.read(predicates=[[("p", "==", 1)]]).num_rows == 3000
    assert ds.schema.names == ["p", "v"]


def test_pandas_input_through_arrow_c_stream() -> None:
    import pandas as pd

    df = pd.DataFrame({"k": ["a", "b", "a"], "v": [1.5, 2.5, 3.5]})
    ds = Dataset.create(MemoryStore(), "pd", df, partition_on=["k"])
    got = ds.read(predicates=[[("k", "==", "a")]])
    assert sorted(got["v"].to_pylist()) == [1.5, 3.5]
    assert ds.schema.field("k").type == pa.string()


def test_index_pairs_match_the_data_files(big_index: tuple[MemoryStore, pa.Table]) -> None:
    store, _ = big_index
    ds = Dataset.open(store, "ix")
    expected: set[tuple[object, str]] = set()
    for planned in ds.plan(None).files:
        values = ds.read_file(planned, columns=["s"]).column("s")
        expected |= {(v, planned.label) for v in pc.unique(values).to_pylist()}
    pairs = ds.index_pairs("s")
    assert pairs.column_names == ["value", "label"]
    got = list(zip(pairs["value"].to_pylist(), pairs["label"].to_pylist(), strict=True))
    assert len(got) == len(set(got))
    assert set(got) == expected
    with pytest.raises(InvalidArgument, match="no secondary index on 'p'"):
        ds.index_pairs("p")
