"""Reconciling kartothek 5.3.0's writes into parquetry's history (dataset/reconcile.py):
deletions of whole versions, evolved schemas, statistics of the files kartothek adds, and a
dataset kartothek deleted and created again under the same uuid."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from kt_checks import parquetry_rows
from kt_harness import Kartothek
from kt_sample_data import COLUMNS, INDEXED, PARTITION_ON, SCHEMA, sample_table
from kt_support import canonical_records, frame, oracle, rows_of_kartothek, to_driver_scope

from parquetry import Dataset
from parquetry.store import LocalStore

pytestmark = pytest.mark.kartothek

UUID = "rec"


def _rows(*tables: pa.Table) -> list[tuple[Any, ...]]:
    return oracle([r for t in tables for r in canonical_records(t)], None, COLUMNS, SCHEMA)


@pytest.mark.parametrize("mode", ["auto", "manual"])
def test_kartothek_deleting_everything_the_version_it_read_added(
    kartothek: Kartothek, tmp_path: Path, mode: str
) -> None:
    """kartothek reads the pointer showing version p and deletes every partition p added:
    the deletion is applied (was: taken for kartothek having read p - 1, deletion lost)."""
    store = LocalStore(tmp_path)
    t0 = sample_table(12, seed=1, countries=("DE",))
    t1 = sample_table(8, seed=2, countries=("FR",), first_id=100)
    t2 = sample_table(8, seed=3, countries=("NL",), first_id=200)
    ds = Dataset.create(
        store, UUID, t0, partition_on=PARTITION_ON, secondary_indices=INDEXED, pointer_policy=mode
    )
    ds = ds.append(t1).checkpoint()  # the pointer shows version 1 ...
    ds = ds.append(t2)  # ... and, under auto, then version 2
    read, kept, gone = (1, t2, "FR") if mode == "manual" else (2, t1, "NL")
    shown = kartothek.one(tmp_path, {"op": "read", "uuid": UUID})
    assert rows_of_kartothek(shown, COLUMNS, SCHEMA) == (
        _rows(t0, t1) if read == 1 else _rows(t0, t1, t2)
    )
    # kartothek deletes every partition of the version it read's own append.
    kartothek.one(
        tmp_path,
        {
            "op": "update",
            "uuid": UUID,
            "frames": [],
            "delete_scope": to_driver_scope([{"country": gone, "year": y} for y in (2020, 2021)]),
            "partition_on": PARTITION_ON,
        },
    )
    want = _rows(t0, kept)
    ds = Dataset.open(store, UUID)
    if mode == "manual":
        ds = ds.checkpoint()  # readers of a lagging pointer see kartothek's write from here
    assert parquetry_rows(ds) == want
    t3 = sample_table(4, seed=4, countries=("SE",), first_id=300)
    ds = ds.append(t3).checkpoint()
    reconciled = ds.versions()[-2]
    assert (reconciled.operation, reconciled.parameters["base"]) == ("kartothek", str(read))
    assert parquetry_rows(Dataset.open(store, UUID)) == _rows(t0, kept, t3)
    got = kartothek.one(tmp_path, {"op": "read", "uuid": UUID})
    assert rows_of_kartothek(got, COLUMNS, SCHEMA) == _rows(t0, kept, t3)


def test_kartothek_update_on_a_lagging_pointer_keeps_newer_parquetry_rows(
    kartothek: Kartothek, tmp_path: Path
) -> None:
    """The marker names the version kartothek read even when parquetry's later versions only
    added partitions (the case the label walk had to guess): nothing of theirs is lost."""
    store = LocalStore(tmp_path)
    t0 = sample_table(12, seed=5, countries=("DE", "FR"))
    ds = Dataset.create(store, UUID, t0, partition_on=PARTITION_ON, pointer_policy="manual")
    t1 = sample_table(6, seed=6, countries=("NL",), first_id=100)
    t2 = sample_table(6, seed=7, countries=("SE",), first_id=200)
    ds = ds.append(t1).append(t2)  # manual: the pointer still shows version 0
    t3 = sample_table(4, seed=8, countries=("DE",), first_id=300)
    kartothek.one(
        tmp_path,
        {
            "op": "update",
            "uuid": UUID,
            "frames": [frame(t3)],
            "delete_scope": to_driver_scope([{"country": "FR"}]),
            "partition_on": PARTITION_ON,
        },
    )
    ds = Dataset.open(store, UUID).checkpoint()
    t0_kept = t0.filter(pa.compute.not_equal(t0.column("country"), "FR"))
    assert parquetry_rows(ds) == _rows(t0_kept, t1, t2, t3)
    assert ds.versions()[-1].parameters["base"] == "0"
    assert "parquetry_pointer_version" not in ds.metadata
    inspected = kartothek.one(tmp_path, {"op": "inspect", "uuid": UUID})
    assert inspected["metadata"]["parquetry_pointer_version"] == ds.version


@pytest.mark.parametrize("threshold", [None, "1"])
def test_kartothek_deletes_and_recreates_the_dataset(
    kartothek: Kartothek, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, threshold: str | None
) -> None:
    """kartothek's delete_dataset leaves parquetry's head and versions behind; the dataset it
    then creates under the same uuid is a new incarnation: parquetry serves and builds on
    it, not on its stale head (``auto``, below and above the every-commit threshold)."""
    if threshold is not None:
        monkeypatch.setenv("PARQUETRY_POINTER_EVERY_COMMIT_BYTES", threshold)
    store = LocalStore(tmp_path)
    t0 = sample_table(12, seed=9, countries=("DE", "FR"))
    ds = Dataset.create(store, UUID, t0, partition_on=PARTITION_ON, secondary_indices=INDEXED)
    ds = ds.append(sample_table(6, seed=10, countries=("NL",), first_id=100)).checkpoint()
    fresh = sample_table(10, seed=11, countries=("SE", "DE"), first_id=500)
    kartothek.run(
        tmp_path,
        [
            {"op": "delete", "uuid": UUID},
            {
                "op": "write",
                "uuid": UUID,
                "frames": [frame(fresh)],
                "partition_on": PARTITION_ON,
                "secondary_indices": INDEXED,
            },
        ],
    )
    opened = Dataset.open(store, UUID)
    if threshold is None:
        # auto below the threshold: readers check the pointer (one HEAD) and see it at once.
        assert parquetry_rows(opened) == _rows(fresh)
    # Above it readers do not look at the pointer; the next commit does (and builds on
    # kartothek's dataset, not on the stale head it opened).
    more = sample_table(4, seed=12, countries=("FR",), first_id=900)
    ds = opened.append(more)
    assert [(v.operation, v.parent) for v in ds.versions()] == [("kartothek", None), ("append", 2)]
    assert ds.versions()[0].parameters["recreated"] == "true"
    assert all(ds._doc.files[lb].stats["id"][0] is not None for lb in ds._doc.partitions)
    assert parquetry_rows(ds) == _rows(fresh, more)
    assert parquetry_rows(Dataset.open(store, UUID)) == _rows(fresh, more)
    ds.checkpoint()
    got = kartothek.one(tmp_path, {"op": "read", "uuid": UUID})
    assert rows_of_kartothek(got, COLUMNS, SCHEMA) == _rows(fresh, more)


def test_files_kartothek_adds_get_statistics(kartothek: Kartothek, tmp_path: Path) -> None:
    """A reconciled kartothek append records min/max/nulls from each file's footer, equal
    to what parquetry computes from the file's rows, so planning prunes those files."""
    import pyarrow.parquet as pq

    from parquetry.dataset.stats import compute_stats

    store = LocalStore(tmp_path)
    t0 = sample_table(12, seed=13, countries=("DE",))
    Dataset.create(store, UUID, t0, partition_on=PARTITION_ON)
    t1 = sample_table(16, seed=14, countries=("FR", "NL"), first_id=1000)
    kartothek.one(
        tmp_path,
        {"op": "update", "uuid": UUID, "frames": [frame(t1)], "partition_on": PARTITION_ON},
    )
    ds = Dataset.open(store, UUID).checkpoint()
    assert ds.versions()[-1].operation == "kartothek"
    doc = ds._doc
    theirs = sorted(set(doc.partitions) - {lb for lb in doc.partitions if "DE" in lb})
    assert len(theirs) == 4
    for label in theirs:
        key = doc.partitions[label]["table"]
        info = doc.files[label]
        got = pq.read_table(tmp_path / key)
        want = compute_stats(got.select([c for c in got.column_names if c in SCHEMA.names]))
        assert info.rows == got.num_rows
        for col in ("id", "customer", "day", "ts", "flag", "name", "small"):
            assert info.stats[col] == want[col], (label, col)
        assert info.stats["amount"][2] == want["amount"][2], "floats: null count only"
    # Pruned by statistics: ids of t1 live only in kartothek's files, one cell each.
    plan = ds.plan([[("id", ">=", 1000)]])
    assert sorted(f.label for f in plan.files) == theirs
    first = t1.column("id").to_pylist()[0]
    assert len(ds.plan([[("id", "==", first)]]).files) == 1
    assert parquetry_rows(ds, [[("id", ">=", 1000)]]) == _rows(t1)


