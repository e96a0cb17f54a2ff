"""What a snapshot write checks before it stages or switches anything: the store's
capabilities (in spec 042's order), that the dataset does not exist unless overwriting,
and which transactions a commit records (or that it is a replay and commits nothing).
"""

from __future__ import annotations

from parquetry.errors import (
    AlreadyExists,
    CapabilityNotSupported,
    InvalidArgument,
    ManifestCorrupted,
    NotFound,
)
from parquetry.snapshot import layout
from parquetry.snapshot.reader import parse_manifest
from parquetry.store.base import Capability, Store

__all__ = ["DIRECT_CAPS", "WRITE_CAPS", "refuse_existing", "require_write", "txns_after"]

WRITE_CAPS = (Capability.READ, Capability.WRITE, Capability.DELETE, Capability.LIST)
# A direct write (no staging) still checks what exists and writes objects.
DIRECT_CAPS = (Capability.READ, Capability.WRITE)


def require_write(store: Store, key: object, *, overwrite: bool, staging: bool = True) -> None:
    """Raise CapabilityNotSupported or InvalidArgument before any I/O of a write."""
    # Capability checks come before anything else, as spec 042 requires.
    for cap in (
        (Capability.ATOMIC_WRITE, Capability.DELETE) if overwrite else (Capability.ATOMIC_WRITE,)
    ):
        if not store.supports(cap):
            raise CapabilityNotSupported(
                f"write_dataset requires {cap.name} capability ({cap.value}) for key {key!r}",
                capability=cap.value,
                store=store.url,
            )
    if not isinstance(overwrite, bool):
        raise InvalidArgument(f"overwrite must be a bool, got {type(overwrite).__name__}")
    for cap in WRITE_CAPS if staging else DIRECT_CAPS:
        if not store.supports(cap):
            raise CapabilityNotSupported(
                f"parquetry stages and switches dataset parts, which requires "
                f"{cap.name} capability ({cap.value}) for key {key!r}",
                capability=cap.value,
                store=store.url,
            )


def refuse_existing(store: Store, key: str, overwrite: bool) -> None:
    """Raise AlreadyExists if ``key`` has ``_SUCCESS`` and ``overwrite`` is false."""
    # A fast check before staging; the switch checks again under the lock.
    if not overwrite and store.exists(layout.success_key(key)):
        raise AlreadyExists(f"Dataset already exists at {key!r}", key=key, store=store.url)


def txns_after(store: Store, key: str, txn: tuple[str, int] | None) -> dict[str, int] | None:
    """The transactions a commit of ``txn`` records, or None when the current manifest
    already holds ``txn`` (a replay: nothing to commit)."""
    if txn is None:
        return {}
    app, version = txn
    if not isinstance(app, str) or not app or not isinstance(version, int) or version < 0:
        raise InvalidArgument(f"txn must be (app_id, version >= 0), got {txn!r}", key=key)
    try:
        current = parse_manifest(store.get(layout.manifest_key(key)), key).txns or {}
    except (NotFound, ManifestCorrupted):
        current = {}  # nothing (valid) committed yet: the write replaces it
    recorded = current.get(app)
    if recorded is not None and version <= recorded:
        return None
    return {**current, app: version}
