"""kartothek 5.3.0 and parquetry taking turns under each pointer policy.

Each test: kartothek reads what the pointer shows (and the newest version after
``checkpoint``); kartothek updates (append + ``delete_scope``) working from a pointer that
lags parquetry's newest version, so parquetry must read the union (kartothek's change
applied to its newer commits, no row of either side lost); parquetry appends on top
(reconciling kartothek's change as a version of its own) and kartothek reads that, then
kartothek appends once more and parquetry reads it. Format-1 datasets rewrite the pointer
after every commit whatever the policy, so the lag is produced by putting an older
pointer's bytes back, as a kartothek job that read the pointer before parquetry's last
commits would see it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from kt_checks import check_kartothek_reads, check_parquetry_reads, parquetry_rows, read_ops
from kt_harness import Kartothek
from kt_sample_data import COLUMNS, INDEXED, PARTITION_ON, SCHEMA, SLASHED, sample_table
from kt_support import (
    canonical_records,
    check_index,
    frame,
    oracle,
    rows_of_kartothek,
    to_driver_scope,
)

from parquetry import Dataset
from parquetry.dataset import head as head_module
from parquetry.dataset.pointer import THRESHOLD_ENV
from parquetry.store import LocalStore

pytestmark = pytest.mark.kartothek

COUNTRIES = ("DE", "FR", SLASHED)
UUID = "turns"


def _pointer(root: Path) -> bytes:
    return (root / f"{UUID}.by-dataset-metadata.json").read_bytes()


def _shown(data: bytes) -> int | None:
    """The parquetry version a pointer shows (None: kartothek wrote it)."""
    ext = json.loads(data).get("parquetry")
    return None if ext is None else int(ext["version"]["number"])


def _rows(records: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return oracle(records, None, COLUMNS, SCHEMA)


def _recs(*tables: pa.Table) -> list[dict[str, Any]]:
    return [r for t in tables for r in canonical_records(t)]


@pytest.mark.parametrize(
    ("mode", "threshold"),
    [
        ("every-commit", None),
        ("auto", None),  # below the threshold: every commit
        ("auto", "1"),  # above it: at checkpoints only
        ("manual", None),
    ],
)
def test_kartothek_and_parquetry_take_turns_on_a_lagging_pointer(
    kartothek: Kartothek,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    mode: str,
    threshold: str | None,
) -> None:
    if threshold is not None:
        monkeypatch.setenv(THRESHOLD_ENV, threshold)
        # The pointer then moves at checkpoints: none falls within this test's commits.
        monkeypatch.setattr(head_module, "CHECKPOINT_MIN_COST", 1 << 30)
    root = tmp_path / "store"
    store = LocalStore(root)
    t0 = sample_table(24, seed=11, countries=COUNTRIES)
    ds = Dataset.create(
        store, UUID, t0, partition_on=PARTITION_ON, secondary_indices=INDEXED, pointer_policy=mode
    )
    assert ds.pointer_policy == mode
    lags = mode == "manual" or threshold is not None  # commits leave the pointer behind
    t1 = sample_table(8, seed=12, countries=("DE", "NL"), first_id=100)
    ds = ds.append(t1)
    older_pointer = _pointer(root)
    seen = _shown(older_pointer)
    assert seen == (0 if lags else 1)
    t2 = sample_table(8, seed=13, countries=("FR", "NL"), first_id=200)
    ds = ds.append(t2)
    by_version = {0: _recs(t0), 1: _recs(t0, t1), 2: _recs(t0, t1, t2)}

    # kartothek reads the version the pointer shows; after checkpoint, the newest.
    shown = _shown(_pointer(root))
    assert shown == (0 if lags else 2)
    got = kartothek.one(root, {"op": "read", "uuid": UUID})
    assert rows_of_kartothek(got, COLUMNS, SCHEMA) == _rows(by_version[shown])
    assert ds.checkpoint().version == 2
    assert _shown(_pointer(root)) == 2
    assert ds.checkpoint().version == 2, "checkpoint is idempotent"
    assert [v.operation for v in ds.versions()] == ["create", "append", "append"]

    # kartothek updates from the older pointer (it missed what came after ``seen``).
    (root / f"{UUID}.by-dataset-metadata.json").write_bytes(older_pointer)
    t3 = sample_table(6, seed=14, countries=("DE", "SE"), first_id=300)
    kartothek.one(
        root,
        {
            "op": "update",
            "uuid": UUID,
            "frames": [frame(t3)],
            "delete_scope": to_driver_scope([{"country": "FR"}]),
            "partition_on": PARTITION_ON,
        },
    )
    assert _shown(_pointer(root)) is None
    # kartothek's delete_scope removed the FR partitions it saw; t2's FR rows came later.
    later = [r for r in by_version[2] if r not in by_version[seen]]
    union = [r for r in by_version[seen] if r["country"] != "FR"] + later + _recs(t3)
    ds = Dataset.open(store, UUID)
    assert ds.version == 2, "kartothek's change builds on the newest parquetry version"
    if lags:
        # Readers of a lagging pointer do not look at it: kartothek's write shows after the
        # next commit or checkpoint.
        assert parquetry_rows(ds) == _rows(by_version[2])
        ds = ds.checkpoint()
        assert ds.versions()[-1].operation == "kartothek"
    check_parquetry_reads(ds, union, SLASHED, f"{mode}: parquetry reads the union")

    # parquetry appends (kartothek's change became a version first: here or at checkpoint).
    t4 = sample_table(6, seed=15, countries=("FR", "DE"), first_id=400)
    ds = ds.append(t4)
    assert [v.operation for v in ds.versions()][-2:] == ["kartothek", "append"]
    final = union + _recs(t4)
    check_parquetry_reads(Dataset.open(store, UUID), final, SLASHED, f"{mode}: after append")
    assert (_shown(_pointer(root)) == ds.version) is not lags
    if lags:
        ds.checkpoint()
    assert _shown(_pointer(root)) == ds.version

    # kartothek reads everything (index included), then appends again on a current pointer.
    t5 = sample_table(4, seed=16, countries=("NL",), first_id=500)
    results = kartothek.run(
        root,
        [
            {"op": "inspect", "uuid": UUID},
            {"op": "read", "uuid": UUID},
            *read_ops(UUID, SLASHED),
            {"op": "update", "uuid": UUID, "frames": [frame(t5)], "partition_on": PARTITION_ON},
        ],
    )
    check_index(results[0], final, SCHEMA, INDEXED)
    assert rows_of_kartothek(results[1], COLUMNS, SCHEMA) == _rows(final)
    check_kartothek_reads(results[2:-1], final, SLASHED, results[0]["partitions"])
    last = Dataset.open(store, UUID)
    if lags:
        assert parquetry_rows(last) == _rows(final), "not seen before a commit or checkpoint"
        last = last.checkpoint()
    assert parquetry_rows(last) == _rows(final + _recs(t5))
    assert last.pointer_policy == mode, "the policy survives kartothek's write"
    again = kartothek.one(root, {"op": "read", "uuid": UUID})
    assert rows_of_kartothek(again, COLUMNS, SCHEMA) == _rows(final + _recs(t5))
