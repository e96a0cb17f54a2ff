"""``parquetry compact`` and ``parquetry restore``: dry run, the operation, JSON, errors."""

from __future__ import annotations

import json

import pytest
from cli_helpers import ORDERS, Lake

from parquetry import Dataset
from parquetry.cli.cmd_ops_maint import parse_size
from parquetry.errors import InvalidArgument


def _rows(lake: Lake) -> list[tuple[object, ...]]:
    t = Dataset.open(lake.store, "orders").read()
    return sorted(zip(*(t[c].to_pylist() for c in ORDERS.column_names), strict=True), key=repr)


def test_compact_dry_run_then_compact(lake: Lake) -> None:
    ds = Dataset.open(lake.store, "orders")
    for _ in range(2):
        ds = ds.append(ORDERS)
    rows, version = _rows(lake), ds.version
    files = len(ds.plan().files)
    dry = lake.run("compact", "orders", "--dry-run", "--target-size", "1MiB")
    assert dry.exit_code == 0, dry.stdout + dry.stderr
    first = dry.stdout.splitlines()[0]
    assert first.startswith("orders: would compact ")
    assert f"files {files:,} → 3" in first  # one file per country partition
    assert "orders/table/country=DE/" in dry.stdout
    assert Dataset.open(lake.store, "orders").version == version
    done = lake.run("compact", "orders", "--target-size", "1MiB", "--json")
    assert done.exit_code == 0, done.stdout + done.stderr
    doc = json.loads(done.stdout)
    assert doc["version"] == version + 1
    assert (doc["files_before"], doc["files_after"]) == (files, 3)
    assert doc["files_compacted"] == files
    assert _rows(lake) == rows
    (entry,) = Dataset.open(lake.store, "orders").history(limit=1)
    assert entry.operation == "compact"
    assert entry.metrics["files_compacted"] == files
    again = lake.run("compact", "orders", "--target-size", "1MiB")
    assert again.exit_code == 0
    assert "nothing to compact" in again.stdout


def test_compact_where_and_errors(local: Lake) -> None:
    ds = Dataset.open(local.store, "orders").append(ORDERS).append(ORDERS)
    out = local.run("compact", "orders", "--where", "country = 'DE'", "--sort-by", "amount")
    assert out.exit_code == 0, out.stdout + out.stderr
    after = Dataset.open(local.store, "orders")
    assert after.info is not None
    assert after.info.parameters["partitions"] == "(country == 'DE')"
    assert len([f for f in after.plan().files if f.partition == (("country", "DE"),)]) == 1
    de = len([f for f in ds.plan().files if f.partition == (("country", "DE"),)])
    assert len(after.plan().files) == len(ds.plan().files) - de + 1
    bad = local.run("compact", "orders", "--where", "amount > 1")
    assert bad.exit_code == 1
    assert "'amount' is not a partition key" in bad.stderr
    size = local.run("compact", "orders", "--target-size", "big")
    assert size.exit_code == 1
    assert "cannot read 'big' as a size" in size.stderr
    mode = local.run("compact", "orders", "--binary-copy", "sometimes")
    assert mode.exit_code == 1
    assert "--binary-copy must be auto, always or never" in mode.stderr
    never = local.run("compact", "orders", "--where", "country = 'FR'", "--binary-copy", "never")
    assert never.exit_code == 0, never.stdout + never.stderr
    fr = [
        f
        for f in Dataset.open(local.store, "orders").plan().files
        if f.partition == (("country", "FR"),)
    ]
    assert len(fr) == 1
    # Re-encoded by pyarrow: not a binary copy.
    assert b"binary-copy" not in local.store.get(fr[0].key)[-4096:]
    snap = local.run("compact", "daily/summary")
    assert snap.exit_code == 1
    assert "snapshot dataset" in snap.stderr


def test_parse_size() -> None:
    assert parse_size("128MiB") == 128 << 20
    assert parse_size("64 MB") == 64_000_000
    assert parse_size("1.5KiB") == 1536
    assert parse_size("4096") == 4096
    with pytest.raises(InvalidArgument):
        parse_size("12 parsecs")


def test_restore_dry_run_then_restore(lake: Lake) -> None:
    ds = Dataset.open(lake.store, "orders")
    old_rows, old_version = _rows(lake), ds.version
    ds.append(ORDERS)
    dry = lake.run("restore", "orders", str(old_version), "--dry-run")
    assert dry.exit_code == 0, dry.stdout + dry.stderr
    assert dry.stdout.splitlines()[0].startswith(
        f"orders: would restore version {old_version} on top of version {old_version + 1}"
    )
    assert "files no longer referenced: 3" in dry.stdout
    assert Dataset.open(lake.store, "orders").version == old_version + 1
    done = lake.run("restore", "orders", str(old_version), "--json")
    assert done.exit_code == 0, done.stdout + done.stderr
    doc = json.loads(done.stdout)
    assert (doc["restored"], doc["version"]) == (old_version, old_version + 2)
    assert len(doc["files_removed"]) == 3
    assert doc["files_added"] == []
    assert _rows(lake) == old_rows
    (entry,) = Dataset.open(lake.store, "orders").history(limit=1)
    assert entry.operation == "restore"
    assert entry.parameters["version"] == str(old_version)
    missing = lake.run("restore", "orders", "99")
    assert missing.exit_code == 1
