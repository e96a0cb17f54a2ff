"""``parquetry delete``: dry run, the delete itself, JSON, errors, progress bar (local, S3)."""

from __future__ import annotations

import json

from cli_helpers import ORDERS, Lake
from typer.testing import CliRunner

from parquetry import Dataset
from parquetry.cli.app import app


def _rows(lake: Lake) -> list[tuple[object, ...]]:
    table = Dataset.open(lake.store, "orders").read()
    return sorted(zip(table["country"].to_pylist(), table["product_id"].to_pylist(), strict=True))


def test_delete_dry_run_then_delete(lake: Lake) -> None:
    where = "country = 'FR' or product_id = 1"
    before = Dataset.open(lake.store, "orders")
    dry = lake.run("delete", "orders", "--where", where, "--dry-run")
    assert dry.exit_code == 0, dry.stdout + dry.stderr
    # FR: both files match by partition value (removed unread); US: every row matches;
    # DE: product 1 goes, product 2 stays (rewritten)
    assert dry.stdout.splitlines()[0] == (
        "orders: would delete 6 rows from version 1, touching 6 files (2 rewritten, 4 removed)"
    )
    assert "orders/table/country=FR/" in dry.stdout
    assert Dataset.open(lake.store, "orders").version == 1  # nothing written
    done = lake.run("delete", "orders", "--where", where, "--json")
    assert done.exit_code == 0, done.stdout + done.stderr
    doc = json.loads(done.stdout)
    assert doc["version"] == 2
    assert doc["rows_deleted"] == 6
    assert len(doc["files_rewritten"]) == 2
    assert len(doc["files_removed"]) == 4
    assert {k.split("/")[2] for k in doc["files_rewritten"]} == {"country=DE"}
    removed = {f.key for f in before.plan([[("country", "in", ["FR", "US"])]]).files}
    assert set(doc["files_removed"]) == removed
    assert _rows(lake) == [("DE", 2), ("DE", 2)]
    (entry,) = Dataset.open(lake.store, "orders").history(limit=1)
    assert entry.operation == "delete"
    assert entry.metrics["rows_deleted"] == 6
    # nothing left to match: no new version
    again = lake.run("delete", "orders", "--where", where)
    assert again.exit_code == 0
    assert "no row matches; nothing deleted (version 2 unchanged)" in again.stdout
    assert Dataset.open(lake.store, "orders").version == 2


def test_delete_errors(local: Lake) -> None:
    snapshot = local.run("delete", "daily/summary", "--where", "country = 'FR'")
    assert snapshot.exit_code == 1
    assert "daily/summary is a snapshot dataset" in snapshot.stderr
    syntax = local.run("delete", "orders", "--where", "country = ")
    assert syntax.exit_code == 1
    assert "expected a value" in syntax.stderr
    unknown = local.run("delete", "orders", "--where", "nope = 1")
    assert unknown.exit_code == 1
    assert "'nope'" in unknown.stderr
    missing = local.run("delete", "orders")
    assert missing.exit_code == 2
    assert "--where" in missing.stderr
    assert Dataset.open(local.store, "orders").version == 1
    assert len(_rows(local)) == 2 * ORDERS.num_rows


def test_delete_shows_a_progress_bar_on_a_terminal(local: Lake) -> None:
    result = CliRunner().invoke(
        app,
        ["delete", local.url, "orders", "--where", "product_id = 2"],
        env={"FORCE_COLOR": "1", "COLUMNS": "120"},
    )
    assert result.exit_code == 0, result.stdout + result.stderr
    assert "deleting from orders" in result.stderr
    assert "2/2" in result.stderr  # files handled / files to read
    plain = local.run("delete", "orders", "--where", "product_id = 3")
    assert plain.stderr == ""  # no bar when stderr is not a terminal
