"""The kartothek pointer policy, ``checkpoint`` and reconciling a foreign pointer (without the
kartothek venv: a kartothek write is imitated by editing the pointer as kartothek does; the
real thing is tests/kartothek/test_kartothek_pointer_policy.py)."""

from __future__ import annotations

import json
import shutil
import threading
import uuid as uuid_module
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parquetry import Dataset
from parquetry.dataset.naming import data_key, metadata_key
from parquetry.dataset.pointer import (
    POINTER_BYTES_PER_COMMIT,
    POINTER_EVERY_COMMIT_BYTES,
    THRESHOLD_ENV,
    pointer_due,
)
from parquetry.errors import InvalidArgument
from parquetry.store import LocalStore

UUID = "pol"


def _table(ids: range, country: str) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(list(ids), pa.int64()),
            "country": pa.array([country] * len(ids)),
            "customer": pa.array([i % 7 for i in ids], pa.int64()),
        }
    )


def _pointer(store: LocalStore) -> dict[str, Any]:
    return json.loads(store.get(metadata_key(UUID)))


def _ids(ds: Dataset, predicates: Any = None) -> list[int]:
    return sorted(ds.read(predicates=predicates).column("id").to_pylist())


def test_pointer_due_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    big = POINTER_EVERY_COMMIT_BYTES + 1
    assert pointer_due("every-commit", 10 * big, 1, at_checkpoint=False)
    assert not pointer_due("manual", 1, 10**6, at_checkpoint=True)
    assert pointer_due("auto", POINTER_EVERY_COMMIT_BYTES, 1, at_checkpoint=False)
    assert not pointer_due("auto", big, 10**6, at_checkpoint=False), "only at checkpoints"
    needed = -(-big // POINTER_BYTES_PER_COMMIT)
    assert not pointer_due("auto", big, needed - 1, at_checkpoint=True)
    assert pointer_due("auto", big, needed, at_checkpoint=True)
    monkeypatch.setenv(THRESHOLD_ENV, "10")
    assert not pointer_due("auto", 11, 1, at_checkpoint=False)
    monkeypatch.setenv(THRESHOLD_ENV, "ten")
    with pytest.raises(InvalidArgument, match=THRESHOLD_ENV):
        pointer_due("auto", 11, 1, at_checkpoint=False)
    with pytest.raises(InvalidArgument, match="pointer policy"):
        pointer_due("sometimes", 1, 1, at_checkpoint=False)


@settings(max_examples=60, deadline=None)
@given(
    size=st.integers(POINTER_EVERY_COMMIT_BYTES + 1, 400 * POINTER_EVERY_COMMIT_BYTES),
    every=st.integers(1, 200),
    commits=st.integers(1, 20_000),
)
def test_auto_pointer_costs_at_most_the_budget_per_commit(
    size: int, every: int, commits: int
) -> None:
    """Above the threshold, ``auto`` writes at most 64 KiB of pointer per commit amortised
    (plus one pointer), and never lags more than the budget plus one checkpoint interval."""
    since = written = 0
    lag = 0
    for n in range(1, commits + 1):
        since += 1
        if pointer_due("auto", size, since, at_checkpoint=n % every == 0):
            written += size
            since = 0
        lag = max(lag, since)
    assert written <= commits * POINTER_BYTES_PER_COMMIT + size
    assert lag <= -(-size // POINTER_BYTES_PER_COMMIT) + every


def test_policy_is_a_setting_kartothek_users_do_not_see(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    ds = Dataset.create(store, UUID, _table(range(4), "DE"), partition_on=["country"])
    assert ds.pointer_policy == "auto"
    with pytest.raises(InvalidArgument, match="pointer policy"):
        ds.set_pointer_policy("never")
    ds = ds.set_pointer_policy("manual")
    assert ds.pointer_policy == "manual"
    assert ds.set_pointer_policy("manual").version == ds.version, "no commit when unchanged"
    ds = ds.append(_table(range(4, 6), "FR"))
    assert Dataset.open(store, UUID).pointer_policy == "manual"
    assert [v.operation for v in ds.versions()] == ["create", "set pointer policy", "append"]
    assert _pointer(store)["parquetry"]["version"]["number"] == 0, "manual: pointer stays"
    assert ds.checkpoint().version == ds.version
    pointer = _pointer(store)
    assert pointer["parquetry"]["version"]["number"] == ds.version
    # The setting is not in kartothek's user metadata; only the marker of the version the
    # pointer shows is (dataset/reconcile.py uses it to find the version kartothek read).
    assert "manual" not in json.dumps(pointer["metadata"])
    assert pointer["metadata"]["parquetry_pointer_version"] == ds.version
    assert "parquetry_pointer_version" not in ds.metadata
    assert pointer["parquetry"]["settings"] == {"pointer": "manual"}
    with pytest.raises(InvalidArgument, match="pointer policy"):
        Dataset.create(store, "other", _table(range(2), "DE"), pointer_policy="often")
    made = Dataset.create(store, "other", _table(range(2), "DE"), pointer_policy="every-commit")
    assert made.pointer_policy == "every-commit"
    assert made.version == 0


def _imitate_kartothek(
    store: LocalStore, root: Path, pointer: dict[str, Any], *, drop: str, add_from: str
) -> str:
    """What kartothek's update does to ``pointer``: no parquetry extension, a deleted
    partition, a new one (a copy of ``add_from``'s file under a fresh label), index refs
    left alone. Returns the new label."""
    doc = {k: v for k, v in pointer.items() if k != "parquetry"}
    partitions = dict(doc["partitions"])
    source = root / doc["partitions"][add_from]["files"]["table"]
    del partitions[drop]
    country = add_from.split("/")[0]
    label = f"{country}/{uuid_module.uuid4().hex}"
    key = data_key(UUID, "table", label)
    (root / key).parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(source, root / key)
    partitions[label] = {"files": {"table": key}}
    doc["partitions"] = partitions
    doc["metadata"] = {**doc["metadata"], "team": "kt"}
    store.put(metadata_key(UUID), json.dumps(doc).encode())
    return label


def test_kartothek_write_on_a_stale_pointer_loses_nothing(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    ds = Dataset.create(
        store,
        UUID,
        _table(range(10), "DE"),
        partition_on=["country"],
        secondary_indices=["customer"],
    )
    ds = ds.append(pa.concat_tables([_table(range(10, 14), "FR"), _table(range(14, 16), "IT")]))
    stale = _pointer(store)  # v1
    de, fr, _ = sorted(stale["partitions"])
    ds = ds.append(_table(range(100, 105), "NL"))  # v2, the pointer kartothek missed
    ds = ds.update(_table(range(200, 203), "SE"), delete_scope=[{"country": "NL"}])  # v3
    _imitate_kartothek(store, tmp_path, stale, drop=fr, add_from=de)
    want = sorted([*range(10), *range(10), 14, 15, *range(200, 203)])
    read = Dataset.open(store, UUID)
    assert read.version == 3
    assert _ids(read) == want, "reader: kartothek's change on the newest version"
    assert read.metadata["team"] == "kt"
    assert _ids(read, [[("customer", "==", 3)]]) == [3, 3]
    assert [v.operation for v in read.versions()][-1] == "update", "reading commits nothing"

    ds = read.append(_table(range(300, 302), "DE"))
    assert [v.operation for v in ds.versions()][-2:] == ["kartothek", "append"]
    want = sorted([*want, 300, 301])
    again = Dataset.open(store, UUID)
    assert _ids(again) == want
    assert _ids(again, [[("customer", "==", 3)]]) == [3, 3], "index holds kartothek's file"
    assert again.metadata["team"] == "kt"
    assert _pointer(store)["parquetry"]["version"]["number"] == again.version
    kt = again.versions()[-2]
    assert kt.parameters["base"] == "1", "the version kartothek read"
    assert (kt.files_added, kt.files_removed) == (1, 1)


def test_checkpoint_reconciles_and_is_safe_beside_commits(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    ds = Dataset.create(store, UUID, _table(range(4), "DE"), partition_on=["country"])
    stale = _pointer(store)
    ds = ds.append(_table(range(4, 8), "FR"))
    (de,) = stale["partitions"]
    label = _imitate_kartothek(store, tmp_path, stale, drop=de, add_from=de)
    done = Dataset.open(store, UUID).checkpoint()
    assert done.versions()[-1].operation == "kartothek"
    assert _ids(done) == [0, 1, 2, 3, 4, 5, 6, 7], "kartothek's copy of DE replaced DE; FR stays"
    assert {f.key.split("/")[2] for f in done.plan(None).files} == {"country=DE", "country=FR"}
    assert label in _pointer(store)["partitions"]
    assert _pointer(store)["parquetry"]["version"]["number"] == done.version
    assert done.checkpoint().version == done.version, "idempotent"

    errors: list[BaseException] = []

    def appender(k: int) -> None:
        try:
            for i in range(4):
                Dataset.open(store, UUID).append(
                    _table(range(1000 * k + i, 1000 * k + i + 1), "NL")
                )
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def checkpointer() -> None:
        try:
            for _ in range(6):
                Dataset.open(store, UUID).checkpoint()
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=appender, args=(k,)) for k in (1, 2)]
    threads.append(threading.Thread(target=checkpointer))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    newest = Dataset.open(store, UUID)
    assert len(_ids(newest)) == 4 + 4 + 8
    assert _pointer(store)["parquetry"]["version"]["number"] == newest.version


def test_next_commit_reconciles_a_manual_dataset(tmp_path: Path) -> None:
    """``manual``: readers do not look at the pointer, but the next commit does (one HEAD),
    also from a Dataset object opened before kartothek wrote."""
    store = LocalStore(tmp_path)
    ds = Dataset.create(
        store, UUID, _table(range(4), "DE"), partition_on=["country"], pointer_policy="manual"
    )
    ds = ds.append(_table(range(4, 6), "FR"))
    stale = _pointer(store)
    assert stale["parquetry"]["version"]["number"] == 0, "manual: only the create wrote it"
    (de,) = stale["partitions"]
    _imitate_kartothek(store, tmp_path, stale, drop=de, add_from=de)
    assert _ids(Dataset.open(store, UUID)) == [0, 1, 2, 3, 4, 5], "not seen by readers yet"
    ds = ds.append(_table(range(6, 8), "NL"))
    assert [v.operation for v in ds.versions()][-2:] == ["kartothek", "append"]
    assert _ids(Dataset.open(store, UUID)) == list(range(8))
    shown = _pointer(store)["parquetry"]["version"]["number"]
    assert shown == ds.version - 1, "the reconciling commit replaced kartothek's document"
    ds = ds.append(_table(range(8, 9), "NL"))
    assert [v.operation for v in ds.versions()][-3:] == ["kartothek", "append", "append"]
    assert _ids(Dataset.open(store, UUID)) == list(range(9))


def test_concurrent_writers_reconcile_kartothek_once(tmp_path: Path) -> None:
    """Writers racing on one kartothek write: exactly one commits it, the others build on
    that (no duplicate partitions, no failed append)."""
    store = LocalStore(tmp_path)
    ds = Dataset.create(store, UUID, _table(range(4), "DE"), partition_on=["country"])
    ds = ds.append(_table(range(4, 6), "FR"))
    pointer = _pointer(store)
    de = next(p for p in pointer["partitions"] if p.startswith("country=DE"))
    _imitate_kartothek(store, tmp_path, pointer, drop=de, add_from=de)
    stale = [Dataset.open(store, UUID) for _ in range(4)]  # all see kartothek's change
    errors: list[BaseException] = []

    def append(k: int) -> None:
        try:
            stale[k].append(_table(range(100 + k, 101 + k), "NL"))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=append, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    newest = Dataset.open(store, UUID)
    operations = [v.operation for v in newest.versions()]
    assert operations.count("kartothek") == 1, operations
    assert _ids(newest) == [0, 1, 2, 3, 4, 5, 100, 101, 102, 103]


def test_kartothek_schema_parquetry_cannot_merge_is_refused(tmp_path: Path) -> None:
    """A ``_common_metadata`` kartothek rewrote with a column of another kind: reading and
    committing fail naming the column and the schema file; nothing is committed."""
    import pyarrow.parquet as pq

    from parquetry.dataset.naming import common_metadata_key
    from parquetry.errors import SchemaMismatch

    store = LocalStore(tmp_path)
    ds = Dataset.create(store, UUID, _table(range(4), "DE"), partition_on=["country"])
    ds = ds.append(_table(range(4, 6), "FR"))
    de = sorted(_pointer(store)["partitions"])[0]
    _imitate_kartothek(store, tmp_path, _pointer(store), drop=de, add_from=de)
    key = common_metadata_key(UUID, "table")
    theirs = pa.schema([("id", pa.string()), ("country", pa.string()), ("customer", pa.int64())])
    pq.write_metadata(theirs, tmp_path / key)
    with pytest.raises(SchemaMismatch, match=r"(?s)_common_metadata.*'id'"):
        Dataset.open(store, UUID)
    with pytest.raises(SchemaMismatch, match=r"(?s)_common_metadata.*'id'"):
        ds.append(_table(range(9, 10), "NL"))
    assert [v.operation for v in ds.versions()] == ["create", "append"]
