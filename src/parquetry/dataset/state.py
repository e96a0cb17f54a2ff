"""The file catalog of a state: checkpoint segments plus an in-memory overlay, loaded lazily.

A format-2 state is the segments of its checkpoint root (:mod:`parquetry.dataset.segments`)
changed by the entries committed since (the *tail*): labels added (``adds``) and labels of
the segments removed (``removed``). :class:`Catalog` answers ``label -> (files, info)``
loading only the segments whose label range may hold the label; iterating it loads every
segment (full scans, GC, the kartothek pointer). A commit derives the next catalog with
:meth:`Catalog.changed` in O(change), never copying the segments' content.

:class:`PartitionsView` and :class:`InfosView` expose a catalog as the two mappings a
:class:`~parquetry.dataset.metadata.DatasetDocument` has always had (``partitions`` and the
entries of ``files``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, MutableMapping
from typing import Any

from parquetry.dataset.segments import SegmentSet

__all__ = ["Catalog", "InfosView", "PartitionsView", "Record"]

#: One file entry: its ``{table: key}`` and its FileInfo (JSON text, decoded, or None when
#: another tool wrote the partition and parquetry knows no statistics).
Record = tuple[Mapping[str, str], Any]


class Catalog:
    """label -> Record over ``segments`` (may be None) minus ``removed`` plus ``adds``."""

    __slots__ = ("adds", "count", "partial", "removed", "segments")

    def __init__(
        self,
        segments: SegmentSet | None = None,
        adds: dict[str, Record] | None = None,
        removed: frozenset[str] = frozenset(),
        count: int | None = None,
        partial: bool = False,
    ):
        self.segments = segments
        self.adds: dict[str, Record] = adds if adds is not None else {}
        self.removed = removed
        base = segments.count if segments is not None else 0
        self.count = count if count is not None else base + len(self.adds)
        #: Some record has no FileInfo (a partition another tool wrote).
        self.partial = partial or any(r[1] is None for r in self.adds.values())

    @classmethod
    def of_dicts(
        cls, partitions: Mapping[str, Mapping[str, str]], infos: Mapping[str, Any]
    ) -> Catalog:
        """A catalog of a fully materialised (format-1) document's two mappings."""
        adds = {label: (files, infos.get(label)) for label, files in partitions.items()}
        return cls(None, adds)

    def lookup(self, label: str) -> Record | None:
        rec = self.adds.get(label)
        if rec is not None:
            return rec
        if self.segments is None or label in self.removed:
            return None
        return self.segments.get(label)

    def __iter__(self) -> Iterator[tuple[str, Record]]:
        if self.segments is not None:
            for label, rec in self.segments.items():
                if label not in self.removed and label not in self.adds:
                    yield label, rec
        yield from self.adds.items()

    def changed(
        self,
        remove: Iterable[str],
        add: Mapping[str, Record],
        *,
        replace_all: bool = False,
        trusted: bool = False,
    ) -> Catalog:
        """The catalog after removing labels ``remove`` (absent ones are ignored) and adding
        ``add``; ``replace_all`` starts from an empty catalog. Costs O(change + tail).

        ``trusted``: a committed entry, whose removed labels exist and whose added ones do
        not (its writer checked): no lookup, so replaying it loads no segment."""
        if replace_all:
            return Catalog(None, dict(add))
        if trusted:
            adds = dict(self.adds)
            gone = set()
            for label in remove:
                if adds.pop(label, None) is None:
                    gone.add(label)
            adds.update(add)
            count = self.count - len(set(remove)) + len(add)
            return Catalog(self.segments, adds, self.removed | gone, count, self.partial)
        adds = dict(self.adds)
        removed = set()
        count = self.count
        for label in remove:
            if label in adds:
                del adds[label]
                count -= 1
            elif (
                self.segments is not None
                and label not in self.removed
                and label not in removed
                and self.segments.get(label) is not None
            ):
                removed.add(label)
                count -= 1
        for label, rec in add.items():
            if self.lookup(label) is None or label in removed:
                count += 1
            adds[label] = rec
        return Catalog(
            self.segments,
            adds,
            self.removed | removed,
            count,
            self.partial and bool(adds or self.segments),
        )