def test_kartothek_schema_changes_are_merged(kartothek: Kartothek, tmp_path: Path) -> None:
    """kartothek accepts an update that widens an int32 column and types a column parquetry
    only saw as nulls, and rewrites ``_common_metadata``: parquetry reads, commits and
    keeps both (was: its own schema, so kartothek's wide value failed to read and its
    strings were lost)."""
    import pyarrow.parquet as pq

    store = LocalStore(tmp_path)
    t0 = pa.table(
        {"p": ["a", "b"], "n": pa.array([1, 2], pa.int32()), "z": pa.array([None, None], pa.null())}
    )
    Dataset.create(store, "ev", t0, partition_on=["p"])
    kartothek.one(
        tmp_path,
        {
            "op": "update",
            "uuid": "ev",
            "frames": [
                {
                    "schema": [["p", "string"], ["n", "int64"], ["z", "string"]],
                    "rows": [["c", 2**40, "hello"]],
                }
            ],
            "partition_on": ["p"],
        },
    )
    want = [("a", 1, None), ("b", 2, None), ("c", 2**40, "hello")]

    def rows(ds: Dataset) -> list[tuple[Any, ...]]:
        return sorted(tuple(r.values()) for r in ds.read(columns=["p", "n", "z"]).to_pylist())

    read = Dataset.open(store, "ev")
    assert (read.schema.field("n").type, read.schema.field("z").type) == (pa.int64(), pa.string())
    assert rows(read) == want
    ds = read.append(pa.table({"p": ["d"], "n": [7], "z": ["x"]}))
    assert [v.operation for v in ds.versions()] == ["create", "kartothek", "append"]
    assert rows(Dataset.open(store, "ev")) == [*want, ("d", 7, "x")]
    common = pq.read_schema(tmp_path / "ev" / "table" / "_common_metadata")
    assert (common.field("n").type, common.field("z").type) == (pa.int64(), pa.string())
    got = kartothek.one(tmp_path, {"op": "read", "uuid": "ev", "columns": ["p", "n", "z"]})
    assert sorted(tuple(r) for r in got["rows"]) == [*want, ("d", 7, "x")]


