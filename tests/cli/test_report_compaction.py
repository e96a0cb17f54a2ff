"""The report's compaction recommendation: the gain of ``parquetry compact`` at 128 MiB."""

from __future__ import annotations

import dataclasses
import datetime as dt

from cli_helpers import ORDERS, Lake

from parquetry import Dataset
from parquetry.cli.report import FileInfo, ReportData, compaction_gain, render_html

MIB = 1 << 20


def _data(sizes: dict[str, list[int]], kind: str = "kartothek") -> ReportData:
    files = tuple(
        FileInfo(key=f"ds/table/{p}/f{i}.parquet", partition=p, rows=10, size=s)
        for p, group in sizes.items()
        for i, s in enumerate(group)
    )
    return ReportData(
        dataset="ds",
        store="file:///lake",
        kind=kind,
        version=1,
        generated=dt.datetime(2024, 1, 1, tzinfo=dt.UTC),
        files=files,
    )


def test_compaction_gain_follows_the_bin_packing() -> None:
    data = _data(
        {
            "d=1": [1 * MIB] * 22,  # 22 small files -> 1
            "d=2": [200 * MIB, 5 * MIB],  # one small file beside a big one: left alone
            "d=3": [100 * MIB, 90 * MIB, 20 * MIB],  # 100+20 -> 1 file, 90 alone: 2
        }
    )
    assert compaction_gain(data.files) == (27, 5, 2)
    html = render_html(data)
    assert "compact: 27 → 5 files in 2 partitions at a 128.0 MiB target" in html
    assert "parquetry compact file:///lake ds" in html
    nothing = render_html(_data({"d=1": [200 * MIB], "d=2": [3 * MIB]}))
    assert "none (files are not small, or one per partition)" in nothing
    snapshot = render_html(dataclasses.replace(data, kind="snapshot"))
    assert "compact: 27" not in snapshot


def test_report_command_recommends_compaction(local: Lake, tmp_path) -> None:  # type: ignore[no-untyped-def]
    ds = Dataset.open(local.store, "orders")
    for _ in range(3):
        ds = ds.append(ORDERS)
    files = len(ds.plan().files)
    out = local.run("report", "orders", "--output", str(tmp_path / "r.html"), "--no-check")
    assert out.exit_code == 0, out.stdout + out.stderr
    assert f"recommended: compact: {files:,} → 3 files in 3 partitions" in out.stderr
    assert f"{files:,} → 3 files" in (tmp_path / "r.html").read_text()
