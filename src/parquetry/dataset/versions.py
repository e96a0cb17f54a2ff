"""Loading dataset states: the pointer, immutable version documents, history.

Opening the latest state costs one GET of the pointer (two for msgpack, after the JSON miss)
plus one probe GET of the next version document: a commit whose pointer update failed or
raced is still found (roll forward). A pointer kartothek wrote (no parquetry entry) also
needs ``_common_metadata`` for the schema, and a listing if its partitions are implicit.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass

from parquetry.dataset.checkpoint import list_numbered
from parquetry.dataset.format2 import (
    load_head_state,
    load_state,
    parse_version,
    read_version,
    roll_forward_state,
    version_info,
)
from parquetry.dataset.metadata import DatasetDocument, VersionInfo, decode_document
from parquetry.dataset.naming import (
    common_metadata_key,
    label_from_key,
    metadata_key,
    version_key,
    version_number_from_key,
    versions_prefix,
)
from parquetry.dataset.schema import read_common_metadata
from parquetry.errors import (
    DatasetNotFound,
    MetadataCorrupted,
    NotFound,
    PointerCorruptedWarning,
)
from parquetry.store import Store

__all__ = [
    "LoadedState",
    "check_current_incarnation",
    "decode_version",
    "history",
    "TOMBSTONE_KEY",
    "latest_version_number",
    "list_version_numbers",
    "load_latest",
    "load_version",
    "newest_readable_version",
    "read_pointer",
    "read_pointer_or_versions",
    "roll_forward",
]

TOMBSTONE_KEY = "parquetry_expired_version"


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadedState:
    """A dataset state and how it was found."""

    doc: DatasetDocument
    number: int  # version number this state is (or, for a foreign pointer, builds on)
    foreign: bool  # the pointer was written by another tool (kartothek)
    pointer_format: str | None
    requests: int

    @classmethod
    def committed(cls, doc: DatasetDocument, pointer_format: str | None) -> LoadedState:
        """The state a commit of ours just published (``doc`` carries its version)."""
        assert doc.version is not None
        return cls(
            doc=doc,
            number=doc.version.number,
            foreign=False,
            pointer_format=pointer_format,
            requests=0,
        )


def read_pointer(store: Store, uuid: str) -> tuple[DatasetDocument, str, int]:
    """The document in the pointer (JSON preferred, like kartothek), its format, GETs used."""
    requests = 0
    for fmt in ("json", "msgpack.zstd"):
        key = metadata_key(uuid, fmt)
        requests += 1
        try:
            data = store.get(key)
        except NotFound:
            continue
        return decode_document(data, fmt, key=key), fmt, requests
    raise DatasetNotFound(f"no dataset {uuid!r} in {store.url}", key=metadata_key(uuid))


def decode_version(data: bytes, key: str) -> DatasetDocument | None:
    """A full (format-1) version document, or None for a tombstone or a format-2 entry
    (whose state needs its base: :func:`load_version`)."""
    kind, value, _ = parse_version(data, key)
    return value if kind == "doc" else None


def load_version(store: Store, uuid: str, number: int) -> DatasetDocument:
    return load_state(store, uuid, number)


def load_version_or_none(store: Store, uuid: str, number: int) -> DatasetDocument | None:
    try:
        return load_version(store, uuid, number)
    except DatasetNotFound:
        return None


def roll_forward(
    store: Store, uuid: str, number: int, base: DatasetDocument | None = None
) -> tuple[DatasetDocument | None, int, int]:
    """Newest version after ``number``: (state or None if none newer, its number, GETs).

    ``base`` is the state of ``number`` when the caller has it (entries apply to it)."""
    doc, newest, requests, moved = roll_forward_state(store, uuid, base, number)
    return (doc if moved else None), newest, requests


def version_info_of(store: Store, uuid: str, number: int) -> VersionInfo | None:
    """The VersionInfo of version ``number`` (one GET, no state), None if gone or expired."""
    v = read_version(store, uuid, number)
    return version_info(v) if v is not None else None


def list_version_numbers(store: Store, uuid: str) -> list[int]:
    return list_numbered(store, versions_prefix(uuid), version_number_from_key)


def latest_version_number(store: Store, uuid: str) -> int:
    numbers = list_version_numbers(store, uuid)
    return numbers[-1] if numbers else 0


def _complete_foreign(store: Store, doc: DatasetDocument) -> tuple[DatasetDocument, int]:
    """Fill in the schema (and implicit partitions) of a document another tool wrote."""
    requests = 0
    partitions = doc.partitions
    if not doc.explicit_partitions:
        requests += 1
        found: dict[str, dict[str, str]] = {}
        for meta in store.list(doc.uuid):
            parts = meta.key.split("/")
            if len(parts) < 3 or parts[1] in ("indices", "_indices", "_versions"):
                continue
            if not meta.key.endswith(".parquet"):
                continue
            label = label_from_key(doc.uuid, parts[1], meta.key)
            found.setdefault(label, {})[parts[1]] = meta.key
        partitions = found
    doc = doc.evolve(partitions=partitions)
    if doc.partition_keys == () and partitions:
        from parquetry.dataset.metadata import _infer_keys

        doc = doc.evolve(partition_keys=_infer_keys(partitions))
    key = common_metadata_key(doc.uuid, doc.tables[0])
    requests += 1
    try:
        schema = read_common_metadata(store.get(key), key)
    except NotFound:
        raise MetadataCorrupted(f"dataset {doc.uuid!r} has no schema file {key}", key=key) from None
    return doc.evolve(schema=schema), requests


def newest_readable_version(store: Store, uuid: str) -> tuple[DatasetDocument, int] | None:
    """The newest version document that decodes (listing ``_versions``), or None."""
    for n in reversed(list_version_numbers(store, uuid)):
        try:
            return load_version(store, uuid, n), n
        except (DatasetNotFound, MetadataCorrupted):
            continue
    return None


def read_pointer_or_versions(store: Store, uuid: str) -> tuple[DatasetDocument, str, int]:
    """:func:`read_pointer`, falling back to the newest readable version document when the
    pointer is corrupted (with a :class:`PointerCorruptedWarning`).

    The format returned is the corrupted pointer's, so the next commit or ``repair``
    overwrites exactly that file.
    """
    try:
        return read_pointer(store, uuid)
    except MetadataCorrupted as exc:
        found = newest_readable_version(store, uuid)
        if found is None:
            raise
        doc, number = found
        key = exc.key or metadata_key(uuid)
        fmt = "json" if key.endswith(".json") else "msgpack.zstd"
        warnings.warn(
            PointerCorruptedWarning(
                f"the metadata file {key} of dataset {uuid!r} is unreadable ({exc}); using "
                f"version {number}, the newest readable version document (run repair to "
                "rewrite the metadata file)"
            ),
            stacklevel=3,
        )
        return doc, fmt, 2


def load_latest(store: Store, uuid: str, *, probe: bool = True) -> LoadedState:
    """The current state: the head (format 2) or the pointer (format 1), rolled forward
    past commits it does not show yet."""
    from parquetry.dataset.pointerhook import foreign_pointer

    got = load_head_state(store, uuid, probe=probe)
    if got is not None:
        doc, head, requests, probed = got
        pointer = head.get("pointer") or {}
        fmt = str(pointer.get("format") or doc.metadata_format)
        foreign = foreign_pointer(store, uuid, pointer)
        requests += foreign[1]
        if foreign[0] is not None:
            # kartothek's change applied to the newest version (see kartothek_sync).
            from parquetry.dataset.kartothek_sync import foreign_state

            kdoc, kfmt = foreign[0]
            kdoc, extra = _complete_foreign(store, kdoc)
            shown = pointer.get("number")
            hint = shown if isinstance(shown, int) else None
            return foreign_state(store, uuid, kdoc, kfmt, requests + extra, hint=hint)
        assert doc.version is not None
        number = doc.version.number
        if probe:
            newer, newest, extra, moved = roll_forward_state(store, uuid, doc, number, probed)
            requests += extra
            if moved and newer is not None:
                doc, number = newer, newest
        return LoadedState(
            doc=doc, number=number, foreign=False, pointer_format=fmt, requests=requests
        )
    doc, fmt, requests = read_pointer_or_versions(store, uuid)
    requests += 1  # the GET of the head that found none (format 1, or kartothek's dataset)
    if doc.version is None:
        # kartothek wrote the pointer: its change applied to the newest parquetry version.
        from parquetry.dataset.kartothek_sync import foreign_state

        doc, extra = _complete_foreign(store, doc)
        return foreign_state(store, uuid, doc, fmt, requests + extra)
    number = doc.version.number
    if probe:
        newer, newest, extra = roll_forward(store, uuid, number, doc)
        requests += extra
        if newer is not None:
            doc, number = newer, newest
    return LoadedState(doc=doc, number=number, foreign=False, pointer_format=fmt, requests=requests)


def tombstone_bytes(number: int, expired_at: str) -> bytes:
    return json.dumps({TOMBSTONE_KEY: {"number": number, "expired_at": expired_at}}).encode()


def history(store: Store, uuid: str) -> list[VersionInfo]:
    """Retained versions of the current incarnation, oldest first (one GET each)."""
    out: list[VersionInfo] = []
    for n in reversed(list_version_numbers(store, uuid)):
        info = version_info_of(store, uuid, n)
        if info is None or (out and info.epoch != out[0].epoch):
            continue
        out.append(info)
    return out[::-1]


def check_current_incarnation(store: Store, uuid: str, doc: DatasetDocument, number: int) -> None:
    """Versions of a deleted (and re-created) dataset are not part of the current history."""
    try:
        current, _, _ = read_pointer_or_versions(store, uuid)
    except DatasetNotFound:
        raise DatasetNotFound(f"dataset {uuid!r} was deleted (version {number} remains)") from None
    ours = current.version is not None and doc.version is not None
    if ours and current.version.epoch != doc.version.epoch:  # type: ignore[union-attr]
        raise DatasetNotFound(
            f"version {number} belongs to a deleted earlier dataset {uuid!r}",
            key=version_key(uuid, number),
        )