@pytest.mark.parametrize("mode", ["auto", "manual"])
def test_kartothek_delete_dataset_is_not_served_from_the_stale_head(
    kartothek: Kartothek, tmp_path: Path, mode: str
) -> None:
    """After kartothek's delete_dataset (parquetry's head and versions stay behind) an open
    under ``auto`` fails with DatasetNotFound instead of serving files that are gone, and
    a commit on a state read before fails instead of resurrecting it (any setting)."""
    from parquetry.errors import DatasetDeleted, DatasetNotFound

    store = LocalStore(tmp_path)
    Dataset.create(
        store, UUID, sample_table(6, seed=15, countries=("DE",)), partition_on=PARTITION_ON
    )
    before = Dataset.open(store, UUID)
    if mode == "manual":
        before = before.set_pointer_policy("manual").checkpoint()
    kartothek.one(tmp_path, {"op": "delete", "uuid": UUID})
    assert (tmp_path / UUID / "_head.json").exists()
    assert not Dataset.exists(store, UUID)
    if mode == "auto":
        with pytest.raises(DatasetNotFound, match="deleted"):
            Dataset.open(store, UUID)
    with pytest.raises(DatasetDeleted, match="deleted"):
        before.append(sample_table(2, seed=16, countries=("FR",), first_id=50))
    assert not Dataset.exists(store, UUID)
