"""Acknowledgement logs: what a writer began and what it was told succeeded.

A writer appends one JSON line per event to its own log file with a single ``os.write`` on
an ``O_APPEND`` descriptor, so a line written before a SIGKILL is in the file (the page
cache outlives the process) and lines of concurrent writers never interleave. The parent
reads the logs after the kill (or, for races, while the writers run) and turns them into a
:class:`Ledger`: the oracle every check compares the stored data with.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

__all__ = [
    "AckLog",
    "Ledger",
    "append_rows",
    "read_records",
    "snapshot_rows",
    "update_rows",
]

#: Rows per operation: small, the harness tests protocols, not throughput.
ROWS = 3
#: Partitions that appends write into (updates own one partition per writer, above these).
APPEND_PARTITIONS = 4
UPDATE_PARTITION_BASE = 1000


class AckLog:
    """Append-only event log of one writer (one line per event, one write per line)."""

    def __init__(self, path: Path):
        self.path = path
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._lock = threading.Lock()

    def event(self, kind: str, **fields: Any) -> None:
        line = (json.dumps({"event": kind, **fields}, sort_keys=True) + "\n").encode()
        with self._lock:
            os.write(self._fd, line)

    def close(self) -> None:
        os.close(self._fd)


def read_records(paths: Iterable[Path]) -> list[dict[str, Any]]:
    """Every complete event line of the logs (a line cut by a kill is dropped)."""
    out: list[dict[str, Any]] = []
    for path in paths:
        if not path.exists():
            continue
        for line in path.read_bytes().split(b"\n"):
            if not line.strip():
                continue
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # only the last line of a killed writer can be cut
    return out


# --- the rows each operation writes (deterministic from the operation's identity) ----------


def _ids(writer: int, seq: int) -> list[int]:
    return [(writer * 1_000_000 + seq) * ROWS + j for j in range(ROWS)]


def append_rows(writer: int, seq: int) -> pa.Table:
    ids = _ids(writer, seq)
    p = (writer + seq) % APPEND_PARTITIONS
    return pa.table(
        {
            "p": pa.array([p] * ROWS, pa.int64()),
            "id": pa.array(ids, pa.int64()),
            "g": pa.array([seq] * ROWS, pa.int64()),
        }
    )


def update_rows(writer: int, seq: int) -> pa.Table:
    t = append_rows(writer, seq)
    part = pa.array([UPDATE_PARTITION_BASE + writer] * ROWS, pa.int64())
    return t.set_column(0, "p", part)


def snapshot_rows(writer: int, seq: int) -> pa.Table:
    """A snapshot generation: the tag ``writer:seq`` is in every row, ids tell it whole."""
    n = 2 * ROWS  # two parts with max_rows_per_file=ROWS: the switch moves several parts
    return pa.table(
        {
            "tag": pa.array([f"{writer}:{seq}"] * n),
            "i": pa.array(range(n), pa.int64()),
        }
    )


def row_ids(table: pa.Table) -> list[int]:
    return [int(v) for v in table.column("id").to_pylist()]


@dataclass
class Ledger:
    """What the logs say: acknowledged and begun operations, per kind."""

    # Dataset appends: ids acknowledged / begun (begun includes acknowledged).
    acked_ids: set[int] = field(default_factory=set)
    begun_ids: set[int] = field(default_factory=set)
    # Dataset updates: partition -> generations acknowledged / begun, in order.
    acked_gens: dict[int, list[int]] = field(default_factory=dict)
    begun_gens: dict[int, list[int]] = field(default_factory=dict)
    # Dataset versions each acknowledged commit produced: version -> the event.
    versions: dict[int, dict[str, Any]] = field(default_factory=dict)
    # Snapshot writes: tags acknowledged / begun, and ones that lost with CommitConflict.
    acked_tags: list[str] = field(default_factory=list)
    begun_tags: set[str] = field(default_factory=set)
    lost_tags: set[str] = field(default_factory=set)
    acks: int = 0

    @classmethod
    def from_records(cls, records: Iterable[dict[str, Any]]) -> Ledger:
        led = cls()
        for r in records:
            led.add(r)
        return led

    def add(self, r: dict[str, Any]) -> None:
        op, event = r.get("op"), r["event"]
        acked = event == "ack"
        self.acks += acked
        if op == "append":
            ids = row_ids(append_rows(r["writer"], r["seq"]))
            self.begun_ids.update(ids)
            if acked:
                self.acked_ids.update(ids)
                self.versions[r["version"]] = r
        elif op == "update":
            p = UPDATE_PARTITION_BASE + r["writer"]
            if event == "begin":
                self.begun_gens.setdefault(p, []).append(r["seq"])
            if acked:
                self.acked_gens.setdefault(p, []).append(r["seq"])
                self.versions[r["version"]] = r
        elif op == "snapshot":
            tag = f"{r['writer']}:{r['seq']}"
            self.begun_tags.add(tag)
            if acked:
                self.acked_tags.append(tag)
            elif event == "conflict":
                self.lost_tags.add(tag)
