"""Conflict-safe commits: create-if-absent of the next version document is the commit point.

A commit is a function ``make(base, number) -> DatasetDocument`` applied to the newest state.
If another writer created version ``number`` first, the writer rolls forward to the newest
version and calls ``make`` again; ``make`` raises :class:`CommitConflict` when its change
overlaps the other commits (e.g. a ``delete_scope`` whose partitions changed). Losing a race
alone never makes a commit fail (appends always go through): it retries without a fixed
limit unless the caller sets ``max_retries``, taking turns (:mod:`parquetry.dataset.turns`):
the writer that has waited longest goes next.

Before its commit point a commit holds its write intents (:mod:`parquetry.dataset.intents`),
has checked that every file it adds exists, and that the incarnation of the dataset it
builds on still exists (a ``delete`` removes the incarnation marker first); after it, it
checks the marker again, so a commit racing a ``delete`` is not acknowledged.

After the commit point the checkpoint, the pointer (the kartothek metadata file) and the
head are published by :mod:`parquetry.dataset.publish` (re-exported here).
"""

from __future__ import annotations

import datetime as dt
import random
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from parquetry.dataset.entry import encode_entry, entry_of
from parquetry.dataset.format2 import advance, load_state, read_version, version_info
from parquetry.dataset.indexwire import entry_piece_keys
from parquetry.dataset.intents import Claim
from parquetry.dataset.kartothek_sync import kartothek_wrote, reconcile
from parquetry.dataset.metadata import DatasetDocument
from parquetry.dataset.naming import common_metadata_key, incarnation_key, version_key
from parquetry.dataset.publish import checkpoint_state, finish_commit, publish_pointer
from parquetry.dataset.turns import Turn
from parquetry.dataset.txns import Txn, applied, replayed, with_txn
from parquetry.dataset.versions import LoadedState, latest_version_number, roll_forward
from parquetry.errors import AlreadyExists, CommitConflict, DatasetDeleted
from parquetry.store import PutMode, Store

if TYPE_CHECKING:
    from parquetry.dataset.reading import VersionReader

__all__ = [
    "MAX_RETRIES",
    "MakeVersion",
    "check_incarnation",
    "checkpoint_state",
    "commit",
    "committed_keys",
    "finish_commit",
    "now_iso",
    "publish_pointer",
]


#: No fixed limit: a commit that merely lost races keeps retrying (None = unbounded).
MAX_RETRIES: int | None = None

#: Builds the new document from the newest base (None when creating) and the new number.
MakeVersion = Callable[[DatasetDocument | None, int], DatasetDocument]


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat()


