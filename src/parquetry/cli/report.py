"""The HTML health report: a plain data model, and one self-contained HTML page made from it.

:class:`ReportData` is collected from a dataset by :mod:`parquetry.cli.collect`; rendering
here needs nothing but the data, so it is tested without any store. The page embeds its CSS
and SVG charts; it loads nothing from the network and runs no script.
"""

from __future__ import annotations

import datetime as dt
import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from html import escape
from typing import Any

from parquetry.cli.svg import Bar, bar_chart, column_chart, human_bytes, line_chart

__all__ = [
    "ColumnInfo",
    "FileInfo",
    "ReportData",
    "VersionInfo",
    "compaction_gain",
    "render_html",
    "size_histogram",
]

#: Files below this size are "small" (the small-file problem: too many requests per byte).
SMALL_FILE_BYTES = 8 * 1024 * 1024
#: Target size the compaction recommendation assumes (``Dataset.compact``'s default).
COMPACT_TARGET = 128 << 20
#: Partitions shown in the per-partition charts (the largest ones).
MAX_PARTITION_BARS = 40


@dataclass(frozen=True, slots=True, kw_only=True)
class FileInfo:
    """One data file: store key, partition label ("" when unpartitioned), rows and bytes."""

    key: str
    partition: str
    rows: int
    size: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ColumnInfo:
    """Bytes of one column over all files, as stored (compressed) and decoded."""

    name: str
    compressed: int
    uncompressed: int


