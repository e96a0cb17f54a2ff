"""Removing the temporary files killed writers left in a store's key space.

A :class:`~parquetry.store.LocalStore` write fills a hidden temporary file next to its key
and renames it into place; a writer killed meanwhile (SIGKILL, OOM killer, power loss)
leaves that file behind. Readers and listings never see it, but it holds disk space until
someone removes it: garbage collection calls :func:`remove_stale_temporaries` for the
directories of the dataset it collects. Only the store knows its temporary names and when
one is abandoned, so a store that stages writes in its key space implements
``_remove_stale_temporaries``; the others (memory, object stores, whose incomplete multipart
uploads are expired by the bucket) have nothing to remove.
"""

from __future__ import annotations

import math
from typing import Protocol, cast

from parquetry.errors import InvalidArgument
from parquetry.store.base import Capability, Store
from parquetry.store.keys import validate_prefix

__all__ = ["remove_stale_temporaries"]


class _Staging(Protocol):
    def _remove_stale_temporaries(
        self, prefix: str, older_than: float | None, recursive: bool, remove: bool
    ) -> list[str]: ...


def remove_stale_temporaries(
    store: Store,
    prefix: str = "",
    *,
    older_than: float | None = None,
    recursive: bool = True,
    dry_run: bool = False,
) -> list[str]:
    """Remove the temporary files no live writer holds in the directory ``prefix`` (and
    below it, if ``recursive``); return their paths relative to the store's root.

    A writer holds its temporary file until it publishes or abandons it, however slow it
    is; a file younger than ``older_than`` seconds (the store's default, an hour, if None)
    is left alone whatever its state. ``dry_run`` only says which files would go.

    Raises:
        InvalidArgument: ``older_than`` negative or not a number.
        CapabilityNotSupported: the store cannot delete (a read-only view).
        UnsafePath: ``prefix`` crosses a symbolic link (a local store).
    """
    if older_than is not None and not (
        isinstance(older_than, int | float) and math.isfinite(older_than) and older_than >= 0
    ):
        raise InvalidArgument(f"older_than must be a number of seconds >= 0, got {older_than!r}")
    store.require(Capability.LIST, Capability.DELETE)
    prefix = validate_prefix(prefix)
    if not hasattr(store, "_remove_stale_temporaries"):
        return []
    return cast(_Staging, store)._remove_stale_temporaries(
        prefix, older_than, recursive, not dry_run
    )
