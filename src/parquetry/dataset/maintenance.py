"""Maintenance of a :class:`~parquetry.dataset.dataset.Dataset`: garbage collection
(``vacuum``), the pointer policy and checkpoints, repair and deletion.

Each method is a thin entry point; the work lives in the module it names. Kept apart from
``dataset.py`` so the facade stays readable.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

from parquetry.dataset.gc import GCReport, as_retention, garbage_collect
from parquetry.dataset.naming import (
    METADATA_FORMATS,
    is_incarnation_key,
    metadata_key,
    versions_prefix,
)
from parquetry.dataset.tableops import TableOperations
from parquetry.errors import InvalidArgument
from parquetry.store import Store

if TYPE_CHECKING:
    from parquetry.dataset.dataset import Dataset

__all__ = ["DEFAULT_RETENTION", "MaintenanceOperations"]

DEFAULT_RETENTION = dt.timedelta(days=7)


class MaintenanceOperations(TableOperations):
    """Garbage collection, pointer policy, checkpoint, repair and delete of a dataset."""

    def garbage_collect(
        self,
        *,
        retention: dt.timedelta | float = DEFAULT_RETENTION,
    ) -> GCReport:
        """Delete files no retained version needs (see :mod:`parquetry.dataset.gc`).

        ``retention`` (timedelta or seconds): versions current within this period stay
        readable. Files of writes in flight are covered by write intents and kept until
        the intent's lease ended more than ``retention`` ago; files without intents (older
        writers, kartothek) are kept while younger than ``retention``.
        """
        return garbage_collect(self.store, self.uuid, retention=retention)

    def vacuum(
        self,
        retention: dt.timedelta | float = DEFAULT_RETENTION,
        *,
        force: bool = False,
    ) -> GCReport:
        """Garbage collection with Delta's safety check: a ``retention`` shorter than the
        default (7 days) is refused unless ``force=True``, since readers and writers still
        using versions that old would lose their files (Delta's
        ``retentionDurationCheck``)."""
        retention = as_retention(retention)
        if retention < DEFAULT_RETENTION and not force:
            raise InvalidArgument(
                f"vacuum of dataset {self.uuid!r} with retention {retention} is shorter than "
                f"the safe minimum {DEFAULT_RETENTION}: versions younger than that may still "
                "be read or restored; pass force=True if no reader or writer needs them"
            )
        return self.garbage_collect(retention=retention)

    @property
    def pointer_policy(self) -> str:
        """When kartothek's metadata file is rewritten (see :mod:`parquetry.dataset.pointer`)."""
        from parquetry.dataset.pointer import pointer_mode

        return pointer_mode(self._doc)

    def set_pointer_policy(self, mode: str) -> Dataset:
        """Commit ``mode`` (``"auto"``, ``"every-commit"``, ``"manual"``) as the pointer
        policy: a settings-only version (none when ``mode`` is already in force)."""
        from parquetry.dataset.pointer import set_pointer_policy

        return self._successor(set_pointer_policy(self.store, self._state(), mode))

    def checkpoint(self) -> Dataset:
        """Rewrite kartothek's metadata file (full document, index files) for the newest
        version, first committing any change kartothek wrote on an older one (operation
        ``"kartothek"``). Idempotent, safe beside concurrent commits; returns the newest."""
        from parquetry.dataset.kartothek_sync import checkpoint

        return self._successor(checkpoint(self.store, self.uuid))

    @staticmethod
    def repair(store: Store, uuid: str) -> str:
        """Finish an interrupted commit (see :mod:`parquetry.dataset.repair`); says what it did."""
        from parquetry.dataset.repair import repair

        return repair(store, uuid)

    def delete(self) -> None:
        """Delete the dataset: the incarnation marker first (commits in flight on it fail
        from then on), the pointer (the dataset disappears), then every file."""
        versions = self.store.list(versions_prefix(self.uuid))
        markers = [m.key for m in versions if is_incarnation_key(m.key)]
        self.store.delete_many(markers, missing_ok=True)
        for fmt in METADATA_FORMATS:
            self.store.delete(metadata_key(self.uuid, fmt), missing_ok=True)
        keys = [m.key for m in self.store.list(self.uuid)]
        self.store.delete_many(keys, missing_ok=True)
