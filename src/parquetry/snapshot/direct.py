"""Direct writes for stores that cannot stage: no ``delete`` or no ``list`` (write-once).

Spec 042 asks only for ``atomic_write`` to write a new dataset. parquetry normally stages
parts and switches them in (:mod:`parquetry.snapshot.switch`), which needs ``delete`` and
``list`` to clean up; on a store without them (a write-once bucket, an upload-only
credential) ``write_dataset(overwrite=False)`` writes in place instead, as remote-store does,
with two changes that keep concurrent and crashed writers from corrupting each other:

1. Parts go straight to their final keys under names unique to the write
   (``part-00000-{write_id}.parquet``): a racing writer can never replace a part another
   writer's manifest lists. Readers, remote-store's included, read the parts the manifest
   names.
2. ``manifest.json`` is the commit point, created only if absent where the store can
   (conditional create): of two racing writers exactly one commits, the other gets
   :class:`CommitConflict`. ``_SUCCESS`` then publishes it.

A writer that dies between its manifest and ``_SUCCESS`` has committed: the next write to
the key, or :meth:`ParquetDatasetStore.repair`, checks that every listed part exists and
publishes it (roll forward, as for an interrupted switch). Parts of writes that never
committed stay behind as unreferenced files: without ``delete`` nothing can remove them.
"""

from __future__ import annotations

import contextlib

from parquetry.errors import AlreadyExists, CommitConflict, DatasetIncomplete, NotFound
from parquetry.parquet.options import WriteOptions
from parquetry.snapshot import layout
from parquetry.snapshot.inputs import ArrowInput
from parquetry.snapshot.manifest import DatasetManifest
from parquetry.snapshot.reader import parse_manifest
from parquetry.snapshot.stage import PartStager
from parquetry.store.base import Capability, PutMode, Store

__all__ = ["can_stage", "direct_part_name", "settle_direct", "write_direct"]


def can_stage(store: Store) -> bool:
    """Whether ``store`` can stage and switch (it deletes and lists)."""
    return store.supports(Capability.DELETE) and store.supports(Capability.LIST)


def direct_part_name(staged_name: str, write_id: str) -> str:
    """Final name of a directly written part: ``00003.parquet`` → ``part-00003-{id}.parquet``."""
    return f"part-{staged_name.removesuffix('.parquet')}-{write_id}.parquet"


def _create_mode(store: Store) -> PutMode:
    if store.supports(Capability.CONDITIONAL_CREATE):
        return PutMode.CREATE
    return PutMode.OVERWRITE


def settle_direct(store: Store, key: str) -> bool:
    """Publish a committed direct write whose writer stopped before ``_SUCCESS``.

    Returns True if one was published. Raises :class:`DatasetIncomplete` if the manifest
    lists a part that does not exist (nothing parquetry wrote can end up like that).
    """
    if store.exists(layout.success_key(key)):
        return False
    try:
        raw = store.get(layout.manifest_key(key))
    except NotFound:
        return False
    manifest = parse_manifest(raw, key)
    missing = [n for n in manifest.parts if not store.exists(layout.part_key(key, n))]
    if missing:
        raise DatasetIncomplete(
            f"dataset {key!r} has a manifest without _SUCCESS whose parts {missing} are "
            "missing; this store cannot delete, so remove the manifest by other means",
            key=key,
        )
    _publish(store, key)
    return True


def _publish(store: Store, key: str) -> None:
    # AlreadyExists: published already (by repair() or the next writer), the same outcome.
    with contextlib.suppress(AlreadyExists):
        store.put(layout.success_key(key), b"", mode=_create_mode(store))


def write_direct(
    store: Store,
    key: str,
    source: ArrowInput,
    options: WriteOptions,
    *,
    write_id: str,
    max_rows: int | None,
    max_workers: int,
    compression: str,
    run_id: str | None,
    metadata: dict[str, str] | None,
) -> DatasetManifest:
    """Write ``source`` as the new dataset ``key`` in place (see the module docstring)."""
    settle_direct(store, key)
    if store.exists(layout.success_key(key)):
        raise AlreadyExists(f"Dataset already exists at {key!r}", key=key, store=store.url)
    if store.exists(layout.manifest_key(key)):
        raise CommitConflict(f"another write to dataset {key!r} committed first", key=key)

    def target(name: str) -> str:
        return layout.part_key(key, direct_part_name(name, write_id))

    stager = PartStager(store, key, write_id, options, max_workers=max_workers, target=target)
    staged = stager.stage_input(source, max_rows)
    names = [direct_part_name(p.name, write_id) for p in staged]
    manifest = DatasetManifest.for_parts(
        key, names, staged, compression=compression, run_id=run_id, metadata=metadata
    )
    try:
        store.put(
            layout.manifest_key(key),
            manifest.to_json().encode("utf-8"),
            mode=_create_mode(store),
        )
    except AlreadyExists:
        raise CommitConflict(f"another write to dataset {key!r} committed first", key=key) from None
    _publish(store, key)
    return manifest
