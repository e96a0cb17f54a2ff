"""Repair: finish a commit whose version document exists but whose pointer was not updated.

The version document is the commit point, so an interrupted commit is never rolled back:
its pointer (the kartothek metadata file) is moved forward to it. Readers already see such a
commit by rolling forward; repairing makes kartothek and plain pointer readers see it too.
"""

from __future__ import annotations

from parquetry.dataset.metadata import DatasetDocument
from parquetry.dataset.publish import publish_pointer
from parquetry.dataset.versions import (
    latest_version_number,
    load_latest,
    load_version,
    newest_readable_version,
    read_pointer,
)
from parquetry.errors import DatasetNotFound, MetadataCorrupted, StoreUnavailable
from parquetry.store import Store

__all__ = ["repair"]


def repair(store: Store, uuid: str) -> str:
    """Move the pointer of dataset ``uuid`` to its newest committed version.

    Returns:
        One line saying what was done.

    Raises:
        DatasetNotFound: neither a pointer nor a committed version exists.
        StoreUnavailable: the pointer could not be written (the store refused or failed).
    """
    try:
        pointer, fmt, _ = read_pointer(store, uuid)
    except MetadataCorrupted:
        found = newest_readable_version(store, uuid)
        if found is None:
            raise
        state = load_latest(store, uuid)  # warns, rolls forward from the newest readable
        _publish(store, uuid, state.number, state.doc, state.pointer_format or "json")
        return (
            f"{uuid}: rewrote the unreadable metadata file from version {state.number}, "
            "the newest readable version document"
        )
    except DatasetNotFound:
        # The first commit created its version document but never wrote the pointer.
        number = latest_version_number(store, uuid)
        doc = load_version(store, uuid, number)
        _publish(store, uuid, number, doc, "json")
        return f"{uuid}: wrote the missing metadata file for version {number}"
    if pointer.version is None:
        return f"{uuid}: nothing to repair (last written by another tool)"
    state = load_latest(store, uuid)
    schema_note = _fix_common_metadata(store, state.doc)
    if state.number == pointer.version.number:
        if schema_note:
            return f"{uuid}: {schema_note} (version {state.number})"
        return f"{uuid}: nothing to repair (version {state.number} is current)"
    _publish(store, uuid, state.number, state.doc, fmt)
    return (
        f"{uuid}: completed an interrupted commit (metadata file moved from version "
        f"{pointer.version.number} to {state.number})" + (f"; {schema_note}" if schema_note else "")
    )


def _fix_common_metadata(store: Store, doc: DatasetDocument) -> str:
    """Rewrite ``_common_metadata`` if a schema-evolving commit was interrupted before it."""
    from parquetry.dataset.create import put_common_metadata
    from parquetry.dataset.naming import common_metadata_key
    from parquetry.dataset.schema import common_metadata_bytes, read_common_metadata
    from parquetry.errors import NotFound

    if doc.schema is None:
        return ""
    key = common_metadata_key(uuid := doc.uuid, doc.tables[0])
    expected = read_common_metadata(common_metadata_bytes(doc.schema, doc.partition_keys), key)
    try:
        if read_common_metadata(store.get(key), key).equals(expected):
            return ""
    except (NotFound, MetadataCorrupted):
        pass
    put_common_metadata(
        store, uuid, doc.tables[0], doc.schema, doc.partition_keys, replace_stale=True
    )
    return "rewrote _common_metadata to the current schema"


def _publish(store: Store, uuid: str, number: int, doc: DatasetDocument, fmt: str) -> None:
    publish_pointer(store, uuid, doc, None, number, fmt)
    # publish_pointer swallows failures (a commit must not be retried for them); a repair
    # must not claim success it did not have, so check the pointer now.
    current, _, _ = read_pointer(store, uuid)
    if current.version is None or current.version.number < number:
        raise StoreUnavailable(
            f"could not move the metadata file of {uuid!r} to version {number}", key=uuid
        )
