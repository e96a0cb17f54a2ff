"""Tiny inline-SVG charts for the HTML report: no JavaScript, no external assets.

Each function returns one ``<svg>`` element as a string, with a ``data-chart`` attribute
naming it, a ``<title>`` for screen readers and one mark (``rect`` or ``circle``) per data
point carrying ``data-value``, so tests (and curious users) can find the data again.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

__all__ = ["Bar", "bar_chart", "column_chart", "human_bytes", "line_chart"]

_FONT = 'font-family="system-ui, sans-serif" font-size="11"'
_BAR_FILL = "#3b6ea5"
_ALT_FILL = "#c0504d"


@dataclass(frozen=True, slots=True, kw_only=True)
class Bar:
    """One bar: its label, its value and an optional note printed after it."""

    label: str
    value: float
    note: str = ""


def human_bytes(size: float) -> str:
    """``1536`` -> ``"1.5 KiB"``."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(size) < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def _open(name: str, title: str, width: int, height: int) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" data-chart="{escape(name)}" role="img" '
        f'width="{width}" height="{height}" viewBox="0 0 {width} {height}" {_FONT}>'
        f"<title>{escape(title)}</title>"
    )


def column_chart(
    name: str, title: str, bars: Sequence[Bar], *, width: int = 640, height: int = 240
) -> str:
    """Vertical bars (a histogram), labels under each bar, values above."""
    parts = [_open(name, title, width, height)]
    left, bottom, top = 40, 40, 20
    plot_h = height - bottom - top
    peak = max((b.value for b in bars), default=0) or 1
    step = (width - left - 10) / max(len(bars), 1)
    parts.append(
        f'<line x1="{left}" y1="{height - bottom}" x2="{width - 10}" y2="{height - bottom}" '
        'stroke="#888"/>'
    )
    for i, bar in enumerate(bars):
        h = plot_h * bar.value / peak
        x = left + i * step + step * 0.1
        y = height - bottom - h
        parts.append(
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{step * 0.8:.1f}" height="{h:.1f}" '
            f'fill="{_BAR_FILL}" data-value="{_num(bar.value)}"><title>{escape(bar.label)}: '
            f"{bar.value:g}</title></rect>"
        )
        cx = x + step * 0.4
        parts.append(
            f'<text x="{cx:.1f}" y="{height - bottom + 14}" text-anchor="middle">'
            f"{escape(bar.label)}</text>"
        )
        parts.append(
            f'<text x="{cx:.1f}" y="{y - 4:.1f}" text-anchor="middle">{bar.value:g}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def bar_chart(
    name: str,
    title: str,
    bars: Sequence[Bar],
    *,
    width: int = 640,
    fmt: str = "bytes",
    alt: bool = False,
) -> str:
    """Horizontal bars, one row each, label on the left, value and note on the right."""
    row_h, label_w, value_w = 18, 200, 170
    height = max(len(bars), 1) * row_h + 10
    parts = [_open(name, title, width, height)]
    peak = max((b.value for b in bars), default=0) or 1
    plot_w = width - label_w - value_w
    for i, bar in enumerate(bars):
        y = 5 + i * row_h
        w = max(plot_w * bar.value / peak, 1.0 if bar.value > 0 else 0.0)
        shown = human_bytes(bar.value) if fmt == "bytes" else f"{bar.value:,.0f}"
        note = f" · {bar.note}" if bar.note else ""
        parts.append(
            f'<text x="{label_w - 6}" y="{y + 12}" text-anchor="end">'
            f"{escape(_clip(bar.label, 32))}</text>"
        )
        parts.append(
            f'<rect x="{label_w}" y="{y + 2}" width="{w:.1f}" height="{row_h - 5}" '
            f'fill="{_ALT_FILL if alt else _BAR_FILL}" data-value="{_num(bar.value)}">'
            f"<title>{escape(bar.label)}: {escape(shown)}{escape(note)}</title></rect>"
        )
        parts.append(f'<text x="{label_w + w + 6:.1f}" y="{y + 12}">{escape(shown + note)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def line_chart(
    name: str,
    title: str,
    points: Sequence[tuple[float, float]],
    *,
    x_labels: Sequence[str],
    y_label: str,
    width: int = 640,
    height: int = 240,
) -> str:
    """A polyline with one circle per point; ``x_labels`` label the first and last point."""
    parts = [_open(name, title, width, height)]
    left, right, top, bottom = 70, 20, 20, 40
    xs = [p[0] for p in points] or [0.0]
    ys = [p[1] for p in points] or [0.0]
    x0, x1 = min(xs), max(xs)
    y1 = max(max(ys), 1.0)
    span_x = (x1 - x0) or 1.0

    def sx(x: float) -> float:
        return left + (width - left - right) * ((x - x0) / span_x if x1 > x0 else 0.5)

    def sy(y: float) -> float:
        return height - bottom - (height - top - bottom) * y / y1

    parts.append(
        f'<line x1="{left}" y1="{height - bottom}" x2="{width - right}" y2="{height - bottom}" '
        f'stroke="#888"/><line x1="{left}" y1="{top}" x2="{left}" y2="{height - bottom}" '
        'stroke="#888"/>'
    )
    parts.append(
        f'<text x="{left - 6}" y="{top + 4}" text-anchor="end">{_short(y1)}</text>'
        f'<text x="{left - 6}" y="{height - bottom}" text-anchor="end">0</text>'
        f'<text x="12" y="{top + (height - top - bottom) / 2:.0f}" '
        f'transform="rotate(-90 12 {top + (height - top - bottom) / 2:.0f})" '
        f'text-anchor="middle">{escape(y_label)}</text>'
    )
    if points:
        path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in points)
        parts.append(
            f'<polyline points="{path}" fill="none" stroke="{_BAR_FILL}" stroke-width="2"/>'
        )
    for (x, y), label in zip(points, x_labels, strict=False):
        parts.append(
            f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="3.5" fill="{_ALT_FILL}" '
            f'data-value="{_num(y)}"><title>{escape(label)}: {y:g}</title></circle>'
        )
    if x_labels:
        parts.append(
            f'<text x="{left}" y="{height - bottom + 16}">{escape(x_labels[0])}</text>'
            f'<text x="{width - right}" y="{height - bottom + 16}" text-anchor="end">'
            f"{escape(x_labels[-1])}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


def _num(value: float) -> str:
    """Exact text of a value (``:g`` would round large byte counts)."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else "…" + text[-(limit - 1) :]


def _short(value: float) -> str:
    if value >= 1e6:
        exp = int(math.log10(value))
        return f"{value / 10 ** (exp - exp % 3):.3g}{'kMGTPE'[exp // 3 - 1]}"
    return f"{value:,.0f}"
