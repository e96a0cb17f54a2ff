"""``validate``, ``repair``, ``gc``, ``report`` and ``inspect`` on local disk and S3."""

from __future__ import annotations

import io
import json
import os
import re
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from cli_helpers import ORDERS, Lake

from parquetry import Dataset, ParquetDatasetStore
from parquetry.dataset.naming import metadata_key
from parquetry.store import LocalStore


def test_validate_healthy(lake: Lake) -> None:
    for name in ("orders", "daily/summary"):
        result = lake.run("validate", name)
        assert result.exit_code == 0, result.stdout + result.stderr
        assert result.stdout == ""
        assert f"{name}: ok" in result.stderr


def _first_file(lake: Lake) -> str:
    return Dataset.open(lake.store, "orders").plan(None).files[0].key


def test_validate_reports_each_problem(lake: Lake) -> None:
    plan = Dataset.open(lake.store, "orders").plan(None)
    missing, rewritten = plan.files[0].key, plan.files[1].key
    lake.store.delete(missing)
    # Same columns, other rows: sizes, row counts, statistics and the index disagree.
    sink = io.BytesIO()
    pq.write_table(
        pa.table(
            {
                "product_id": pa.array([7, 8, 9], pa.int64()),
                "day": ORDERS["day"][:3],
                "amount": [9.0, 9.5, 10.0],
            }
        ),
        sink,
    )
    lake.store.put(rewritten, sink.getvalue())
    result = lake.run("validate", "orders")
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert f"{missing} is missing (referenced by partition {plan.files[0].label})" in lines
    assert any(line.startswith(f"{rewritten}: 3 rows, the metadata records") for line in lines)
    assert any(
        re.match(rf"{re.escape(rewritten)}: column 'product_id' max is 9", line) for line in lines
    )
    assert any("index on 'product_id' lacks value 7" in line for line in lines)
    doc = json.loads(lake.run("validate", "orders", "--json").stdout)
    assert doc["ok"] is False
    assert doc["problems"] == lines


def test_validate_snapshot_problems(lake: Lake) -> None:
    lake.store.delete("daily/summary/data.parquet")
    result = lake.run("validate", "daily/summary")
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [
        "daily/summary/data.parquet is missing (listed in manifest.json)"
    ]


def test_repair_interrupted_kartothek_commit(lake: Lake) -> None:
    key = metadata_key("orders")
    old_pointer = lake.store.get(key)
    Dataset.open(lake.store, "orders").append(ORDERS)
    # A commit whose pointer rewrite never happened: version 2 exists, the pointer says 1.
    lake.store.put(key, old_pointer)
    result = lake.run("repair", "orders")
    assert result.exit_code == 0, result.stderr
    assert "from version 1 to 2" in result.stdout
    assert lake.store.get(key) != old_pointer
    again = lake.run("repair", "orders")
    assert "nothing to repair (version 2 is current)" in again.stdout


def test_repair_snapshot(lake: Lake) -> None:
    # A staged write this young may belong to a live writer: repair leaves it (gc with a
    # short retention, or repair after the staging grace period, removes it).
    lake.store.put("daily/summary/_staging/w1/part-00000.parquet", b"left over")
    result = lake.run("repair", "daily/summary")
    assert result.exit_code == 0, result.stderr
    assert "nothing to repair" in result.stdout
    assert [m.key for m in lake.store.list("daily/summary/_staging")] == [
        "daily/summary/_staging/w1/part-00000.parquet"
    ]


def test_gc_dry_run_then_real(lake: Lake) -> None:
    # Format-2 versions share their index states (nothing per version to expire): replace
    # the US partitions so that the expired versions leave data files behind.
    us = ORDERS.filter(pc.equal(ORDERS["country"], "US"))
    Dataset.open(lake.store, "orders").update(us, delete_scope=[{"country": "US"}])
    before = {m.key for m in lake.store.list("orders")}
    dry = lake.run("gc", "orders", "--retention", "0", "--dry-run", "--json")
    assert dry.exit_code == 0, dry.stderr
    planned = json.loads(dry.stdout)
    assert planned["dry_run"] is True
    assert planned["deleted"]
    assert {m.key for m in lake.store.list("orders")} == before  # nothing deleted
    sizes = {m.key: m.size for m in lake.store.list("orders")}
    assert planned["bytes"] == sum(sizes.get(d["key"], 0) for d in planned["deleted"])
    real = lake.run("gc", "orders", "--retention", "0")
    assert real.exit_code == 0, real.stderr
    deleted = {d["key"] for d in planned["deleted"]}
    assert all(f"deleted {k}" in real.stdout for k in deleted if k in before)
    after = {m.key for m in lake.store.list("orders")}
    # GC may checkpoint the oldest retained version first (format 2).
    assert {k for k in after - before if "/_checkpoints/" not in k} == set()
    assert after & before == before - deleted
    assert Dataset.open(lake.store, "orders").read().num_rows == 2 * ORDERS.num_rows - 1
    kept = lake.run("gc", "orders", "--dry-run")  # default 7d retention: nothing young goes
    assert "would delete 0 objects" in kept.stdout


