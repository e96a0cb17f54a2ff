"""Repair and garbage collection for both dataset kinds (no terminal output here).

A dry run of garbage collection runs the real collector against a :class:`DryRunStore`,
which passes reads through and records writes and deletes without doing them, so the
dry run reports exactly what the real run would delete.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from parquetry.errors import InvalidArgument
from parquetry.store import ObjectMeta, PutMode
from parquetry.store.wrappers import WrapperStore

if TYPE_CHECKING:
    from parquetry.cli.targets import DatasetRef
    from parquetry.store import Store

__all__ = ["DryRunStore", "GCResult", "collect_garbage", "parse_duration", "repair_dataset"]

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_duration(text: str) -> dt.timedelta:
    """``"7d"``, ``"12h"``, ``"30m"``, ``"90s"``, ``"2w"`` or plain seconds (``"0"``)."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*", text)
    if not match:
        raise InvalidArgument(
            f"--retention {text!r} is not a duration (use e.g. 7d, 12h, 30m, 90s or 0)"
        )
    try:
        value = dt.timedelta(seconds=float(match.group(1)) * _UNITS[match.group(2) or "s"])
        # GC subtracts it from now: a duration reaching before year 1 overflowed there.
        dt.datetime.now(dt.UTC) - value
    except OverflowError:
        raise InvalidArgument(
            f"--retention {text!r} is longer than the calendar holds (years 1-9999)"
        ) from None
    return value


class DryRunStore(WrapperStore):
    """Reads pass through; writes and deletes are recorded in ``written`` / ``deleted``."""

    def __init__(self, inner: Store):
        super().__init__(inner)
        self.written: list[str] = []
        self.deleted: list[str] = []

    def _put(
        self, key: str, data: bytes | memoryview, mode: PutMode, expected_version: str | None
    ) -> ObjectMeta:
        self.written.append(key)
        return ObjectMeta(key=key, size=len(data), version="dry-run")

    def _delete(self, key: str, missing_ok: bool) -> None:
        if not missing_ok:
            self.inner._head(key)  # raises NotFound exactly like the real delete would
        self.deleted.append(key)

    def _remove_stale_temporaries(
        self, prefix: str, older_than: float | None, recursive: bool, remove: bool
    ) -> list[str]:
        return super()._remove_stale_temporaries(prefix, older_than, recursive, False)

    def _copy(self, src: str, dst: str) -> None:
        self.written.append(dst)

    def _move(self, src: str, dst: str) -> None:
        self.written.append(dst)
        self.deleted.append(src)


@dataclass(frozen=True, slots=True, kw_only=True)
class GCResult:
    """What a collection deleted (or would delete, for a dry run), with sizes."""

    dry_run: bool
    deleted: tuple[tuple[str, int | None], ...]
    expired_versions: tuple[int, ...] = ()
    retained_versions: tuple[int, ...] = field(default=())
    #: Temporary files of killed writers removed (would be, for a dry run).
    temporaries: tuple[str, ...] = ()

    @property
    def bytes(self) -> int:
        return sum(size or 0 for _, size in self.deleted)


def _sizes(store: Store, prefix: str) -> dict[str, int]:
    return {m.key: m.size for m in store.list(prefix)}


def collect_garbage(
    store: Store,
    ref: DatasetRef,
    *,
    retention: dt.timedelta,
    dry_run: bool,
) -> GCResult:
    """Delete what no retained version needs (see ``Dataset.garbage_collect``)."""
    if retention < dt.timedelta(0):
        raise InvalidArgument(f"retention must not be negative, got {retention}")
    target: Store = DryRunStore(store) if dry_run else store
    # Sizes before anything is deleted (the real run removes what it reports).
    sizes = _sizes(store, ref.name)
    sizes.update(
        {m.key: m.size for m in store.list_dir("").objects if m.key.startswith(f"{ref.name}.")}
    )
    if ref.kind == "snapshot":
        deleted_keys = _snapshot_gc(target, ref.name, retention)
        expired: tuple[int, ...] = ()
        retained: tuple[int, ...] = ()
        temporaries: tuple[str, ...] = ()
    else:
        from parquetry.dataset import Dataset

        report = Dataset.open(target, ref.name).garbage_collect(retention=retention)
        deleted_keys = list(report.deleted)
        expired, retained = report.expired_versions, report.retained_versions
        temporaries = report.temporaries
    if isinstance(target, DryRunStore):
        deleted_keys = sorted(set(deleted_keys) | set(target.deleted))
    return GCResult(
        dry_run=dry_run,
        deleted=tuple((k, sizes.get(k)) for k in sorted(set(deleted_keys))),
        expired_versions=tuple(expired),
        retained_versions=tuple(retained),
        temporaries=temporaries,
    )


def _snapshot_gc(store: Store, key: str, retention: dt.timedelta) -> list[str]:
    """The snapshot's own stray files and idle staged writes, under its switch lock: never
    during a switch, never anything of a dataset stored below ``key/``."""
    from parquetry.snapshot import ParquetDatasetStore

    return ParquetDatasetStore(store).collect_garbage(key, retention=retention.total_seconds())


def repair_dataset(store: Store, ref: DatasetRef) -> str:
    """Complete or roll back an interrupted commit; returns what was done, in one line."""
    if ref.kind == "snapshot":
        from parquetry.snapshot import ParquetDatasetStore

        if ParquetDatasetStore(store).repair(ref.name):
            return f"{ref.name}: completed an interrupted overwrite"
        return f"{ref.name}: nothing to repair (abandoned staged writes removed)"
    return _repair_kartothek(store, ref.name)


def _repair_kartothek(store: Store, uuid: str) -> str:
    from parquetry.dataset import Dataset

    return Dataset.repair(store, uuid)
