"""The kartothek v4 metadata document, with parquetry's additions, as a frozen value.

On disk the document is kartothek's dict (key order as kartothek writes it) plus one extra
top-level key, ``"parquetry"``, that kartothek ignores::

    {"dataset_metadata_version": 4, "dataset_uuid": ..., "indices": {...}, "metadata": {...},
     "partitions": {label: {"files": {table: key}}}, "partition_keys": [...],
     "parquetry": {"format": 1, "schema": <b64 Arrow schema>, "version": {...},
                   "files": {label: "[rows, size, {column: [min, max, nulls]}]"},
                   "metadata_format": "json"}}

The same bytes are stored as the immutable version document and as the pointer. A document
kartothek wrote has no ``"parquetry"`` entry (``version`` is None, no statistics).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import msgpack
import pyarrow as pa
import zstandard

from parquetry.dataset.indexfile import IndexFooter
from parquetry.dataset.schema import schema_from_b64, schema_to_b64
from parquetry.dataset.stats import ColumnStats
from parquetry.errors import InvalidArgument, MetadataCorrupted

__all__ = [
    "DatasetDocument",
    "FileInfo",
    "FileInfos",
    "VersionInfo",
    "decode_document",
    "encode_document",
]

EXTENSION_KEY = "parquetry"
EXTENSION_FORMAT = 1


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
    the entries it uses.
    """

    __slots__ = ("_entries",)

    def __init__(self, entries: Mapping[str, Any] | None = None, *, owned: bool = False):
        # Entries are JSON text (str), decoded FileInfo, or (older documents) decoded lists.
        self._entries: dict[str, Any] = (
            entries if owned and isinstance(entries, dict) else dict(entries or {})
        )

    def __getitem__(self, label: str) -> FileInfo:
        entry = self._entries[label]
        if not isinstance(entry, FileInfo):
            entry = FileInfo.from_json(json.loads(entry) if isinstance(entry, str) else entry)
            self._entries[label] = entry  # benign race: every thread decodes the same value
        return entry

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
        entries = {k: v for k, v in self._entries.items() if k not in remove}
        entries.update(add)
        return FileInfos(entries)