@dataclass(frozen=True, slots=True, kw_only=True)
class VersionInfo:
    """One committed version of a dataset."""

    number: int
    time: dt.datetime | None
    operation: str
    rows_added: int | None = None
    rows_removed: int | None = None
    files: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ReportData:
    """Everything the report shows; JSON round-trips with :meth:`to_json` / :meth:`from_json`."""

    format_version: int = 1
    dataset: str
    store: str
    kind: str  # "kartothek" or "snapshot"
    version: int | None
    generated: dt.datetime
    schema: tuple[tuple[str, str], ...] = ()
    partition_keys: tuple[str, ...] = ()
    indices: tuple[str, ...] = ()
    files: tuple[FileInfo, ...] = ()
    columns: tuple[ColumnInfo, ...] = ()
    versions: tuple[VersionInfo, ...] = ()
    problems: tuple[str, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        doc = asdict(self)
        doc["generated"] = self.generated.isoformat()
        for v in doc["versions"]:
            v["time"] = v["time"].isoformat() if v["time"] is not None else None
        return doc

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> ReportData:
        return cls(
            format_version=int(doc.get("format_version", 1)),
            dataset=doc["dataset"],
            store=doc["store"],
            kind=doc["kind"],
            version=doc["version"],
            generated=dt.datetime.fromisoformat(doc["generated"]),
            schema=tuple((str(n), str(t)) for n, t in doc["schema"]),
            partition_keys=tuple(doc["partition_keys"]),
            indices=tuple(doc["indices"]),
            files=tuple(FileInfo(**f) for f in doc["files"]),
            columns=tuple(ColumnInfo(**c) for c in doc["columns"]),
            versions=tuple(VersionInfo(**{**v, "time": _time(v["time"])}) for v in doc["versions"]),
            problems=tuple(doc["problems"]),
        )


def _time(text: str | None) -> dt.datetime | None:
    return dt.datetime.fromisoformat(text) if text else None


def size_histogram(sizes: Sequence[int]) -> list[Bar]:
    """Counts of files per size class, classes growing by 4x from "< 64 KiB" to ">= 1 GiB"."""
    edges = [64 * 1024 * 4**i for i in range(8)]  # 64 KiB ... 1 GiB
    counts = [0] * (len(edges) + 1)
    for size in sizes:
        counts[sum(1 for edge in edges if size >= edge)] += 1
    labels = [f"< {human_bytes(edges[0]).replace('.0', '')}"]
    labels += [f"{human_bytes(lo).replace('.0', '')}+" for lo in edges[:-1]]
    labels += [f"≥ {human_bytes(edges[-1]).replace('.0', '')}"]
    return [Bar(label=label, value=count) for label, count in zip(labels, counts, strict=True)]


def _per_partition(files: Sequence[FileInfo]) -> list[tuple[str, int, int, int]]:
    """(partition, files, rows, bytes) sorted by bytes, largest first."""
    acc: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for f in files:
        entry = acc[f.partition or "(unpartitioned)"]
        entry[0] += 1
        entry[1] += f.rows
        entry[2] += f.size
    return sorted(((p, n, r, b) for p, (n, r, b) in acc.items()), key=lambda t: (-t[3], t[0]))


def compaction_gain(
    files: Sequence[FileInfo], target: int = COMPACT_TARGET
) -> tuple[int, int, int]:
    """(files before, files after, partitions compacted) of ``parquetry compact`` at
    ``target``: the same bin packing per partition (files below the target, first fit
    decreasing, single-file bins and partitions with one small file left alone)."""
    from parquetry.dataset.compact_plan import pack

    parts: dict[str, list[int]] = defaultdict(list)
    for f in files:
        parts[f.partition].append(f.size)
    after, touched = len(files), 0
    for sizes in parts.values():
        bins = pack(sizes, target)
        after -= sum(len(b) for b in bins) - len(bins)
        touched += bool(bins)
    return len(files), after, touched


def compaction_advice(data: ReportData) -> str | None:
    """The recommendation shown when compaction would remove files (kartothek datasets)."""
    if data.kind != "kartothek":
        return None
    before, after, parts = compaction_gain(data.files)
    if after >= before:
        return None
    return (
        f"compact: {before:,} → {after:,} files in {parts:,} partitions at a "
        f"{human_bytes(COMPACT_TARGET)} target (parquetry compact {data.store} {data.dataset})"
    )


def _summary(data: ReportData) -> list[tuple[str, str]]:
    sizes = [f.size for f in data.files]
    total = sum(sizes)
    partitions = _per_partition(data.files)
    small = sum(1 for s in sizes if s < SMALL_FILE_BYTES)
    rows = [
        ("kind", data.kind),
        ("version", "-" if data.version is None else str(data.version)),
        ("files", f"{len(sizes):,}"),
        ("rows", f"{sum(f.rows for f in data.files):,}"),
        ("bytes", human_bytes(total)),
        ("median file", human_bytes(statistics.median(sizes)) if sizes else "-"),
        ("small files (< 8 MiB)", f"{small:,} of {len(sizes):,}"),
        ("partitions", f"{len(partitions):,}"),
    ]
    if len(partitions) > 1:
        median = statistics.median(p[3] for p in partitions) or 1
        rows.append(("skew (largest / median partition)", f"{partitions[0][3] / median:.1f} x"))
    if data.columns:
        comp = sum(c.compressed for c in data.columns) or 1
        ratio = sum(c.uncompressed for c in data.columns) / comp
        rows.append(("compression ratio", f"{ratio:.1f} x"))
    if data.kind == "kartothek":
        advice = compaction_advice(data)
        rows.append(
            ("recommendation", advice or "none (files are not small, or one per partition)")
        )
    rows.append(("problems", str(len(data.problems)) if data.problems else "none found"))
    return rows


def _charts(data: ReportData) -> list[tuple[str, str, str]]:
    """(heading, explanation, svg) for each chart."""
    out = [
        (
            "File sizes",
            "Many small files cost one request each and make reads slow (the small-file "
            "problem); most files should sit in the larger classes.",
            column_chart(
                "file-sizes",
                "Histogram of data file sizes",
                size_histogram([f.size for f in data.files]),
            ),
        )
    ]
    parts = _per_partition(data.files)
    shown = parts[:MAX_PARTITION_BARS]
    more = (
        f" The {len(parts) - len(shown):,} smaller partitions are not shown."
        if len(parts) > len(shown)
        else ""
    )
    out.append(
        (
            "Bytes per partition",
            "Uneven partitions (skew) make some tasks much slower than others." + more,
            bar_chart(
                "partition-bytes",
                "Bytes per partition",
                [Bar(label=p, value=b, note=f"{n} files") for p, n, _, b in shown],
            ),
        )
    )
    out.append(
        (
            "Rows per partition",
            "Row counts of the same partitions.",
            bar_chart(
                "partition-rows",
                "Rows per partition",
                [Bar(label=p, value=r) for p, _, r, _ in shown],
                fmt="count",
                alt=True,
            ),
        )
    )
    columns = sorted(data.columns, key=lambda c: (-c.compressed, c.name))
    out.append(
        (
            "Bytes per column",
            "Stored (compressed) bytes of each column over all files, with its compression ratio "
            "(decoded ÷ stored).",
            bar_chart(
                "column-bytes",
                "Stored bytes per column",
                [
                    Bar(
                        label=c.name,
                        value=c.compressed,
                        note=f"{c.uncompressed / c.compressed:.1f} x" if c.compressed else "",
                    )
                    for c in columns
                ],
            ),
        )
    )
    out.append(("Versions over time", *_versions_chart(data.versions)))
    return out


def _versions_chart(versions: Sequence[VersionInfo]) -> tuple[str, str]:
    ordered = sorted(versions, key=lambda v: v.number)
    total = 0
    points: list[tuple[float, float]] = []
    labels: list[str] = []
    timed = all(v.time is not None for v in ordered)
    for v in ordered:
        total += (v.rows_added or 0) - (v.rows_removed or 0)
        x = v.time.timestamp() if timed and v.time is not None else float(v.number)
        points.append((x, float(total)))
        when = v.time.strftime("%Y-%m-%d %H:%M:%S") if v.time is not None else "time unknown"
        labels.append(f"v{v.number} {v.operation} {when}")
    text = (
        "Rows in the dataset after each committed version."
        if ordered
        else "This dataset keeps no version history."
    )
    svg = line_chart("versions", "Rows after each version", points, x_labels=labels, y_label="rows")
    return text, svg


_CSS = """
body{font-family:system-ui,sans-serif;margin:2rem auto;max-width:60rem;color:#222;padding:0 1rem}
h1{font-size:1.5rem;margin-bottom:.2rem}h2{font-size:1.15rem;margin-top:2rem}
.sub{color:#666;margin-top:0}table{border-collapse:collapse;margin:.5rem 0}
td,th{border-bottom:1px solid #ddd;padding:.2rem .8rem;text-align:left;font-size:.9rem}
.num{text-align:right}.bad{color:#a00}.ok{color:#070}figure{margin:0}
figcaption{color:#555;font-size:.9rem;margin-bottom:.3rem}svg{max-width:100%;height:auto}
"""


def _table(rows: Sequence[Sequence[str]], header: Sequence[str] | None = None) -> str:
    head = "<tr>" + "".join(f"<th>{escape(h)}</th>" for h in header) + "</tr>" if header else ""
    body = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table>{head}{body}</table>"


def render_html(data: ReportData) -> str:
    """The report as one HTML document (UTF-8 text)."""
    title = f"parquetry report: {data.dataset}"
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{escape(title)}</h1>",
        f'<p class="sub">{escape(data.store)} · generated '
        f"{escape(data.generated.strftime('%Y-%m-%d %H:%M:%S %Z').strip())}</p>",
        '<h2 id="summary">Summary</h2>',
        _table(_summary(data)),
    ]
    out.append('<h2 id="problems">Health checks</h2>')
    if data.problems:
        items = "".join(f"<li>{escape(p)}</li>" for p in data.problems)
        out.append(f'<ul class="bad">{items}</ul>')
    else:
        out.append('<p class="ok">No problems found.</p>')
    for heading, text, svg in _charts(data):
        slug = heading.lower().replace(" ", "-")
        out.append(
            f'<h2 id="{slug}">{escape(heading)}</h2><figure>'
            f"<figcaption>{escape(text)}</figcaption>{svg}</figure>"
        )
    out.append('<h2 id="schema">Schema</h2>')
    keys = set(data.partition_keys)
    out.append(
        _table(
            [
                (n, t, "partition key" if n in keys else ("indexed" if n in data.indices else ""))
                for n, t in data.schema
            ],
            header=("column", "type", ""),
        )
    )
    if data.versions:
        out.append('<h2 id="history">History</h2>')
        out.append(
            _table(
                [
                    (
                        str(v.number),
                        v.time.isoformat(sep=" ") if v.time else "-",
                        v.operation,
                        _opt(v.rows_added),
                        _opt(v.rows_removed),
                        _opt(v.files),
                    )
                    for v in sorted(data.versions, key=lambda v: v.number)
                ],
                header=("version", "time", "operation", "rows added", "rows removed", "files"),
            )
        )
    out.append("</body></html>")
    return "\n".join(out)


def _opt(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"
