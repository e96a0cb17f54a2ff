"""What a version document records per file: :class:`FileInfo` (rows, size, column
statistics) and :class:`FileInfos`, the label -> FileInfo map decoded lazily from the
document's JSON texts (``"parquetry"."files"`` in :mod:`parquetry.dataset.metadata`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import Any

from parquetry.dataset.docschema import decode_file_entry, file_entry_problems, raise_problems
from parquetry.dataset.stats import ColumnStats

__all__ = ["FileInfo", "FileInfos"]


@dataclass(frozen=True, slots=True, kw_only=True)
class FileInfo:
    """What parquetry knows about the main table's file of one partition."""

    rows: int
    size: int
    stats: Mapping[str, ColumnStats] = field(default_factory=dict)

    def to_json(self) -> list[Any]:
        return [self.rows, self.size, dict(self.stats)]

    @classmethod
    def from_json(cls, doc: Any) -> FileInfo:
        rows, size, stats = doc
        return cls(rows=int(rows), size=int(size), stats=stats)


class FileInfos(Mapping[str, FileInfo]):
    """label -> FileInfo, decoding each entry from its JSON text only when asked for.

    Version documents store every file's statistics as a JSON *string* per label: parsing
    a 10,000-partition document then costs a few milliseconds, and planning decodes only
    the entries it uses. Each entry is checked completely (shape, ranges, values against
    the column types) when it is first decoded; a bad one raises MetadataCorrupted naming
    the document and the field path, never a raw decoding error.
    """

    __slots__ = ("_checks", "_entries", "_key")

    def __init__(
        self,
        entries: Mapping[str, Any] | None = None,
        *,
        owned: bool = False,
        key: str = "",
        checks: Mapping[str, Any] | None = None,
    ):
        # Entries are JSON text (str), decoded FileInfo, or (older documents) decoded lists.
        self._entries: MutableMapping[str, Any] = (
            entries if owned and isinstance(entries, dict | MutableMapping) else dict(entries or {})
        )
        self._key = key
        self._checks = checks

    def __getitem__(self, label: str) -> FileInfo:
        entry = self._entries[label]
        if not isinstance(entry, FileInfo):
            entry = self._decode(label, entry)
            self._entries[label] = entry  # benign race: every thread decodes the same value
        return entry

    def _decode(self, label: str, text: Any) -> FileInfo:
        raw, problems = self._check(label, text)
        if problems:
            raise_problems(problems, self._key or "dataset metadata")
        rows, size, stats = raw
        return FileInfo(rows=rows, size=size, stats=stats)

    def _check(self, label: str, text: Any) -> tuple[Any, list[str]]:
        path = f"parquetry.files[{label!r}]"
        try:
            raw = decode_file_entry(text)
        except ValueError as exc:
            return None, [f"{path}: not valid JSON statistics ({str(exc)[:100]})"]
        return raw, file_entry_problems(raw, self._checks, path)

    def problems(self) -> list[str]:
        """Problems of every entry not decoded yet (what a full validation reports)."""
        out: list[str] = []
        for label, entry in self._entries.items():
            if not isinstance(entry, FileInfo):
                out += self._check(label, entry)[1]
        return out

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, label: object) -> bool:
        return label in self._entries

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Mapping) and dict(self.items()) == dict(other.items())

    __hash__ = None  # type: ignore[assignment]

    def to_json(self) -> dict[str, str]:
        out = {}
        for label, entry in self._entries.items():
            if isinstance(entry, FileInfo):
                entry = entry.to_json()
            out[label] = entry if isinstance(entry, str) else json.dumps(entry)
        return out

    def changed(self, remove: set[str], add: Mapping[str, FileInfo]) -> FileInfos:
        entries: dict[str, Any] = {k: v for k, v in self._entries.items() if k not in remove}
        entries.update(add)
        return FileInfos(entries, owned=True, key=self._key, checks=self._checks)