@dataclass(frozen=True, slots=True, kw_only=True)
class VersionInfo:
    """One commit: its number, parent, wall-clock time (ISO, UTC) and what it did."""

    number: int
    parent: int | None
    committed_at: str
    operation: str
    rows_added: int = 0
    rows_removed: int = 0
    files_added: int = 0
    files_removed: int = 0
    #: Number of the version that created this incarnation of the dataset (a uuid can be
    #: deleted and created again; older incarnations' versions are not part of the history).
    epoch: int = 0
    #: Random id of this incarnation (empty in documents written before incarnation ids):
    #: a commit checks that the incarnation it builds on still exists.
    incarnation: str = ""

    def to_json(self) -> dict[str, Any]:
        extra = {"incarnation": self.incarnation} if self.incarnation else {}
        return {
            "number": self.number,
            "parent": self.parent,
            "committed_at": self.committed_at,
            "operation": self.operation,
            "rows_added": self.rows_added,
            "rows_removed": self.rows_removed,
            "files_added": self.files_added,
            "files_removed": self.files_removed,
            "epoch": self.epoch,
            **extra,
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> VersionInfo:
        return cls(**{k: doc[k] for k in doc if k in cls.__slots__})


@dataclass(frozen=True, slots=True, kw_only=True)
class DatasetDocument:
    """One state of a dataset (kartothek v4 content + parquetry additions)."""

    uuid: str
    partitions: Mapping[str, Mapping[str, str]]
    partition_keys: tuple[str, ...]
    indices: Mapping[str, Any] = field(default_factory=dict)
    metadata: Mapping[str, Any] = field(default_factory=dict)
    explicit_partitions: bool = True
    schema: pa.Schema | None = None
    files: FileInfos = field(default_factory=FileInfos)
    version: VersionInfo | None = None
    metadata_format: str = "json"
    index_footers: Mapping[str, IndexFooter] = field(default_factory=dict)

    @property
    def tables(self) -> tuple[str, ...]:
        for files in self.partitions.values():
            return tuple(files)
        return ("table",)

    def evolve(self, **changes: Any) -> DatasetDocument:
        return replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"dataset_metadata_version": 4, "dataset_uuid": self.uuid}
        if self.indices:
            out["indices"] = dict(self.indices)
        out["metadata"] = dict(self.metadata)
        out["partitions"] = {label: {"files": dict(f)} for label, f in self.partitions.items()}
        out["partition_keys"] = list(self.partition_keys)
        if self.schema is not None and self.version is not None:
            out[EXTENSION_KEY] = {
                "format": EXTENSION_FORMAT,
                "schema": schema_to_b64(self.schema),
                "version": self.version.to_json(),
                "metadata_format": self.metadata_format,
                "files": self.files.to_json(),
                "index_footers": {c: f.to_json() for c, f in self.index_footers.items()},
            }
        return out

    @classmethod
    def from_dict(cls, doc: Any, *, key: str, metadata_format: str = "json") -> DatasetDocument:
        try:
            return cls._from_dict(doc, metadata_format)
        except MetadataCorrupted as exc:
            raise MetadataCorrupted(f"{key}: {exc}", key=key) from None
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise MetadataCorrupted(
                f"{key}: invalid dataset metadata ({type(exc).__name__}: {exc})", key=key
            ) from None

    @classmethod
    def _from_dict(cls, doc: Any, metadata_format: str) -> DatasetDocument:
        if not isinstance(doc, dict):
            raise MetadataCorrupted("the document is not a JSON object")
        version = doc.get("dataset_metadata_version")
        if version != 4:
            raise MetadataCorrupted(f"dataset_metadata_version is {version!r}, expected 4")
        explicit = "partitions" in doc
        # The decoded dicts are owned by this document: no copies (10,000s of partitions).
        partitions = {
            label: entry["files"] for label, entry in (doc.get("partitions") or {}).items()
        }
        keys = doc.get("partition_keys")
        ext = doc.get(EXTENSION_KEY)
        schema = files = info = None
        footers = {}
        fmt = metadata_format
        if isinstance(ext, dict) and ext.get("format") == EXTENSION_FORMAT:
            schema = schema_from_b64(ext["schema"])
            info = VersionInfo.from_json(ext["version"])
            files = FileInfos(ext["files"], owned=True)
            fmt = ext.get("metadata_format", metadata_format)
            footers = {c: IndexFooter.from_json(f) for c, f in ext.get("index_footers", {}).items()}
        return cls(
            uuid=str(doc["dataset_uuid"]),
            partitions=partitions,
            partition_keys=tuple(keys) if keys is not None else _infer_keys(partitions),
            indices=dict(doc.get("indices") or {}),
            metadata=dict(doc.get("metadata") or {}),
            explicit_partitions=explicit,
            schema=schema,
            files=files or FileInfos(),
            version=info,
            metadata_format=fmt,
            index_footers=footers,
        )


def _infer_keys(partitions: Mapping[str, Mapping[str, str]]) -> tuple[str, ...]:
    from parquetry.dataset.naming import parse_label

    for label in partitions:
        return tuple(k for k, _ in parse_label(label))
    return ()


def encode_document(doc: DatasetDocument, fmt: str = "json") -> bytes:
    """Bytes exactly as kartothek writes them (simplejson defaults / zstd msgpack)."""
    as_dict = doc.to_dict()
    try:
        if fmt == "json":
            return json.dumps(as_dict).encode("utf-8")
        packed = msgpack.packb(as_dict, use_bin_type=True)
    except (TypeError, ValueError, OverflowError) as exc:
        raise InvalidArgument(
            f"dataset {doc.uuid!r}: metadata cannot be stored as {fmt}: {exc}"
        ) from None
    return bytes(zstandard.ZstdCompressor(write_content_size=True).compress(packed))


def decode_document(data: bytes, fmt: str, *, key: str) -> DatasetDocument:
    try:
        if fmt == "json":
            raw = json.loads(data)
        else:
            raw = msgpack.unpackb(zstandard.ZstdDecompressor().decompress(data), raw=False)
    except (ValueError, zstandard.ZstdError, msgpack.UnpackException) as exc:
        raise MetadataCorrupted(f"{key}: cannot decode {fmt} metadata: {exc}", key=key) from None
    return DatasetDocument.from_dict(raw, key=key, metadata_format=fmt)
