"""Restore: a new commit whose state (files, indices, schema, metadata) equals an old version.

Metadata only: the old version's data and index files are still in the store (unless garbage
collection removed them), so the new version document simply references them again. Before
the commit point every referenced file is checked (one HEAD each, 16 at a time); a missing
one fails the restore naming it, and nothing is committed.

A restore does not merge: it replaces the whole state. A commit that lands between opening
the dataset and the restore's commit point would be discarded silently, so the restore
raises :class:`CommitConflict` instead of retrying on a newer base.

Garbage collection racing the restore: the files a restore references again are, to GC,
files of a version it may expire right now. The restore therefore first covers them with a
write intent, then checks that the target version is not a tombstone yet, then HEADs the
files; GC tombstones the versions it expires and only then reads the live intents once more
before deleting. Whichever comes first, the restore fails (the version expired or a file is
gone: nothing committed) or GC keeps the files (the intent was there before the tombstone,
so GC's second reading sees it); never a committed version with deleted files.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

from parquetry.dataset.commit import commit, now_iso
from parquetry.dataset.create import put_common_metadata
from parquetry.dataset.format2 import read_version
from parquetry.dataset.gc import referenced_keys
from parquetry.dataset.intents import Intent
from parquetry.dataset.metadata import DatasetDocument, VersionInfo
from parquetry.dataset.naming import version_key
from parquetry.dataset.versionargs import as_version
from parquetry.dataset.versions import LoadedState, load_version
from parquetry.errors import (
    CommitConflict,
    DatasetNotFound,
    InvalidArgument,
    NotFound,
    ParquetryError,
    VersionExpired,
)
from parquetry.store import Store

__all__ = ["plan_restore", "restore_version"]


def _data_keys(doc: DatasetDocument) -> dict[str, str]:
    """Data file key -> partition label."""
    return {key: label for label, files in doc.partitions.items() for key in files.values()}


def _check_files(store: Store, target: DatasetDocument, number: int) -> None:
    """Raise VersionExpired naming the first file of version ``number`` that is gone
    (DatasetNotFound when it is there with another size)."""
    expected: list[tuple[str, int | None]] = []
    for key, label in _data_keys(target).items():
        info = target.files.get(label) if label in target.files else None
        expected.append((key, info.size if info is not None else None))
    expected += [(ref, None) for ref in target.indices.values() if isinstance(ref, str)]
    expected += [(k, None) for st in target.index_states.values() for k in sorted(st.piece_keys())]

    def check(item: tuple[str, int | None]) -> None:
        key, size = item
        try:
            found = store.head(key).size
        except NotFound:
            raise VersionExpired(
                f"cannot restore version {number} of dataset {target.uuid!r}: its file {key} "
                "was removed (garbage collected); nothing is committed",
                key=key,
            ) from None
        if size is not None and found != size:
            raise DatasetNotFound(
                f"cannot restore version {number} of dataset {target.uuid!r}: its file {key} "
                f"has {found} bytes, version {number} recorded {size}; nothing is committed",
                key=key,
            )

    store.map_concurrent(check, expected, max_workers=16)


def _version_info(
    base: DatasetDocument, target: DatasetDocument, number: int, to: int, params: Mapping[str, str]
) -> VersionInfo:
    """The restore's metrics: files (by key) in the target but not the base count as added."""
    old, new = _data_keys(base), _data_keys(target)

    def total(doc: DatasetDocument, keys: set[str], labels: dict[str, str], attr: str) -> int:
        return sum(getattr(doc.files[labels[k]], attr) for k in keys if labels[k] in doc.files)

    added, removed = set(new) - set(old), set(old) - set(new)
    prev = base.version
    assert target.version is not None
    return VersionInfo(
        number=number,
        parent=number - 1,
        committed_at=now_iso(),
        operation="restore",
        rows_added=total(target, added, new, "rows"),
        rows_removed=total(base, removed, old, "rows"),
        files_added=len(added),
        files_removed=len(removed),
        bytes_added=total(target, added, new, "size"),
        bytes_removed=total(base, removed, old, "size"),
        epoch=prev.epoch if prev is not None else target.version.epoch,
        incarnation=prev.incarnation if prev is not None else target.version.incarnation,
        parameters={"version": str(to), **params},
    )


def _schema_of_newest(store: Store, doc: DatasetDocument) -> None:
    from parquetry.dataset.transact import follow_schema
    from parquetry.dataset.versions import load_latest

    follow_schema(store, load_latest(store, doc.uuid).doc)


def _put_schema(store: Store, doc: DatasetDocument) -> None:
    assert doc.schema is not None
    put_common_metadata(
        store, doc.uuid, doc.tables[0], doc.schema, doc.partition_keys, replace_stale=True
    )