def _backoff(attempt: int, rivals: int, duration: float) -> None:
    """Sleep so that about one writer attempts per attempt duration (writers that do not
    take turns: their attempts are slow, see :data:`turns.TURN_MAX_ATTEMPT_S`).

    ``rivals`` commits landed during our last attempt (of ``duration`` seconds): spreading
    the next attempts over ``rivals * duration`` keeps wasted attempts few without idling.
    Writers that lost often get a narrower window; the window is capped at 1 s.
    """
    window = min(1.0, max(rivals, 1) * max(duration, 0.001)) / (1 + attempt // 4)
    time.sleep(random.uniform(0, window))


def _incarnation_of(doc: DatasetDocument | None) -> str:
    return doc.version.incarnation if doc is not None and doc.version is not None else ""


def check_incarnation(store: Store, uuid: str, base: DatasetDocument | None, number: int) -> None:
    """Raise DatasetDeleted if the incarnation ``base`` belongs to no longer exists."""
    incarnation = _incarnation_of(base)
    if incarnation:
        key = incarnation_key(uuid, incarnation)
    elif base is not None and base.version is not None and number >= 0:
        key = version_key(uuid, number)  # written before incarnation ids: the base version
    else:
        return
    if not store.exists(key):
        raise DatasetDeleted(
            f"dataset {uuid!r} was deleted (and maybe created again) after version {number} "
            "was read; nothing is committed",
            key=key,
        )


def _roll_forward_same(
    store: Store, uuid: str, base: DatasetDocument | None, number: int
) -> tuple[DatasetDocument | None, int]:
    """The newest version of ``base``'s incarnation after ``number`` (and the newest number).

    A version of another incarnation means the dataset was deleted and created again; unless
    our incarnation marker still exists (then it is a stray of a commit that raced a delete
    and lost), the commit must fail.
    """
    incarnation = _incarnation_of(base)
    if not incarnation:
        known = base if base is not None and base.version is not None else None
        newer, number, _ = roll_forward(store, uuid, number, known)
        return (newer if newer is not None else base), number
    foreign, ours = False, base
    while True:
        v = read_version(store, uuid, number + 1)
        if v is None:
            break
        number += 1
        info = version_info(v)
        if info is None:
            # A tombstone: GC expired the version after ``base`` was read. Skipping its
            # changes would build on a wrong state (a txn replay committed twice, a rewrite
            # missed a concurrent removal): the state is loaded again (from GC's checkpoint).
            base = None
            continue
        if info.incarnation == incarnation:
            base = advance(base, v, version_key(uuid, number), store) or load_state(
                store, uuid, number
            )
        else:
            foreign = True
    if base is None:
        base = load_state(store, uuid, number)  # VersionExpired: expired meanwhile
    if foreign:
        check_incarnation(store, uuid, ours, number)
    return base, number


def commit(
    store: Store,
    uuid: str,
    base: DatasetDocument | None,
    number: int,
    make: MakeVersion,
    *,
    max_retries: int | None = MAX_RETRIES,
    pointer_format: str = "json",
    stale_format: str | None = None,
    claim: Claim | None = None,
    txn: Txn | None = None,
) -> DatasetDocument:
    """Commit ``make(base, number + 1)``; ``number`` < 0 means "find the newest by listing".

    ``txn`` (app id, version): record it, or raise TxnApplied (nothing committed) when the
    state an attempt builds on already holds it (see :mod:`parquetry.dataset.txns`).
    ``claim`` holds the commit's write intents (renewed while retrying, released after).
    Returns the committed document. Raises CommitConflict when ``make`` reports an
    overlapping change or ``max_retries`` lost races in a row are exceeded, DatasetDeleted
    when the dataset was deleted meanwhile, IntentExpired when GC reaped the intents.
    """
    if base is not None and kartothek_wrote(store, uuid, base):
        # kartothek wrote the pointer: its change becomes a version first (no lost rows).
        found = reconcile(store, uuid)
        if found is not None:
            base, number, _ = found
    if number < 0:
        number = latest_version_number(store, uuid)
    try:
        doc, body, size, number, lost = _commit_loop(
            store, uuid, base, number, make, max_retries, claim, txn
        )
    except CommitConflict:
        if claim is not None:
            claim.discard()  # known not committed: drop the index files its attempts wrote
        raise
    doc = finish_commit(
        store, uuid, doc, body, size, number, pointer_format, stale_format, contended=lost > 0
    )
    if claim is not None:
        claim.release(committed_keys(doc, body))
    return doc


def _commit_loop(
    store: Store,
    uuid: str,
    base: DatasetDocument | None,
    number: int,
    make: MakeVersion,
    max_retries: int | None,
    claim: Claim | None,
    txn: Txn | None = None,
) -> tuple[DatasetDocument, dict[str, Any], int, int, int]:
    """(document, entry body, its size, version number, races lost) of the commit (at
    least 1 when it took turns)."""
    check_incarnation(store, uuid, base, number)
    turn = Turn(store, uuid)
    try:
        return _attempts(store, uuid, base, number, make, max_retries, claim, turn, txn)
    except Exception:
        turn.release()
        raise


def _attempts(
    store: Store,
    uuid: str,
    base: DatasetDocument | None,
    number: int,
    make: MakeVersion,
    max_retries: int | None,
    claim: Claim | None,
    turn: Turn,
    txn: Txn | None,
) -> tuple[DatasetDocument, dict[str, Any], int, int, int]:
    attempt = 0
    while True:
        # A writer that lost a race takes turns: it waits while a writer that started
        # before it holds the next number, then claims it (turns.py: advisory, bounded).
        while turn.check(number + 1):
            base, number = _roll_forward_same(store, uuid, base, number)
        started = time.perf_counter()
        if applied(base, txn):
            # Checked on each attempt's base: of two racing replays, one commits.
            assert base is not None
            assert txn is not None
            raise replayed(uuid, base, txn)
        doc = with_txn(make(base, number + 1), txn)
        if claim is not None:
            claim.ensure_live()
        lineage = base.lineage if base is not None else None
        if doc.lineage is not lineage:
            # The new state extends its base's lineage, whatever ``make`` built it from (a
            # restore returns an older version's state).
            doc = doc.evolve(lineage=lineage)
        body = entry_of(base, doc, store)
        data = encode_entry(body)
        if turn.check(number + 1):
            # An older writer claimed the number while this one built its entry.
            turn.contended(time.perf_counter() - started)
            base, number = _roll_forward_same(store, uuid, base, number)
            continue
        try:
            store.put(version_key(uuid, number + 1), data, mode=PutMode.CREATE)
        except AlreadyExists:
            attempt += 1
            if max_retries is not None and attempt > max_retries:
                raise CommitConflict(
                    f"dataset {uuid!r}: version {number + 1} was taken by another writer "
                    f"{attempt} times in a row; giving up after {max_retries} retries",
                    key=version_key(uuid, number + 1),
                ) from None
            took = time.perf_counter() - started
            turn.contended(took)
            lost_at = number
            base, number = _roll_forward_same(store, uuid, base, number)
            if not turn.active:
                base, number = _back_off(store, uuid, base, number, attempt, number - lost_at, took)
            continue
        _check_after_commit(store, uuid, doc, number + 1)
        # A writer taking turns is contended even when it lost no race this time: the
        # writers waiting for it are about to commit and publish the pointer after it.
        return doc, body, len(data), number + 1, attempt or int(turn.waiting)


def _back_off(
    store: Store,
    uuid: str,
    base: DatasetDocument | None,
    number: int,
    attempt: int,
    rivals: int,
    took: float,
) -> tuple[DatasetDocument | None, int]:
    """Back off at random, then sense before trying: if commits landed while we slept, an
    attempt now would build on a stale base and lose (one GET tells); up to 3 times."""
    _backoff(attempt, rivals, took)
    for _ in range(3):
        seen = number
        base, number = _roll_forward_same(store, uuid, base, number)
        if number == seen:
            break
        _backoff(attempt, number - seen, took)
    return base, number


def _check_after_commit(store: Store, uuid: str, doc: DatasetDocument, number: int) -> None:
    """A ``delete`` that removed the incarnation meanwhile: take the version back, fail."""
    incarnation = _incarnation_of(doc)
    if not incarnation or store.exists(incarnation_key(uuid, incarnation)):
        return
    store.delete(version_key(uuid, number), missing_ok=True)
    raise DatasetDeleted(
        f"dataset {uuid!r} was deleted while version {number} was being committed; "
        "nothing is committed",
        key=incarnation_key(uuid, incarnation),
    )


def committed_keys(doc: DatasetDocument, body: Mapping[str, Any]) -> set[str]:
    """The keys a commit's claim must not delete: what its entry adds, the indices, the
    schema file (O(change): the state's other files are not this commit's)."""
    keys = {key for _, files, _ in body["add"] for key in files.values()}
    keys |= {ref for ref in doc.indices.values() if isinstance(ref, str)}
    keys |= entry_piece_keys(body)
    keys |= {common_metadata_key(doc.uuid, t) for t in doc.tables}
    return keys


def commit_after(
    ds: VersionReader,
    doc: DatasetDocument,
    number: int,
    make: MakeVersion,
    *,
    max_retries: int | None = MAX_RETRIES,
    claim: Claim | None = None,
) -> LoadedState:
    """:func:`commit` of ``make`` after the handle ``ds`` (its document ``doc``, version
    ``number``), the pointer written in the format the dataset's has; returns the committed
    state. A pointer kartothek wrote keeps its format, and one of the other format is then
    stale (kartothek reads JSON first) and removed."""
    fmt = ds._pointer_format or doc.metadata_format
    stale = None
    if ds._foreign:
        stale = "msgpack.zstd" if ds._pointer_format == "json" else "json"
    committed = commit(
        ds.store,
        doc.uuid,
        doc,
        number,
        make,
        max_retries=max_retries,
        pointer_format=fmt,
        stale_format=stale,
        claim=claim,
    )
    return LoadedState.committed(committed, fmt)
