"""File records in index pieces: what a point lookup needs of a matched label, without a
segment read (format 2, optional column ``files`` of a piece).

A piece may carry, parallel to its ``partition`` lists, a ``files: list<string>`` column:
for each label the compact JSON ``[rows, size]`` (every table's file at the conventional
key ``<uuid>/<table>/<label>.parquet``) or ``[rows, size, {table: key}]``, or null when the
writer did not know it (a partition another tool wrote). A label's file never changes while
the label is live (a rewrite gives a new label), so the record stays true as long as the
piece says the label holds the value. Planning an indexed lookup takes the matched labels'
records from the row group it already read; only labels without one cost a segment GET.
Pieces without the column (written before it existed, adopted kartothek files) are read as
before.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from parquetry.errors import MetadataCorrupted

__all__ = [
    "FILES_COLUMN",
    "FileRecord",
    "attach_records",
    "decode_record",
    "encode_record",
    "piece_records",
    "record_table",
]

FILES_COLUMN = "files"


@dataclass(frozen=True, slots=True, kw_only=True)
class FileRecord:
    """The files of one partition as a lookup needs them (no statistics)."""

    keys: Mapping[str, str]
    rows: int
    size: int


def conventional_key(uuid: str, table: str, label: str) -> str:
    return f"{uuid}/{table}/{label}.parquet"


def encode_record(uuid: str, label: str, keys: Mapping[str, str], rows: int, size: int) -> str:
    """The ``files`` text of one label (keys left out when all are conventional)."""
    if all(key == conventional_key(uuid, t, label) for t, key in keys.items()):
        return json.dumps([rows, size], separators=(",", ":"))
    return json.dumps([rows, size, dict(sorted(keys.items()))], separators=(",", ":"))


def decode_record(
    uuid: str, label: str, text: str, tables: Iterable[str], *, key: str
) -> FileRecord:
    """Parse one ``files`` text; a defect raises MetadataCorrupted naming the piece."""
    try:
        doc = json.loads(text)
    except ValueError:
        doc = None
    ok = (
        isinstance(doc, list)
        and len(doc) in (2, 3)
        and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in doc[:2])
    )
    keys: dict[str, str] = {}
    if ok and len(doc) == 3:
        ok = isinstance(doc[2], dict) and all(
            isinstance(t, str) and isinstance(k, str) for t, k in doc[2].items()
        )
        keys = dict(doc[2]) if ok else {}
    elif ok:
        keys = {t: conventional_key(uuid, t, label) for t in tables}
    if not ok:
        raise MetadataCorrupted(
            f"{key}: index piece column 'files' for label {label!r}: expected "
            f"[rows, size] or [rows, size, {{table: key}}], found {text[:200]!r}",
            key=key,
        )
    return FileRecord(keys=keys, rows=doc[0], size=doc[1])


def record_table(records: Mapping[str, str | None]) -> pa.Table:
    """``label -> files text`` as a table (columns ``label``, ``file``)."""
    labels = sorted(records)
    return pa.table(
        {
            "label": pa.array(labels, pa.string()),
            "file": pa.array([records[x] for x in labels], pa.string()),
        }
    )


def attach_records(labels: pa.ListArray, records: pa.Table | None) -> pa.ListArray | None:
    """The ``files`` column parallel to ``labels`` (None when no label has a record)."""
    if records is None or records.num_rows == 0:
        return None
    flat = pc.list_flatten(labels)
    at = pc.index_in(flat, value_set=records.column("label").combine_chunks())
    files = records.column("file").combine_chunks().take(at)
    if files.null_count == len(files):
        return None
    offsets = labels.offsets
    if len(offsets) and offsets[0].as_py() != 0:
        offsets = pc.subtract(offsets, offsets[0])
    return pa.ListArray.from_arrays(offsets, files)


def piece_records(table: pa.Table) -> pa.Table | None:
    """The ``(label, file)`` records a piece's table holds (None without the column)."""
    if FILES_COLUMN not in table.column_names:
        return None
    lists = table.column(FILES_COLUMN).combine_chunks()
    labels = table.column("partition").combine_chunks()
    if not pa.types.is_list(lists.type) or len(lists) != len(labels):
        return None
    out = pa.table(
        {"label": pc.list_flatten(labels).cast(pa.string()), "file": pc.list_flatten(lists)}
    )
    if len(out.column("label")) != len(out.column("file")):
        return None
    out = out.filter(pc.is_valid(out.column("file")))
    g = out.group_by("label", use_threads=False).aggregate([("file", "first")])
    return pa.table({"label": g.column("label"), "file": g.column("file_first")})


def matched_records(table: pa.Table, mask: Any) -> dict[str, str]:
    """``label -> files text`` of the rows ``mask`` selects (labels without one left out)."""
    if FILES_COLUMN not in table.column_names:
        return {}
    lists = pc.filter(table.column(FILES_COLUMN).combine_chunks(), mask)
    labels = pc.filter(table.column("partition").combine_chunks(), mask)
    flat_l = pc.list_flatten(labels).to_pylist()
    flat_f = pc.list_flatten(lists).to_pylist()
    if len(flat_l) != len(flat_f):
        return {}  # a malformed column: the lookup falls back to the segments
    return {lbl: f for lbl, f in zip(flat_l, flat_f, strict=True) if f is not None}