def _target(
    store: Store, doc: DatasetDocument, version: int, *, check: bool = True
) -> DatasetDocument:
    """Version ``version`` of ``doc``'s dataset, checked restorable (see restore_version)."""
    version = as_version(version, "version")
    if version < 0:
        raise InvalidArgument(f"version must be >= 0, got {version}")
    target = load_version(store, doc.uuid, version)
    assert target.version is not None
    if doc.version is not None and target.version.incarnation != doc.version.incarnation:
        raise DatasetNotFound(
            f"version {version} belongs to a deleted earlier dataset {doc.uuid!r}; "
            "nothing is committed"
        )
    if check:
        _check_files(store, target, version)
    return target


def plan_restore(store: Store, base: LoadedState, version: int) -> dict[str, Any]:
    """What restoring ``version`` after ``base`` would do (the dry run; commits nothing):
    files before/after, the data files referenced again / no longer, and their bytes.
    Raises as :func:`restore_version` would (a missing file, an expired version)."""
    doc = base.doc
    target = _target(store, doc, version)
    old, new = _data_keys(doc), _data_keys(target)
    added, removed = sorted(set(new) - set(old)), sorted(set(old) - set(new))

    def size(d: DatasetDocument, labels: dict[str, str], keys: list[str]) -> int:
        return sum(d.files[labels[k]].size for k in keys if labels[k] in d.files)

    return {
        "files_before": len(old),
        "files_after": len(new),
        "files_added": added,
        "files_removed": removed,
        "bytes_added": size(target, new, added),
        "bytes_removed": size(doc, old, removed),
    }


def restore_version(
    store: Store,
    base: LoadedState,
    version: int,
    *,
    parameters: Mapping[str, str] | None = None,
) -> LoadedState:
    """Commit the state of ``version`` as the version after ``base`` (see the module doc).

    Raises DatasetNotFound if ``version`` does not exist, expired, belongs to an earlier
    incarnation of the uuid or lost a file; CommitConflict if another commit landed after
    ``base``. Nothing is committed then.
    """
    doc = base.doc
    target = _target(store, doc, version, check=False)
    intent = Intent(store, doc.uuid)
    try:
        intent.record(sorted(referenced_keys(target) - referenced_keys(doc)))
        _still_there(store, target, version)
        return _restore_checked(store, base, target, version, parameters)
    finally:
        with contextlib.suppress(ParquetryError):
            store.delete(intent.key, missing_ok=True)


def _still_there(store: Store, target: DatasetDocument, version: int) -> None:
    """After the intent covers the target's files: the version is not expired yet (so a GC
    that expires it reads the intent afterwards) and its files are all there."""
    found = read_version(store, target.uuid, version)
    if found is None or found[0] == "tombstone":
        raise VersionExpired(
            f"cannot restore version {version} of dataset {target.uuid!r}: garbage collection "
            "expired it while the restore ran; nothing is committed",
            key=version_key(target.uuid, version),
        )
    _check_files(store, target, version)


def _restore_checked(
    store: Store,
    base: LoadedState,
    target: DatasetDocument,
    version: int,
    parameters: Mapping[str, str] | None,
) -> LoadedState:
    doc = base.doc
    assert target.schema is not None
    schema_changes = doc.schema is not None and not target.schema.equals(doc.schema)
    if schema_changes:
        # kartothek reads the schema from _common_metadata: it must follow the restore.
        _put_schema(store, target)
    seen: list[int] = []

    def make(current: DatasetDocument | None, number: int) -> DatasetDocument:
        assert current is not None
        if seen and seen[0] != number:
            raise CommitConflict(
                f"dataset {doc.uuid!r}: another commit landed after the version this restore "
                f"of version {version} builds on (the newest is now {number - 1}); nothing is "
                "committed (open the newest version and restore again)",
                key=version_key(doc.uuid, number),
            )
        seen.append(number)
        info = _version_info(current, target, number, version, dict(parameters or {}))
        return target.evolve(version=info, metadata_format=current.metadata_format)

    stale = None
    if base.foreign:
        stale = "msgpack.zstd" if base.pointer_format == "json" else "json"
    fmt = base.pointer_format or doc.metadata_format
    try:
        committed = commit(
            store, doc.uuid, doc, base.number, make, pointer_format=fmt, stale_format=stale
        )
    except Exception:
        if schema_changes:
            # Best effort (repair finishes it): kartothek must see the newest version's
            # schema again, which is not this restore's base's when a concurrent commit
            # evolved it; putting the base's back would hide that evolution.
            with contextlib.suppress(ParquetryError):
                _schema_of_newest(store, doc)
        raise
    return LoadedState.committed(committed, fmt)
