"""readStream.format("parquetry"): offsets, admission control, change commits, GC, restarts.

The driver-side half (offsets, planning, reading a planned task) is exercised on the stream
reader object directly, as Spark's streaming source runner calls it; the Spark tests run real
queries (memory sink, checkpoints, Trigger.AvailableNow) on the shared local session.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql.streaming.datasource import ReadAllAvailable

from parquetry.dataset import Dataset
from parquetry.errors import ChangeCommitError, InvalidArgument, VersionExpired
from parquetry.spark.options import SourceOptions
from parquetry.spark.stream_options import StreamOptions
from parquetry.spark.stream_source import ParquetryStreamReader
from parquetry.spark.types import arrow_to_spark_schema
from parquetry.store import Store, open_store


def _chunk(start: int, n: int) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table(
        {"id": pa.array(ids, pa.int64()), "p": pa.array([i % 2 for i in ids], pa.int64())}
    )


def _lake(tmp_path: Path) -> tuple[str, Store]:
    (tmp_path / "lake").mkdir()
    url = (tmp_path / "lake").resolve().as_uri()
    return url, open_store(url)


def _reader(url: str, ds: Dataset, **options: str) -> ParquetryStreamReader:
    raw = {"store": url, "dataset": ds.uuid, **options}
    schema = arrow_to_spark_schema(ds.schema)
    return ParquetryStreamReader(SourceOptions.parse(raw), StreamOptions.parse(raw), schema)


def _batches(
    reader: ParquetryStreamReader, start: dict[str, Any], limit: Any = None
) -> list[tuple[dict[str, Any], list[int]]]:
    """Every micro-batch until no new data: (end offset, ids), as Spark drives a source."""
    out = []
    while True:
        end = reader.latestOffset(start, limit or reader.getDefaultReadLimit())
        if end == start:
            return out
        end = json.loads(json.dumps(end))  # offsets travel as JSON
        ids = [
            i
            for part in reader.partitions(start, end)
            for batch in reader.read(part)
            for i in batch.column("id").to_pylist()
        ]
        reader.commit(end)
        out.append((end, ids))
        start = end


def test_offsets_split_versions_and_every_row_is_read_once(tmp_path: Path) -> None:
    url, store = _lake(tmp_path)
    ds = Dataset.create(store, "ds", _chunk(0, 10), partition_on=["p"])
    reader = _reader(url, ds, maxFilesPerTrigger="1")
    start = reader.initialOffset()
    assert start == {"version": 0, "files": 0, "snapshot": True}  # the whole current version
    ds = ds.append(_chunk(10, 10)).compact().append(_chunk(20, 5))
    batches = _batches(reader, start)
    # One file per batch (2 files per commit, p=0 and p=1); the compaction (v2) is skipped.
    assert [len(set(ids)) for _, ids in batches] == [5, 5, 5, 5, 3, 2]
    assert [end for end, _ in batches] == [
        # The first batch's end keeps its start (a replay after a crash starts afresh).
        {"version": 0, "files": 1, "snapshot": True, "from": start},
        {"version": 0},
        {"version": 1, "files": 1},
        {"version": 2},
        {"version": 3, "files": 1},
        {"version": 3},
    ]
    assert Counter(i for _, ids in batches for i in ids) == Counter(range(25))
    # A restart from any checkpointed offset replans exactly the rest (a fresh reader
    # process): no duplicate, no loss.
    for k, (offset, _) in enumerate(batches):
        rest = _batches(_reader(url, ds, maxFilesPerTrigger="1"), offset)
        assert sorted(i for _, ids in rest for i in ids) == sorted(
            i for _, ids in batches[k + 1 :] for i in ids
        )
    # Bytes: a limit below one file still admits one file per batch; all-available one batch.
    by_bytes = _batches(_reader(url, ds, maxBytesPerTrigger="1"), {"version": 0})
    assert [len(ids) for _, ids in by_bytes] == [5, 5, 3, 2]
    everything = _batches(_reader(url, ds), {"version": -1}, ReadAllAvailable())
    assert len(everything) == 1
    assert Counter(everything[0][1]) == Counter(list(range(20)) + list(range(20, 25)))


def test_starting_points_and_available_now(tmp_path: Path) -> None:
    url, store = _lake(tmp_path)
    ds = Dataset.create(store, "ds", _chunk(0, 4), partition_on=["p"])
    time.sleep(0.01)
    middle = dt.datetime.now(dt.UTC)
    ds = ds.append(_chunk(4, 4)).append(_chunk(8, 4))
    assert _reader(url, ds, startingVersion="2").initialOffset() == {"version": 1}
    assert _reader(url, ds, startingVersion="latest").initialOffset() == {"version": 2}
    stamp = _reader(url, ds, startingTimestamp=middle.isoformat())
    assert stamp.initialOffset() == {"version": 0}
    ids = [i for _, b in _batches(stamp, stamp.initialOffset()) for i in b]
    assert sorted(ids) == list(range(4, 12))
    # AvailableNow: commits landing after the trigger started are left for the next run.
    now = _reader(url, ds, startingVersion="1")
    now.prepareForTriggerAvailableNow()
    ds.append(_chunk(12, 4))
    ids = [i for _, b in _batches(now, now.initialOffset()) for i in b]
    assert sorted(ids) == list(range(4, 12))
    for bad, message in [
        ({"startingVersion": "-1"}, "startingVersion"),
        ({"startingVersion": "1", "startingTimestamp": "2026-01-01"}, "exclude each other"),
        ({"maxFilesPerTrigger": "0"}, "maxFilesPerTrigger"),
        ({"maxBytesPerTrigger": "lots"}, "maxBytesPerTrigger"),
        ({"skipChangeCommits": "yes"}, "skipChangeCommits"),
    ]:
        with pytest.raises(InvalidArgument, match=message):
            StreamOptions.parse(bad)
    assert StreamOptions.parse({"maxbytespertrigger": "2m"}).max_bytes == 2 << 20


def test_change_commits_fail_or_follow_the_options(tmp_path: Path) -> None:
    url, store = _lake(tmp_path)
    ds = Dataset.create(store, "ds", _chunk(0, 10), partition_on=["p"])
    ds = ds.delete_where([[("id", "==", 3)]])  # v1 rewrites the p=1 file
    ds = ds.append(_chunk(10, 2))  # v2
    ds = ds.delete_where([[("p", "==", 0)]])  # v3 drops partition p=0 (removes only)
    ds = ds.append(_chunk(20, 2))  # v4
    with pytest.raises(ChangeCommitError, match=r"version 1 of dataset 'ds' \(delete\)") as err:
        _batches(_reader(url, ds), {"version": 0})
    assert "skipChangeCommits" in str(err.value)
    skipped = _batches(_reader(url, ds, skipChangeCommits="true"), {"version": 0})
    assert sorted(i for _, ids in skipped for i in ids) == [10, 11, 20, 21]
    # ignoreChanges re-emits the rewritten file's rows (Delta's semantics); deletes emit nothing.
    changed = _batches(_reader(url, ds, ignoreChanges="true"), {"version": 0})
    assert sorted(i for _, ids in changed for i in ids) == [1, 5, 7, 9, 10, 11, 20, 21]
    # ignoreDeletes skips v3 (removes only) but still fails on v1's rewrite.
    with pytest.raises(ChangeCommitError, match="version 1 "):
        _batches(_reader(url, ds, ignoreDeletes="true"), {"version": 0})
    deletes = _batches(_reader(url, ds, ignoreDeletes="true"), {"version": 1})
    assert sorted(i for _, ids in deletes for i in ids) == [10, 11, 20, 21]


def test_a_stream_behind_the_gc_retention_fails_naming_the_version(tmp_path: Path) -> None:
    url, store = _lake(tmp_path)
    ds = Dataset.create(store, "ds", _chunk(0, 4), partition_on=["p"])
    reader = _reader(url, ds)
    done = _batches(reader, reader.initialOffset())
    offset = done[-1][0]
    assert offset == {"version": 0, "from": {"version": 0, "files": 0, "snapshot": True}}
    for k in range(1, 4):
        ds = ds.append(_chunk(4 * k, 4))
    ds.garbage_collect(retention=dt.timedelta(0))  # versions 0-2 expire
    with pytest.raises(VersionExpired, match=r"version 1 of dataset 'ds' expired") as err:
        _batches(_reader(url, ds), offset)
    assert "retention" in str(err.value)
    # A stream that keeps up within the retention loses nothing.
    fresh = _reader(url, ds, startingVersion="3")
    assert sorted(i for _, ids in _batches(fresh, fresh.initialOffset()) for i in ids) == [
        12,
        13,
        14,
        15,
    ]


def test_predicates_prune_partitions_and_filter_rows(tmp_path: Path) -> None:
    url, store = _lake(tmp_path)
    ds = Dataset.create(store, "ds", _chunk(0, 10), partition_on=["p"])
    ds = ds.append(_chunk(10, 10))
    odd_small = json.dumps([[["p", "==", 1], ["id", "<", 15]]])
    reader = _reader(url, ds, predicates=odd_small)
    start = {"version": -1}
    end = reader.latestOffset(start, ReadAllAvailable())
    parts = reader.partitions(start, end)
    planned = [f for part in parts for f in part.value.files]
    assert sorted({dict(f.partition)["p"] for f in planned}) == [1]  # p=0 files never read
    assert len(planned) == 2
    ids = sorted(i for part in parts for b in reader.read(part) for i in b.column("id").to_pylist())
    assert ids == [1, 3, 5, 7, 9, 11, 13]


def _read(reader: ParquetryStreamReader, start: dict[str, Any], end: dict[str, Any]) -> list[int]:
    return [
        i
        for part in reader.partitions(start, end)
        for batch in reader.read(part)
        for i in batch.column("id").to_pylist()
    ]


@pytest.mark.parametrize("starting", [{}, {"startingVersion": "latest"}])
def test_a_first_batch_replayed_after_a_crash_reads_the_same_rows(
    tmp_path: Path, starting: dict[str, str]
) -> None:
    """Spark replays a logged but uncommitted first batch with a *fresh* initialOffset as
    its start; commits landing meanwhile moved it (the default start and ``latest`` are the
    newest version). The replay used to read nothing (the start was past the end): the
    first batch's rows were lost."""
    url, store = _lake(tmp_path)
    ds = Dataset.create(store, "ds", _chunk(0, 10), partition_on=["p"])
    if starting:
        ds = ds.append(_chunk(10, 4))
    first = _reader(url, ds, maxFilesPerTrigger="1", **starting)
    start = first.initialOffset()
    if starting:
        ds = ds.append(_chunk(20, 4))
    end = json.loads(json.dumps(first.latestOffset(start, first.getDefaultReadLimit())))
    ids = _read(first, start, end)
    assert ids
    assert len({i % 2 for i in ids}) == 1  # one file (one partition) of a commit
    # Killed before the batch committed; a commit lands; a new driver replays the batch.
    ds = ds.append(_chunk(30, 6))
    again = _reader(url, ds, maxFilesPerTrigger="1", **starting)
    fresh = again.initialOffset()
    assert fresh != start  # Spark's start for the replay is not the one planned from
    assert sorted(_read(again, fresh, end)) == sorted(ids)
    again.commit(end)
    rest = [i for _, b in _batches(again, end) for i in b]
    before = range(20, 24) if starting else range(10)  # the commits after the start
    assert Counter(ids + rest) == Counter([*before, *range(30, 36)])


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ops=st.lists(st.sampled_from(["append", "compact", "index"]), min_size=1, max_size=6),
    max_files=st.integers(1, 3),
    restarts=st.sets(st.integers(0, 12), max_size=3),
    crashes=st.sets(st.integers(0, 12), max_size=2),
)
def test_every_added_row_is_emitted_once_whatever_the_limits_and_restarts(
    tmp_path_factory: pytest.TempPathFactory,
    ops: list[str],
    max_files: int,
    restarts: set[int],
    crashes: set[int],
) -> None:
    """Oracle: across any admission limit, restarts from any checkpointed offset and crashes
    (a batch logged, not committed, replayed by a new process after one more commit, as
    Spark replays it), an append-only history (plus compactions and index builds, which
    change no rows) is emitted exactly once: the rows of the starting snapshot and of every
    append."""
    url, store = _lake(tmp_path_factory.mktemp("prop"))
    ds = Dataset.create(store, "ds", _chunk(0, 6), partition_on=["p"])

    def new_reader() -> ParquetryStreamReader:
        return _reader(url, ds, maxFilesPerTrigger=str(max_files))

    reader = new_reader()
    offset = reader.initialOffset()
    expected = Counter(range(6))
    seen: Counter[int] = Counter()
    batch = 0
    for n, op in enumerate(ops, start=1):
        if op == "append":
            ds = ds.append(_chunk(100 * n, 1 + n % 3))
            expected.update(range(100 * n, 100 * n + 1 + n % 3))
        elif op == "compact":
            ds = ds.compact()
        elif "id" not in ds.secondary_indices:
            ds = ds.build_index("id")
        while (end := reader.latestOffset(offset, reader.getDefaultReadLimit())) != offset:
            end = json.loads(json.dumps(end))  # offsets travel as JSON
            ids = _read(reader, offset, end)
            if batch in crashes:  # the sink never saw `ids`; a new process replays the batch
                ds = ds.append(_chunk(100 * n + 50, 2))
                expected.update(range(100 * n + 50, 100 * n + 52))
                reader = new_reader()
                fresh = reader.initialOffset()  # Spark's start for a first batch's replay
                ids = _read(reader, fresh if batch == 0 else offset, end)
            reader.commit(end)
            seen.update(ids)
            offset = end
            if batch in restarts:  # a new process resumes from the checkpointed offset
                reader = new_reader()
            batch += 1
    assert seen == expected


def test_stream_offsets_on_s3(moto_server: Any) -> None:
    """The same planning and reading against S3 (moto), store options passed through."""
    url, options = moto_server.url(), moto_server.options()
    store = open_store(url, **options)
    ds = Dataset.create(store, "streamed", _chunk(0, 6), partition_on=["p"])
    raw = {"store": url, "dataset": "streamed", "maxFilesPerTrigger": "1", **options}
    schema = arrow_to_spark_schema(ds.schema)

    def reader() -> ParquetryStreamReader:
        return ParquetryStreamReader(SourceOptions.parse(raw), StreamOptions.parse(raw), schema)

    first = _batches(reader(), reader().initialOffset())
    ds = ds.append(_chunk(10, 4))
    rest = _batches(reader(), first[-1][0])  # a restart from the checkpointed offset
    assert [len(ids) for _, ids in first + rest] == [3, 3, 2, 2]
    assert sorted(i for _, ids in first + rest for i in ids) == [*range(6), *range(10, 14)]
