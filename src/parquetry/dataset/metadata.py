"""The kartothek v4 metadata document, with parquetry's additions, as a frozen value.

On disk the document is kartothek's dict (key order as kartothek writes it) plus one extra
top-level key, ``"parquetry"``, that kartothek ignores::

    {"dataset_metadata_version": 4, "dataset_uuid": ..., "indices": {...}, "metadata": {...},
     "partitions": {label: {"files": {table: key}}}, "partition_keys": [...],
     "parquetry": {"format": 1, "schema": <b64 Arrow schema>, "version": {...},
                   "files": {label: "[rows, size, {column: [min, max, nulls]}]"},
                   "metadata_format": "json"}}

The same bytes are stored as the immutable version document and as the pointer. A document
kartothek wrote has no ``"parquetry"`` entry (``version`` is None, no statistics). The
per-file entries are :mod:`parquetry.dataset.fileinfo`'s (re-exported here).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import msgpack
import pyarrow as pa
import zstandard

from parquetry.dataset.docschema import (
    check_document,
    parse_document_bytes,
    raise_problems,
    stats_checkers,
)
from parquetry.dataset.fileinfo import FileInfo, FileInfos
from parquetry.dataset.indexfile import IndexFooter
from parquetry.dataset.schema import schema_from_b64, schema_to_b64
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
#: Key of the pointer's user ``metadata`` naming the version the pointer shows. kartothek
#: drops parquetry's extension when it rewrites the pointer but keeps ``metadata``
#: verbatim, so this tells which version a kartothek write was based on
#: (``dataset/reconcile.py``). Stripped when parquetry reads its own pointer.
POINTER_MARKER = "parquetry_pointer_version"


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
    #: Bytes of the data files this commit added / removed (0 in documents written before).
    bytes_added: int = 0
    bytes_removed: int = 0
    #: The operation's parameters as strings (save mode, replaceWhere, Spark application id,
    #: the caller's own entries); empty in documents written before parameters were recorded.
    parameters: Mapping[str, str] = field(default_factory=dict)
    #: Operation-specific counts (JSON key ``"metrics"``; Delta-like names such as
    #: ``rows_deleted``, ``rows_updated``, ``rows_copied``, ``files_rewritten``); empty for
    #: plain writes and in documents written before table operations.
    extra: Mapping[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        # New fields only when set: documents stay byte-identical to older writers' otherwise.
        extra: dict[str, Any] = {"incarnation": self.incarnation} if self.incarnation else {}
        if self.bytes_added or self.bytes_removed:
            extra["bytes_added"] = self.bytes_added
            extra["bytes_removed"] = self.bytes_removed
        if self.parameters:
            extra["parameters"] = dict(self.parameters)
        if self.extra:
            extra["metrics"] = dict(self.extra)
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
        fields = {k: doc[k] for k in doc if k in cls.__slots__ and k != "extra"}
        if "metrics" in doc:
            fields["extra"] = dict(doc["metrics"])
        return cls(**fields)


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
    #: The data files' encryption (:meth:`EncryptionSettings.to_json`: master key ids and
    #: encrypted columns, never key material), or None for plaintext datasets.
    encryption: Mapping[str, Any] | None = None
    #: Dataset settings parquetry keeps out of kartothek's ``metadata`` (which kartothek
    #: users see), e.g. ``{"pointer": "auto"}``; see :mod:`parquetry.dataset.pointer`.
    settings: Mapping[str, Any] = field(default_factory=dict)
    #: Transactions (Delta's SetTransaction): application id -> the last version of it
    #: committed (a stream's query id -> batch id). ``commit(txn=...)`` is a no-op for a
    #: version at or below the recorded one; see :mod:`parquetry.dataset.txns`.
    txns: Mapping[str, int] = field(default_factory=dict)
    #: Format-2 index states (``indexstate.IndexState``) by column; ``indices`` then maps
    #: each to a placeholder. Empty for a format-1 document (``indexwire.index_state``
    #: adopts its index files lazily).
    index_states: Mapping[str, Any] = field(default_factory=dict, compare=False)
    #: The change that produced this state from its base (``entry.Change``), recorded by
    #: ``apply_change`` so the commit writes an entry of O(change); None when unknown.
    change: Any = field(default=None, compare=False, repr=False)
    #: Where a format-2 state came from (``head.Lineage``: checkpoint, tail since it); None
    #: for a state read from a format-1 document (its first commit migrates).
    lineage: Any = field(default=None, compare=False, repr=False)

    @property
    def tables(self) -> tuple[str, ...]:
        first = getattr(self.partitions, "first", None)
        if first is not None:  # a lazy catalog: one record, not a scan of every segment
            rec = first()
            return tuple(rec) if rec is not None else ("table",)
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
            if self.encryption is not None:
                out[EXTENSION_KEY]["encryption"] = dict(self.encryption)
            if self.settings:
                out[EXTENSION_KEY]["settings"] = dict(self.settings)
            if self.txns:
                out[EXTENSION_KEY]["txns"] = dict(self.txns)
        return out

    @classmethod
    def from_dict(cls, doc: Any, *, key: str, metadata_format: str = "json") -> DatasetDocument:
        """Validate ``doc`` completely (all problems in one MetadataCorrupted), then build."""
        schema = _schema_of(doc)
        problems = check_document(doc, schema if isinstance(schema, pa.Schema) else None)
        if isinstance(schema, str):
            problems.insert(0, f"parquetry.schema: {schema}")
        raise_problems(problems, key)
        try:
            return cls._from_dict(doc, metadata_format, schema, key)
        except MetadataCorrupted as exc:
            raise MetadataCorrupted(f"{key}: {exc}", key=key) from None

    @classmethod
    def _from_dict(
        cls, doc: dict[str, Any], metadata_format: str, schema: pa.Schema | str | None, key: str
    ) -> DatasetDocument:
        explicit = "partitions" in doc
        # The decoded dicts are owned by this document: no copies (10,000s of partitions).
        partitions = {
            label: entry["files"] for label, entry in (doc.get("partitions") or {}).items()
        }
        keys = doc.get("partition_keys")
        ext = doc.get(EXTENSION_KEY)
        files = info = encryption = None
        footers = {}
        settings: dict[str, Any] = {}
        txns: dict[str, int] = {}
        fmt = metadata_format
        if not isinstance(schema, pa.Schema):
            schema = None
        elif isinstance(ext, dict):
            info = VersionInfo.from_json(ext["version"])
            files = FileInfos(ext["files"], owned=True, key=key, checks=stats_checkers(schema))
            fmt = ext.get("metadata_format", metadata_format)
            footers = {c: IndexFooter.from_json(f) for c, f in ext.get("index_footers", {}).items()}
            encryption = ext.get("encryption")
            if isinstance(ext.get("settings"), dict):
                settings = ext["settings"]
            raw_txns = ext.get("txns")
            if isinstance(raw_txns, dict):
                # Only parquetry reads these; a malformed value is dropped, not fatal.
                txns = {str(k): v for k, v in raw_txns.items() if isinstance(v, int) and v >= -1}
        return cls(
            uuid=str(doc["dataset_uuid"]),
            partitions=partitions,
            partition_keys=tuple(keys) if keys is not None else _infer_keys(partitions),
            indices=dict(doc.get("indices") or {}),
            metadata=_user_metadata(doc.get("metadata"), isinstance(ext, dict)),
            explicit_partitions=explicit,
            schema=schema,
            files=files or FileInfos(),
            version=info,
            metadata_format=fmt,
            index_footers=footers,
            encryption=encryption,
            settings=settings,
            txns=txns,
        )


def _user_metadata(raw: Any, ours: bool) -> dict[str, Any]:
    """The user metadata of a pointer; in parquetry's own (``ours``) without the marker of
    the version it shows (the extension says that)."""
    meta = dict(raw or {})
    if ours:
        meta.pop(POINTER_MARKER, None)
    return meta


def _schema_of(doc: Any) -> pa.Schema | str | None:
    """The schema of a parquetry document, the reason it is invalid, or None (kartothek's)."""
    ext = doc.get(EXTENSION_KEY) if isinstance(doc, dict) else None
    if not isinstance(ext, dict) or ext.get("format") != EXTENSION_FORMAT:
        return None
    text = ext.get("schema")
    if not isinstance(text, str):
        return None  # reported by check_document
    try:
        return schema_from_b64(text)
    except MetadataCorrupted as exc:
        return str(exc)
    except (ValueError, TypeError, OSError, pa.ArrowException) as exc:
        return f"invalid schema ({type(exc).__name__})"


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
    """Parse and validate a stored document (MetadataCorrupted naming ``key`` if invalid)."""
    raw = parse_document_bytes(data, fmt, key=key)
    return DatasetDocument.from_dict(raw, key=key, metadata_format=fmt)
