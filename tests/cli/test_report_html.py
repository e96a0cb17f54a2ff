"""The HTML health report from plain data: content, self-containment, Chromium rendering."""

from __future__ import annotations

import datetime as dt
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from parquetry.cli.report import (
    ColumnInfo,
    FileInfo,
    ReportData,
    VersionInfo,
    render_html,
    size_histogram,
)

KIB, MIB = 1024, 1024 * 1024
T0 = dt.datetime(2024, 5, 1, 12, 0, tzinfo=dt.UTC)


def sample_data(problems: tuple[str, ...] = ()) -> ReportData:
    files = [
        FileInfo(
            key=f"ds/table/day=2024-05-0{d}/f{i}.parquet",
            partition=f"day=2024-05-0{d}",
            rows=100 * d,
            size=size,
        )
        for d in (1, 2, 3)
        for i, size in enumerate((10 * KIB, 200 * KIB, 3 * MIB * d))
    ]
    return ReportData(
        dataset="orders",
        store="file:///lake",
        kind="kartothek",
        version=3,
        generated=T0,
        schema=(("day", "date32[day]"), ("customer", "string"), ("amount", "double")),
        partition_keys=("day",),
        indices=("customer",),
        files=tuple(files),
        columns=(
            ColumnInfo(name="customer", compressed=4000, uncompressed=20000),
            ColumnInfo(name="amount", compressed=8000, uncompressed=8000),
        ),
        versions=(
            VersionInfo(number=1, time=T0, operation="create", rows_added=900, files=3),
            VersionInfo(
                number=2,
                time=T0 + dt.timedelta(hours=1),
                operation="append",
                rows_added=1800,
                files=6,
            ),
            VersionInfo(
                number=3,
                time=T0 + dt.timedelta(hours=2),
                operation="update",
                rows_added=0,
                rows_removed=300,
                files=9,
            ),
        ),
        problems=problems,
    )


def _chart(html: str, name: str) -> str:
    match = re.search(rf'<svg[^>]*data-chart="{name}".*?</svg>', html, re.S)
    assert match, f"chart {name} missing"
    return match.group()


def _values(svg: str) -> list[float]:
    return [float(v) for v in re.findall(r'data-value="([^"]+)"', svg)]


def test_size_histogram_classes() -> None:
    bars = size_histogram([0, 64 * KIB - 1, 64 * KIB, MIB, 5 * MIB, 2 * 1024 * MIB])
    counts = {b.label: b.value for b in bars}
    assert counts["< 64 KiB"] == 2
    assert counts["64 KiB+"] == 1
    assert counts["1 MiB+"] == 1
    assert counts["4 MiB+"] == 1
    assert counts["≥ 1 GiB"] == 1
    assert sum(counts.values()) == 6


def test_report_shows_the_data() -> None:
    data = sample_data()
    html = render_html(data)
    assert _values(_chart(html, "file-sizes")) == [
        b.value for b in size_histogram([f.size for f in data.files])
    ]
    # Largest partition first: day=2024-05-03 holds 3 * 3 MiB + 210 KiB.
    assert _values(_chart(html, "partition-bytes")) == [
        10 * KIB + 200 * KIB + 3 * MIB * d for d in (3, 2, 1)
    ]
    assert _values(_chart(html, "partition-rows")) == [900, 600, 300]
    column_svg = _chart(html, "column-bytes")
    assert _values(column_svg) == [8000, 4000]
    assert "5.0 x" in column_svg  # customer: 20000 / 4000
    assert _values(_chart(html, "versions")) == [900, 2700, 2400]
    assert "No problems found." in html
    assert "skew (largest / median partition)" in html


def test_report_lists_problems_escaped() -> None:
    html = render_html(sample_data(problems=("missing file <a>.parquet",)))
    assert "missing file &lt;a&gt;.parquet" in html
    assert "No problems found." not in html


def test_report_is_self_contained() -> None:
    html = render_html(sample_data())
    lowered = html.lower()
    for marker in ("<script", "<link", "<img", "<iframe", "@import", "url(", " src=", " href="):
        assert marker not in lowered, marker
    # The only URL is the SVG namespace, which browsers never fetch.
    assert set(re.findall(r"https?://[^\s\"'<>]+", html)) == {"http://www.w3.org/2000/svg"}


def test_report_without_history_or_files() -> None:
    data = ReportData(
        dataset="empty", store="memory://x", kind="snapshot", version=None, generated=T0
    )
    html = render_html(data)
    assert "This dataset keeps no version history." in html
    assert _values(_chart(html, "file-sizes")) == [0.0] * 9


def test_report_data_json_round_trip() -> None:
    data = sample_data(problems=("x",))
    doc = json.loads(json.dumps(data.to_json()))
    assert ReportData.from_json(doc) == data


_PROBE = """
<pre id="probe"></pre>
<script>
const out = {};
for (const svg of document.querySelectorAll("svg[data-chart]")) {
  const box = svg.getBoundingClientRect();
  const marks = [...svg.querySelectorAll("rect[data-value], circle[data-value]")];
  const drawn = marks.filter(m => { const b = m.getBBox(); return b.width > 0 && b.height > 0; });
  out[svg.dataset.chart] = {width: box.width, height: box.height, marks: marks.length,
                            drawn: drawn.length};
}
document.getElementById("probe").textContent = JSON.stringify(out);
</script>
"""


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.slow
def test_report_renders_in_headless_chromium(tmp_path: Path) -> None:
    exe = _chromium()
    if exe is None:
        pytest.skip("chromium is not installed (scripts/ensure-chromium.sh installs it as root)")
    # The report itself runs no script: the probe is added to a copy, only for this test.
    page = tmp_path / "report.html"
    page.write_text(
        render_html(sample_data()).replace("</body>", _PROBE + "</body>"), encoding="utf-8"
    )
    result = subprocess.run(
        [
            exe,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=300,  # a bound against a hang: Chromium starts several processes
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    match = re.search(r'<pre id="probe">(.*?)</pre>', result.stdout, re.S)
    assert match, result.stdout[-2000:]
    charts = json.loads(match.group(1))
    assert set(charts) == {
        "file-sizes",
        "partition-bytes",
        "partition-rows",
        "column-bytes",
        "versions",
    }
    for name, chart in charts.items():
        assert chart["width"] > 100, (name, chart)
        assert chart["height"] > 20, (name, chart)
        assert chart["marks"] > 0, name
    # Non-empty bars and every version point are laid out with a real size.
    assert charts["file-sizes"]["drawn"] == sum(
        1 for b in size_histogram([f.size for f in sample_data().files]) if b.value > 0
    )
    assert charts["partition-bytes"]["drawn"] == 3
    assert charts["column-bytes"]["drawn"] == 2
    assert charts["versions"]["drawn"] == 3