class PartitionsView(Mapping[str, Mapping[str, str]]):
    """``label -> {table: key}`` of a catalog (kartothek's ``partitions``)."""

    __slots__ = ("catalog",)

    def __init__(self, catalog: Catalog):
        self.catalog = catalog

    def __getitem__(self, label: str) -> Mapping[str, str]:
        rec = self.catalog.lookup(label) if isinstance(label, str) else None
        if rec is None:
            raise KeyError(label)
        return rec[0]

    def __contains__(self, label: object) -> bool:
        return isinstance(label, str) and self.catalog.lookup(label) is not None

    def with_prefix(self, prefix: str) -> Iterator[str]:
        """Labels starting with ``prefix``, loading only segments whose range overlaps it."""
        cat = self.catalog
        yield from (x for x in cat.adds if x.startswith(prefix))
        segs = cat.segments
        if segs is None:
            return
        high = prefix + "\U0010ffff"
        for i, d in enumerate(segs.descriptors):
            if "inline" not in d and (d["last"] < prefix or d["first"] > high):
                continue
            for label in segs.entries(i):
                if label.startswith(prefix) and label not in cat.removed and label not in cat.adds:
                    yield label

    def first(self) -> Mapping[str, str] | None:
        """The files of some partition (None if empty), reading at most one segment."""
        for rec in self.catalog.adds.values():
            return rec[0]
        segs = self.catalog.segments
        if segs is not None and segs.tables and self.catalog.count:
            return dict.fromkeys(segs.tables, "")  # the root names its tables: no GET
        if segs is not None:
            for i in range(len(segs.descriptors)):
                for label, rec in segs.entries(i).items():
                    if label not in self.catalog.removed:
                        return rec[0]
        return None

    def __iter__(self) -> Iterator[str]:
        return (label for label, _ in self.catalog)

    def items(self) -> Iterator[tuple[str, Mapping[str, str]]]:  # type: ignore[override]
        return ((label, rec[0]) for label, rec in self.catalog)

    def __len__(self) -> int:
        return self.catalog.count

    def __bool__(self) -> bool:
        return self.catalog.count > 0

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Mapping) and dict(self.items()) == dict(other.items())

    __hash__ = None  # type: ignore[assignment]


class InfosView(MutableMapping[str, Any]):
    """``label -> FileInfo`` (JSON text until decoded) of a catalog; decoded values are
    cached here, not in the shared catalog."""

    __slots__ = ("_decoded", "catalog")

    def __init__(self, catalog: Catalog):
        self.catalog = catalog
        self._decoded: dict[str, Any] = {}

    def __getitem__(self, label: str) -> Any:
        if label in self._decoded:
            return self._decoded[label]
        rec = self.catalog.lookup(label) if isinstance(label, str) else None
        if rec is None or rec[1] is None:
            raise KeyError(label)
        return rec[1]

    def __setitem__(self, label: str, value: Any) -> None:
        self._decoded[label] = value

    def __delitem__(self, label: str) -> None:  # pragma: no cover - never called
        raise TypeError("a catalog's infos are read-only")

    def __contains__(self, label: object) -> bool:
        if not isinstance(label, str):
            return False
        rec = self.catalog.lookup(label)
        return rec is not None and rec[1] is not None

    def __iter__(self) -> Iterator[str]:
        return (label for label, rec in self.catalog if rec[1] is not None)

    def items(self) -> Iterator[tuple[str, Any]]:  # type: ignore[override]
        for label, rec in self.catalog:
            if rec[1] is not None:
                yield label, self._decoded.get(label, rec[1])

    def __len__(self) -> int:
        if self.catalog.partial:
            return sum(1 for _ in self)
        return self.catalog.count
