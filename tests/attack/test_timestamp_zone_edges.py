"""Timestamps at the ends of Python's datetime range in zones other than UTC: a value of
year 1 in a zone west of UTC (or of year 9999 east of it) is a valid Arrow timestamp with
no Python datetime in its zone (``as_py`` raises OverflowError). Writing, indexing,
predicates (``in`` included), compaction and checkpoints must treat it as any other value:
no raw error, and every lookup equals Arrow's own comparison of the stored integers."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import given, settings
from hypothesis import strategies as st

from parquetry.dataset import Dataset
from parquetry.store import MemoryStore

UTC = dt.UTC
FIRST = dt.datetime(1, 1, 1, tzinfo=UTC)
LAST = dt.datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)
EDGES = [FIRST, FIRST + dt.timedelta(hours=1), dt.datetime(2000, 1, 1, tzinfo=UTC), LAST]
ZONES = ["America/St_Johns", "Asia/Tokyo", "UTC", "Pacific/Kiritimati"]


def _expected(table: pa.Table, op: str, value: Any) -> int:
    """Rows matching, compared as the stored microseconds since the epoch (no as_py)."""
    stored = pc.cast(table.column("c"), pa.int64())
    micro = (
        [pc.cast(pa.scalar(v, pa.timestamp("us", tz="UTC")), pa.int64()) for v in value]
        if op == "in"
        else None
    )
    if op == "in":
        mask = pc.is_in(stored, value_set=pa.array([m.as_py() for m in micro], pa.int64()))
    else:
        probe = pc.cast(pa.scalar(value, pa.timestamp("us", tz="UTC")), pa.int64())
        fn = {"==": pc.equal, "!=": pc.not_equal, "<": pc.less, ">=": pc.greater_equal}[op]
        mask = fn(stored, probe)
    return int(pc.sum(pc.fill_null(mask, False).cast(pa.int64())).as_py() or 0)


def test_a_year_one_timestamp_west_of_utc_is_written_indexed_and_found() -> None:
    # compute_stats (as_py of the minimum), the ``in`` predicate (as_py of each value) and
    # the kartothek index export (as_py of the bounds) raised a raw OverflowError.
    t = pa.timestamp("us", tz="America/St_Johns")
    table = pa.table({"p": [0, 1, 1], "c": pa.array([FIRST, EDGES[2], None], t)})
    ds = Dataset.create(MemoryStore(), "ds", table, partition_on=["p"], secondary_indices=["c"])
    for op, value in [("in", [FIRST]), ("==", FIRST), ("<", EDGES[1]), ("!=", FIRST)]:
        got = ds.read(predicates=[[("c", op, value)]]).num_rows
        assert got == _expected(table, op, value), (op, value)
    ds = ds.compact()
    ds = ds.checkpoint()
    assert ds.read(predicates=[[("c", "in", [FIRST, LAST])]]).num_rows == 1


@settings(max_examples=25, deadline=None)
@given(
    zone=st.sampled_from(ZONES),
    values=st.lists(st.sampled_from([*EDGES, None]), min_size=1, max_size=6),
    op=st.sampled_from(["in", "==", "!=", "<", ">="]),
    probe=st.sampled_from(EDGES),
)
def test_zone_edge_lookups_equal_arrows_comparison(
    zone: str, values: list[dt.datetime | None], op: str, probe: dt.datetime
) -> None:
    t = pa.timestamp("us", tz=zone)
    table = pa.table({"p": [i % 2 for i in range(len(values))], "c": pa.array(values, t)})
    ds = Dataset.create(MemoryStore(), "ds", table, partition_on=["p"], secondary_indices=["c"])
    value: Any = [probe, EDGES[0]] if op == "in" else probe
    assert ds.read(predicates=[[("c", op, value)]]).num_rows == _expected(table, op, value)
    ds = ds.checkpoint()
    assert ds.read(predicates=[[("c", op, value)]]).num_rows == _expected(table, op, value)
