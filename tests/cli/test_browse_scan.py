"""``ls``, ``show``, ``history`` and ``scan`` on local disk and S3: the good paths."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from cli_helpers import ORDERS, Lake

from parquetry.dataset import Dataset


def _json(result: object) -> dict:
    assert result.exit_code == 0, result.stderr  # type: ignore[attr-defined]
    return json.loads(result.stdout)  # type: ignore[attr-defined]


def test_ls_lists_both_kinds(lake: Lake) -> None:
    doc = _json(lake.run("ls", "--json"))
    by_name = {d["name"]: d for d in doc["datasets"]}
    assert set(by_name) == {"orders", "daily/summary"}
    assert by_name["orders"]["kind"] == "kartothek"
    assert by_name["orders"]["version"] == 1
    assert by_name["orders"]["rows"] == 2 * ORDERS.num_rows
    assert by_name["orders"]["files"] == 6
    assert by_name["daily/summary"] == by_name["daily/summary"] | {
        "kind": "snapshot",
        "version": None,
        "rows": ORDERS.num_rows,
        "files": 1,
    }
    sizes = {m.key: m.size for m in lake.store.list("daily/summary")}
    assert by_name["daily/summary"]["bytes"] == sizes["daily/summary/data.parquet"]
    text = lake.run("ls")
    assert text.exit_code == 0
    assert "orders" in text.stdout
    assert "kartothek" in text.stdout
    assert "snapshot" in text.stdout


def test_show(lake: Lake) -> None:
    doc = _json(lake.run("show", "orders", "--json"))
    assert doc["partition_keys"] == ["country"]
    assert doc["indices"] == ["product_id"]
    assert [c["name"] for c in doc["schema"]] == ["country", "product_id", "day", "amount"]
    assert [(p["partition"], p["files"], p["rows"]) for p in doc["partition_list"]] == [
        ("country=DE", 2, 4),
        ("country=FR", 2, 2),
        ("country=US", 2, 2),
    ]
    old = _json(lake.run("show", "orders", "--version", "0", "--json"))
    assert old["version"] == 0
    assert old["rows"] == ORDERS.num_rows
    snap = _json(lake.run("show", "daily/summary", "--json"))
    assert snap["metadata"]["run_id"] == "run-1"
    text = lake.run("show", "orders")
    assert text.exit_code == 0
    assert "partition key" in text.stdout
    assert "country=FR" in text.stdout


def test_history(lake: Lake) -> None:
    doc = _json(lake.run("history", "orders", "--json"))
    assert [(v["number"], v["operation"], v["rows_added"]) for v in doc["versions"]] == [
        (0, "create", 4),
        (1, "append", 4),
    ]
    text = lake.run("history", "orders")
    assert text.exit_code == 0
    assert "append" in text.stdout


def test_history_shows_parameters_and_restore(local: Lake) -> None:
    ds = Dataset.open(local.store, "orders")
    ds = ds.append(ORDERS, parameters={"job": "nightly"}).restore(1)
    doc = _json(local.run("history", "orders", "--json"))
    versions = doc["versions"]
    assert [(v["number"], v["operation"]) for v in versions] == [
        (0, "create"),
        (1, "append"),
        (2, "append"),
        (3, "restore"),
    ]
    assert versions[2]["parameters"] == {"job": "nightly"}
    assert versions[3]["parameters"] == {"version": "1"}
    assert versions[3]["rows_removed"] == 4
    assert versions[2]["bytes_added"] == versions[3]["bytes_removed"] > 0
    text = local.run("history", "orders")
    assert text.exit_code == 0
    assert "job=nightly" in text.stdout
    assert "restore" in text.stdout


WHERE = "country = 'DE' and product_id in (1, 2) or day >= date '2021-01-03'"


def _expected(table: pa.Table) -> list[dict]:
    mask = pc.or_(
        pc.and_(pc.equal(table["country"], "DE"), pc.is_in(table["product_id"], pa.array([1, 2]))),
        pc.greater_equal(table["day"], pa.scalar(ORDERS["day"][3].as_py())),
    )
    return table.filter(mask).to_pylist()


def _rows(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines()]


def _key(row: dict) -> tuple:
    return tuple(sorted((k, str(v)) for k, v in row.items()))


def test_scan_where_json_lines(lake: Lake) -> None:
    result = lake.run("scan", "orders", "--where", WHERE, "--format", "json")
    assert result.exit_code == 0, result.stderr
    expected = [{**r, "day": r["day"].isoformat()} for r in _expected(ORDERS)] * 2
    assert sorted(map(_key, _rows(result.stdout))) == sorted(map(_key, expected))


def test_scan_snapshot_where_columns_limit(lake: Lake) -> None:
    result = lake.run(
        "scan", "daily/summary", "-w", "amount > 1.5", "-c", "country,amount", "-f", "csv"
    )
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines() == ['"country","amount"', '"DE",2', '"US",4']
    limited = lake.run("scan", "orders", "--limit", "3", "--format", "json")
    assert len(_rows(limited.stdout)) == 3


def test_scan_versions_and_parquet_output(lake: Lake, tmp_path: Path) -> None:
    out = tmp_path / "out.parquet"
    result = lake.run("scan", "orders", "--version", "0", "-f", "parquet", "-o", str(out))
    assert result.exit_code == 0, result.stderr
    table = pq.read_table(out)
    assert table.num_rows == ORDERS.num_rows
    assert sorted(table.column("product_id").to_pylist()) == [1, 1, 2, 3]


def test_scan_table_output(lake: Lake) -> None:
    result = lake.run("scan", "orders", "-w", "amount is null")
    assert result.exit_code == 0, result.stderr
    assert "FR" in result.stdout
    assert "2 rows" in result.stdout
    assert "DE" not in result.stdout


def test_scan_explain(lake: Lake) -> None:
    doc = _json(lake.run("scan", "orders", "-w", "product_id = 3", "--explain", "-f", "json"))
    assert doc["predicates"] == [[["product_id", "==", 3]]]
    assert len(doc["files"]) == 2
    assert all("country=FR" in k for k in doc["files"])
    assert {p["reason"] for p in doc["pruned"]} == {"secondary index"}
    assert len(doc["pruned"]) == 4
    assert doc["requests"] >= 1
    text = lake.run("scan", "orders", "-w", "country = 'US'", "--explain")
    assert text.exit_code == 0, text.stderr
    assert "files to read: 2" in text.stdout
    assert "partitions pruned: 4 (4 by partition key)" in text.stdout
    assert "store requests to open and plan:" in text.stdout
