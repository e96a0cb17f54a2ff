"""Property: a kartothek write on any pointer parquetry wrote (imitated as kartothek 5.3.0
does it: the extension dropped, user metadata kept, partitions deleted) is reconciled
exactly: the newest parquetry version minus what kartothek deleted, nothing else lost.
The real kartothek runs in tests/kartothek/test_kartothek_reconcile.py."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from parquetry import Dataset
from parquetry.dataset.naming import metadata_key
from parquetry.store import LocalStore

UUID = "props"

STEP = st.one_of(
    st.tuples(st.just("append"), st.sampled_from("ABC")),
    st.tuples(st.just("checkpoint"), st.just("")),
    st.tuples(st.just("snap"), st.just("")),
)


def _table(first: int, n: int, country: str) -> pa.Table:
    return pa.table({"id": pa.array(range(first, first + n), pa.int64()), "c": [country] * n})


def _ids_of(root: Path, labels: dict[str, str]) -> list[int]:
    """The oracle: ids read straight from the data files of ``labels``."""
    out: list[int] = []
    for key in labels.values():
        out += pq.read_table(root / key, columns=["id"]).column("id").to_pylist()
    return sorted(out)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    policy=st.sampled_from(["every-commit", "manual"]),
    steps=st.lists(STEP, min_size=1, max_size=7),
    data=st.data(),
)
def test_kartothek_deletions_on_any_pointer_are_applied_exactly(
    policy: str, steps: list[tuple[str, str]], data: st.DataObject
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        store = LocalStore(root)
        ds = Dataset.create(
            store, UUID, _table(0, 3, "A"), partition_on=["c"], pointer_policy=policy
        )
        snap: bytes | None = None
        nxt = 100
        for op, country in steps:
            if op == "append":
                ds = ds.append(_table(nxt, 2, country))
                nxt += 100
            elif op == "checkpoint":
                ds = ds.checkpoint()
            elif snap is None:
                snap = store.get(metadata_key(UUID))
        if snap is None:
            snap = store.get(metadata_key(UUID))
        newest = {lb: files["table"] for lb, files in ds._doc.partitions.items()}

        # kartothek read ``snap`` and deleted some of its partitions (maybe every one a
        # version added, maybe all of them).
        doc = {k: v for k, v in json.loads(snap).items() if k != "parquetry"}
        seen = sorted(doc["partitions"])
        deleted = data.draw(st.sets(st.sampled_from(seen)) if seen else st.just(set()))
        doc["partitions"] = {lb: p for lb, p in doc["partitions"].items() if lb not in deleted}
        store.put(metadata_key(UUID), json.dumps(doc).encode())

        got = Dataset.open(store, UUID).checkpoint()
        want = {lb: key for lb, key in newest.items() if lb not in deleted}
        assert sorted(got._doc.partitions) == sorted(want)
        assert sorted(got.read().column("id").to_pylist()) == _ids_of(root, want)
        if deleted:
            assert got.versions()[-1].operation == "kartothek"


_VALUES = {
    pa.int64(): st.integers(-(2**63), 2**63 - 1),
    pa.int32(): st.integers(-(2**31), 2**31 - 1),
    pa.string(): st.text(max_size=80),
    pa.bool_(): st.booleans(),
    pa.date32(): st.dates(),
    pa.timestamp("us"): st.datetimes(),
    pa.float64(): st.floats(allow_nan=True),
}


@settings(max_examples=60, deadline=None)
@given(
    t=st.sampled_from(list(_VALUES)),
    data=st.data(),
    rows_per_group=st.integers(1, 7),
)
def test_footer_statistics_equal_computed_ones(
    t: pa.DataType, data: st.DataObject, rows_per_group: int
) -> None:
    """What a reconcile records for a file kartothek added (from its footer) is what
    parquetry computes from the rows (floats: the null count only, min/max unknown)."""
    import io

    from parquetry.dataset.kartothek_adopt import footer_stats
    from parquetry.dataset.stats import compute_stats

    values = data.draw(st.lists(st.none() | _VALUES[t], min_size=1, max_size=20))
    table = pa.table({"x": pa.array(values, t)})
    sink = io.BytesIO()
    pq.write_table(table, sink, row_group_size=rows_per_group)
    footer = pq.ParquetFile(io.BytesIO(sink.getvalue())).metadata
    got = footer_stats(footer, table.schema)["x"]
    want = compute_stats(table)["x"]
    if pa.types.is_floating(t):
        assert got == [None, None, want[2]]
    elif got[0] is None:
        # Unknown bounds are always allowed (never prune); only for all-null columns or
        # bounds parquetry does not record (long strings) are they expected.
        assert want[0] is None or (pa.types.is_string(t) and got[2] == want[2])
    else:
        assert got == want
