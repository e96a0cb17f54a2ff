"""Which parquetry version a kartothek write was based on (step 1 of
:mod:`parquetry.dataset.reconcile`): the marker parquetry puts in every pointer it writes,
or, without one, a walk over the retained versions' labels (the rule is in the
``reconcile`` module docstring).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from parquetry.dataset.kartothek_adopt import is_recreated
from parquetry.dataset.metadata import POINTER_MARKER, DatasetDocument
from parquetry.errors import DatasetNotFound, MetadataCorrupted
from parquetry.store import Store

__all__ = ["BASE_SCAN_LIMIT", "find_base"]

#: Versions examined (newest first) when looking for the one kartothek read.
BASE_SCAN_LIMIT = 256


def find_base(
    store: Store,
    uuid: str,
    foreign: DatasetDocument,
    numbers: list[int],
    *,
    hint: int | None = None,
) -> tuple[int, DatasetDocument, frozenset[str], int] | None:
    """(number and document of the version kartothek read, labels of the versions
    examined, GETs used), or None when the dataset has no parquetry version or kartothek
    created it again after the newest (``kartothek_adopt.is_recreated``).

    ``numbers``: the retained version numbers (ascending). ``hint``: the newest version
    the pointer can have shown (the last pointer parquetry wrote, format 2's head); the
    newest version otherwise. See :mod:`parquetry.dataset.reconcile` (step 1) for the rule.
    """
    from parquetry.dataset.versions import load_version

    labels = foreign.partitions.keys()
    order = [n for n in reversed(numbers) if hint is None or n <= hint]
    docs: dict[int, DatasetDocument | None] = {}
    requests = 0

    def doc_of(n: int) -> DatasetDocument | None:
        nonlocal requests
        if n not in docs:
            requests += 1
            try:
                docs[n] = load_version(store, uuid, n)
            except (DatasetNotFound, MetadataCorrupted):
                docs[n] = None
        return docs[n]

    def walk() -> Iterator[tuple[int, DatasetDocument]]:
        """Retained versions of the newest's incarnation, newest first (loaded lazily)."""
        incarnation: str | None = None
        for n in order[:BASE_SCAN_LIMIT]:
            doc = doc_of(n)
            if doc is None or doc.version is None:
                continue
            if incarnation is None:
                incarnation = doc.version.incarnation
            elif doc.version.incarnation != incarnation:
                return  # an earlier dataset of the same uuid
            yield n, doc

    versions = walk()
    current = next(versions, None)
    if current is None or is_recreated(foreign, current[1]):
        return None  # no parquetry version, or kartothek created the dataset again
    marked = _marked_base(foreign, order, current[1], doc_of)
    if marked is not None:
        shown = doc_of(marked)
        assert shown is not None
        return marked, shown, frozenset(shown.partitions), requests
    while True:
        n, doc = current
        assert doc.version is not None
        created = doc.version.epoch == n
        current = None if created else next(versions, None)
        old = set() if current is None else current[1].partitions.keys()
        added = doc.partitions.keys() - old
        if added & labels:
            break  # kartothek knew a partition this version added: it read this one
        if not added and not ((old - doc.partitions.keys()) & labels):
            break  # added nothing, and kartothek kept nothing this version removed
        if current is None:
            break  # the creation: kartothek replaced every partition it saw
    base = doc_of(n)
    assert base is not None
    seen: set[str] = set()
    for loaded in docs.values():
        if loaded is not None:
            seen.update(loaded.partitions)
    return n, base, frozenset(seen), requests


def _marked_base(
    foreign: DatasetDocument,
    order: list[int],
    newest: DatasetDocument,
    doc_of: Callable[[int], DatasetDocument | None],
) -> int | None:
    """The version the pointer kartothek read showed, from the marker parquetry puts in the
    pointer's user metadata (kartothek keeps it verbatim): exact, where the label walk
    cannot tell a partition kartothek deleted from one it never saw. None without a
    usable marker (a pointer written before the marker existed, or a version expired)."""
    shown = foreign.metadata.get(POINTER_MARKER)
    if not isinstance(shown, int) or isinstance(shown, bool) or shown not in order:
        return None
    doc = doc_of(shown)
    if doc is None or doc.version is None or not _same_incarnation(doc, newest):
        return None
    return shown


def _same_incarnation(a: DatasetDocument | None, b: DatasetDocument | None) -> bool:
    if a is None or b is None or a.version is None or b.version is None:
        return False
    return a.version.incarnation == b.version.incarnation
