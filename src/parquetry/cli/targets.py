"""Finding datasets in a store and telling the two kinds apart.

A kartothek-format dataset ``U`` is known by its pointer ``U.by-dataset-metadata.json`` (or
``.msgpack.zstd``) at the store root, or by parquetry's version documents under
``U/_versions/`` when a first commit was interrupted. A snapshot dataset ``K`` (any depth) is
known by ``K/manifest.json`` or by a switch journal left by an interrupted overwrite.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from parquetry.errors import DatasetNotFound, InvalidArgument

if TYPE_CHECKING:
    from parquetry.store import Store

__all__ = ["DatasetRef", "Kind", "find_datasets", "resolve_dataset"]

Kind = Literal["kartothek", "snapshot"]

_POINTER_SUFFIXES = (".by-dataset-metadata.json", ".by-dataset-metadata.msgpack.zstd")
_SNAPSHOT_MARKERS = ("manifest.json", "_parquetry_switch.json")
#: A listing walk stops after this many directory listings, so ``ls`` stays bounded.
MAX_LISTINGS = 200
MAX_DEPTH = 4


@dataclass(frozen=True, slots=True, kw_only=True)
class DatasetRef:
    """A dataset found in a store: its name (uuid or snapshot key) and its kind."""

    name: str
    kind: Kind


def _is_kartothek(store: Store, name: str) -> bool:
    from parquetry.dataset.naming import METADATA_FORMATS, metadata_key, versions_prefix

    try:
        keys = [metadata_key(name, fmt) for fmt in METADATA_FORMATS]
    except InvalidArgument:
        return False
    if any(store.exists(k) for k in keys):
        return True
    return bool(store.list_dir(versions_prefix(name)).objects)


def _is_snapshot(store: Store, name: str) -> bool:
    name = name.strip("/")
    if not name:
        return False
    return any(store.exists(f"{name}/{marker}") for marker in _SNAPSHOT_MARKERS)


def resolve_dataset(store: Store, name: str) -> DatasetRef:
    """Which kind of dataset ``name`` is.

    Raises:
        DatasetNotFound: neither a kartothek-format dataset nor a snapshot is stored there.
    """
    if not name or name != name.strip() or name.startswith("/"):
        raise InvalidArgument(f"dataset name {name!r} is empty or malformed")
    from parquetry.dataset.naming import validate_uuid

    try:
        validate_uuid(name)
    except InvalidArgument:
        uuid_ok = False
    else:
        uuid_ok = True
    if uuid_ok and _is_kartothek(store, name):
        return DatasetRef(name=name, kind="kartothek")
    if _is_snapshot(store, name):
        return DatasetRef(name=name.strip("/"), kind="snapshot")
    raise DatasetNotFound(
        f"no dataset {name!r} in {store.url} (neither a kartothek-format dataset nor a "
        "snapshot; 'parquetry ls' lists what is there)",
        key=name,
        store=store.url,
    )


def find_datasets(store: Store) -> list[DatasetRef]:
    """Every dataset under the store's root, sorted by name.

    Walks the store one directory level at a time (never a recursive listing of data
    files): pointers at the root, snapshot directories down to ``MAX_DEPTH`` levels.
    """
    root = store.list_dir("")
    found: dict[str, DatasetRef] = {}
    for meta in root.objects:
        name = meta.key.rsplit("/", 1)[-1]
        for suffix in _POINTER_SUFFIXES:
            if name.endswith(suffix):
                uuid = name.removesuffix(suffix)
                found[uuid] = DatasetRef(name=uuid, kind="kartothek")
    queue: deque[tuple[str, int]] = deque((p, 1) for p in root.prefixes if p not in found)
    listings = 1
    while queue and listings < MAX_LISTINGS:
        prefix, depth = queue.popleft()
        level = store.list_dir(prefix)
        listings += 1
        names = {m.key.rsplit("/", 1)[-1] for m in level.objects}
        if names & set(_SNAPSHOT_MARKERS):
            found[prefix] = DatasetRef(name=prefix, kind="snapshot")
            continue
        if "_versions" in {p.rsplit("/", 1)[-1] for p in level.prefixes} and depth == 1:
            # A kartothek-format dataset whose first commit never wrote its pointer.
            found[prefix] = DatasetRef(name=prefix, kind="kartothek")
            continue
        if depth < MAX_DEPTH:
            queue.extend((p, depth + 1) for p in level.prefixes if not _is_data_dir(p))
    return sorted(found.values(), key=lambda ref: ref.name)


def _is_data_dir(prefix: str) -> bool:
    # Hive partition directories and staging areas hold data files, never datasets.
    last = prefix.rsplit("/", 1)[-1]
    return "=" in last or last in ("_staging", "_versions", "indices", "_indices")
