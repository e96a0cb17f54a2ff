"""Idempotent commits: ``txn=(app_id, version)`` (Delta's SetTransaction)."""

from __future__ import annotations

import threading

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parquetry.dataset import Dataset, write_files
from parquetry.errors import InvalidArgument
from parquetry.store import MemoryStore, Store


def _rows(n: int, start: int = 0) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table({"id": ids, "p": [f"p{i % 2}" for i in ids]})


def _data_files(store: Store, uuid: str) -> set[str]:
    return {m.key for m in store.list(f"{uuid}/") if m.key.endswith(".parquet")}


def test_replayed_txn_commits_nothing_and_survives_checkpoints(any_store: Store) -> None:
    ds = Dataset.create(any_store, "t", _rows(4), partition_on=["p"])
    first = ds.append(_rows(2, 100), txn=("query-a", 0))
    assert first.transactions == {"query-a": 0}
    files = _data_files(any_store, "t")
    # A replay from the stale handle (what a restarted driver holds): the check runs in
    # the commit loop against the newest state, so nothing commits and its files go.
    again = ds.append(_rows(2, 100), txn=("query-a", 0))
    assert again.version == first.version
    assert again.read().num_rows == 6
    assert _data_files(any_store, "t") == files
    # A replay from an up-to-date handle writes no file at all.
    assert first.append(_rows(2, 100), txn=("query-a", 0)).version == first.version
    assert _data_files(any_store, "t") == files
    # Other applications and later versions commit; an older version is a replay too.
    ds = first.append(_rows(1, 200), txn=("query-b", 0)).append(_rows(1, 300), txn=("query-a", 5))
    assert ds.transactions == {"query-a": 5, "query-b": 0}
    assert ds.append(_rows(1, 400), txn=("query-a", 3)).version == ds.version
    # Overwrites keep the record; checkpoints and the head carry it (a fresh open reads it).
    ds = Dataset.commit_files(
        any_store,
        "t",
        write_files(any_store, "t", _rows(3, 500), partition_on=["p"]),
        mode="overwrite",
        txn=("query-a", 6),
    )
    ds.checkpoint()
    reopened = Dataset.open(any_store, "t")
    assert reopened.transactions == {"query-a": 6, "query-b": 0}
    assert sorted(reopened.read()["id"].to_pylist()) == [500, 501, 502]
    replay = Dataset.commit_files(
        any_store,
        "t",
        write_files(any_store, "t", _rows(3, 900), partition_on=["p"]),
        txn=("query-a", 6),
    )
    assert replay.version == reopened.version
    assert Dataset.open(any_store, "t").read().num_rows == 3
    # An old version opened by number shows its own record.
    assert Dataset.open(any_store, "t", version=1).transactions == {"query-a": 0}


def test_first_commit_records_txn_and_bad_txns_are_refused(memory_store: Store) -> None:
    files = write_files(memory_store, "n", _rows(3))
    ds = Dataset.commit_files(memory_store, "n", files, txn=("app", 7))
    assert (ds.version, ds.transactions) == (0, {"app": 7})
    assert (
        Dataset.commit_files(
            memory_store, "n", write_files(memory_store, "n", _rows(3)), txn=("app", 7)
        ).version
        == 0
    )
    for bad in [("", 1), ("app", -1), ("app", "1"), ("app", True), "app", ("a", 1, 2)]:
        with pytest.raises(InvalidArgument, match="txn"):
            ds.append(_rows(1), txn=bad)  # type: ignore[arg-type]
    assert Dataset.open(memory_store, "n").read().num_rows == 3


def test_racing_replays_of_one_batch_commit_once(local_store: Store) -> None:
    Dataset.create(local_store, "r", _rows(1))
    for batch in range(2):
        handles = [Dataset.open(local_store, "r") for _ in range(5)]
        barrier = threading.Barrier(len(handles))
        errors: list[BaseException] = []

        def replay(
            ds: Dataset,
            b: int = batch,
            barrier: threading.Barrier = barrier,
            errors: list[BaseException] = errors,
        ) -> None:
            try:
                barrier.wait()
                ds.append(_rows(10, 1000 + 10 * b), txn=("stream", b))
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        # Five drivers replay the same batch from handles that predate every attempt.
        threads = [threading.Thread(target=replay, args=(ds,)) for ds in handles]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        ds = Dataset.open(local_store, "r")
        assert sorted(ds.read()["id"].to_pylist()) == [0, *range(1000, 1010 + 10 * batch)]
        assert ds.transactions == {"stream": batch}
        assert ds.version == batch + 1
    # The losers' files are deleted: only the committed ones remain.
    assert len(_data_files(local_store, "r")) == len(Dataset.open(local_store, "r")._doc.files)


@settings(max_examples=25, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 4), st.booleans()),
        min_size=1,
        max_size=10,
    )
)
def test_txn_oracle(steps: list[tuple[str, int, bool]]) -> None:
    """Sequential appends (from the newest or a stale handle): a batch commits exactly when
    its version exceeds every version of its application committed before."""
    store = MemoryStore()
    stale = Dataset.create(store, "h", _rows(1, -1))
    ds = stale
    recorded: dict[str, int] = {}
    expected = 1
    for n, (app, version, use_stale) in enumerate(steps):
        handle = stale if use_stale else ds
        ds = handle.append(_rows(1, n), txn=(app, version))
        if version > recorded.get(app, -1):
            recorded[app] = version
            expected += 1
        assert ds.transactions == recorded
    latest = Dataset.open(store, "h")
    assert latest.read().num_rows == expected
    assert latest.transactions == recorded


def test_snapshot_manifest_records_txn_and_replays_are_noops(any_store: Store) -> None:
    from parquetry.snapshot import ParquetDatasetStore

    pds = ParquetDatasetStore(any_store)

    def commit(rows: int, txn: tuple[str, int]) -> int:
        write_id = pds.new_write_id()
        part = pds.write_part("snap", write_id, "part-0.parquet", _rows(rows))
        return pds.commit_write("snap", write_id, [part], overwrite=True, txn=txn).row_count

    assert commit(3, ("q", 0)) == 3
    assert commit(5, ("q", 1)) == 5
    assert commit(7, ("q", 1)) == 5  # replay of batch 1: the manifest stays
    assert commit(9, ("q", 0)) == 5
    manifest = pds.read_manifest("snap")
    assert manifest.txns == {"q": 1}
    assert commit(2, ("other", 0)) == 2
    assert pds.read_manifest("snap").txns == {"q": 1, "other": 0}
    assert pds.read_dataset("snap").num_rows == 2
    # The replays' staged parts are gone: only the committed part remains.
    staged = [m.key for m in any_store.list("snap/") if "staging" in m.key]
    assert staged == []