def test_gc_snapshot_spares_nested_datasets(lake: Lake) -> None:
    """Issue 11: ``gc KEY`` on a snapshot listed recursively and deleted every dataset
    stored under ``KEY/``. It touches only the snapshot's own objects now."""
    pds = ParquetDatasetStore(lake.store)
    nested = pa.table({"x": [1, 2]})
    pds.write_dataset(nested, "daily/summary/sub")
    lake.store.put("daily/summary/other/notes.txt", b"not the snapshot's")
    before = {m.key for m in lake.store.list("daily/summary/sub")} | {
        m.key for m in lake.store.list("daily/summary/other")
    }
    result = lake.run("gc", "daily/summary", "--retention", "0")
    assert result.exit_code == 0, result.stderr
    assert "deleted 0 objects" in result.stdout
    after = {m.key for m in lake.store.list("daily/summary/sub")} | {
        m.key for m in lake.store.list("daily/summary/other")
    }
    assert after == before
    assert pds.read_dataset("daily/summary/sub").equals(nested)


def test_gc_snapshot_orphans(lake: Lake) -> None:
    staged = "daily/summary/_staging/w9/part-00000.parquet"
    lake.store.put(staged, b"x" * 10)
    lake.store.put("daily/summary/part-00042.parquet", b"y" * 10)  # a crashed writer's
    young = lake.run("gc", "daily/summary", "--dry-run")
    assert "would delete 0 objects" in young.stdout
    old = lake.run("gc", "daily/summary", "--retention", "0")
    assert "deleted daily/summary/part-00042.parquet (10 B)" in old.stdout
    # A staged write younger than the switch lease may be about to switch: kept.
    assert "deleted 1 objects, 10 B (10 bytes)" in old.stdout
    assert lake.store.exists(staged)
    if isinstance(lake.store, LocalStore):  # staging idle for longer than the lease goes
        then = time.time() - 120
        os.utime(lake.store.root / staged, (then, then))
        idle = lake.run("gc", "daily/summary", "--retention", "0")
        assert f"deleted {staged} (10 B)" in idle.stdout
        assert not lake.store.exists(staged)
    assert lake.run("scan", "daily/summary", "-f", "json").stdout.count("\n") == 4


def test_report_writes_html(lake: Lake, tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    result = lake.run("report", "orders", "--output", str(out))
    assert result.exit_code == 0, result.stderr
    html = out.read_text(encoding="utf-8")
    for chart in ("file-sizes", "partition-bytes", "partition-rows", "column-bytes", "versions"):
        assert f'data-chart="{chart}"' in html
    assert "No problems found." in html
    doc = json.loads(lake.run("report", "orders", "--json").stdout)
    assert len(doc["files"]) == 6
    assert sum(f["rows"] for f in doc["files"]) == 8
    assert {c["name"] for c in doc["columns"]} == {"product_id", "day", "amount"}
    assert [v["number"] for v in doc["versions"]] == [0, 1]
    snap = json.loads(lake.run("report", "daily/summary", "--json").stdout)
    assert snap["files"][0]["rows"] == 4
    assert snap["versions"] == []


def test_inspect_local_and_url(lake: Lake) -> None:
    key = _first_file(lake)
    target = f"{lake.url}/{key}" if lake.url.startswith("s3://") else str(Path(lake.url) / key)
    result = lake.run_raw("inspect", target, "--json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    plan_file = Dataset.open(lake.store, "orders").plan(None).files[0]
    assert doc["key"] == key.rsplit("/", 1)[-1] or doc["key"] == key
    assert doc["rows"] == plan_file.rows
    assert doc["file_size"] == plan_file.size
    text = lake.run_raw("inspect", target)
    assert text.exit_code == 0, text.stderr
    assert "product_id" in text.stdout


def test_inspect_bad_file_is_one_line(tmp_path: Path) -> None:
    from cli_helpers import invoke, one_error_line

    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"not parquet data at all")
    result = invoke("inspect", str(bad))
    assert result.exit_code == 1
    assert "bad.parquet" in one_error_line(result)


def test_checkpoint_rewrites_the_pointer_and_sets_the_policy(lake: Lake) -> None:
    key = metadata_key("orders")
    result = lake.run("checkpoint", "orders", "--pointer-policy", "manual")
    assert result.exit_code == 0, result.stdout + result.stderr
    ds = Dataset.open(lake.store, "orders")
    assert ds.pointer_policy == "manual"
    assert f"shows version {ds.version} (pointer policy manual)" in result.stdout
    shown = json.loads(lake.store.get(key))["parquetry"]["version"]["number"]
    assert shown == ds.version
    ds = ds.append(ORDERS)  # manual: the pointer stays behind
    assert json.loads(lake.store.get(key))["parquetry"]["version"]["number"] == shown
    again = lake.run("checkpoint", "orders")
    assert again.exit_code == 0, again.stdout + again.stderr
    assert f"shows version {ds.version} (pointer policy manual)" in again.stdout
    pointer = json.loads(lake.store.get(key))
    assert pointer["parquetry"]["version"]["number"] == ds.version
    assert pointer["parquetry"]["settings"] == {"pointer": "manual"}
    assert len(pointer["partitions"]) == len(ds.plan(None).files)
    lake.store.put(key, b"{not json")  # an unreadable pointer is rewritten too
    fixed = lake.run("checkpoint", "orders")
    assert fixed.exit_code == 0, fixed.stdout + fixed.stderr
    assert json.loads(lake.store.get(key))["parquetry"]["version"]["number"] == ds.version
    bad = lake.run("checkpoint", "orders", "--pointer-policy", "hourly")
    assert bad.exit_code == 1
    assert "pointer policy must be one of" in bad.stderr
    snap = lake.run("checkpoint", "daily/summary")
    assert snap.exit_code == 1
    assert "not a kartothek-format dataset" in snap.stderr
