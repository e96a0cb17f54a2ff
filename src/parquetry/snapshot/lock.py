"""The switch lock: one actor at a time touches a snapshot's committed objects.

The journal object is the lock. A writer takes it by creating the journal (put-if-absent):
of racing writers exactly one wins, the others get :class:`CommitConflict`. Cleanup,
``delete_dataset`` and garbage collection take it the same way with a maintenance journal.

Nobody else acts on a journal while its holder may still be working. Another actor takes a
journal over (compare-and-swap on its version, so exactly one taker wins) only when

* its holder *released* it: the holder failed, and said so before returning; or
* it is older than the *lease* (``switch_lease`` seconds): its holder is presumed dead
  (killed, or its machine lost). A holder renews the lease while it works, and checks it
  still holds the lock before each step that changes committed objects.

Only the holder deletes the journal, after checking the journal is still its own version.
The one assumption: a holder does not stall for longer than the lease between such a check
and the step after it.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from datetime import UTC, datetime

from parquetry.errors import (
    AlreadyExists,
    CommitConflict,
    ManifestCorrupted,
    NotFound,
    ParquetryError,
    PreconditionFailed,
)
from parquetry.snapshot.journal import MAINTENANCE, SwitchJournal
from parquetry.snapshot.layout import journal_key
from parquetry.store.base import Capability, ObjectMeta, PutMode, Store

__all__ = ["Held", "Pending", "acquire", "inspect", "release_if_mine", "takeover"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Pending:
    """A journal found in the store: parsed (``journal``) or corrupt (``error``)."""

    journal: SwitchJournal | None
    error: ManifestCorrupted | None
    version: str | None
    age: float

    def takeable(self, lease: float) -> bool:
        """Whether its holder is finished or presumed dead."""
        released = self.journal is not None and self.journal.released
        return released or self.age >= lease


def _age(meta: ObjectMeta) -> float:
    if meta.modified is None:
        return 0.0  # unknown: presumed alive
    return (datetime.now(UTC) - meta.modified).total_seconds()


def inspect(store: Store, key: str) -> Pending | None:
    """The journal of snapshot ``key``, if any."""
    jkey = journal_key(key)
    try:
        meta = store.head(jkey)
        raw = store.get(jkey)
    except NotFound:
        return None
    # If the journal changed between head and get, the version is stale and any
    # compare-and-swap based on it fails: harmless.
    try:
        return Pending(
            journal=SwitchJournal.from_json(raw, key=jkey),
            error=None,
            version=meta.version,
            age=_age(meta),
        )
    except ManifestCorrupted as exc:
        return Pending(journal=None, error=exc, version=meta.version, age=_age(meta))


class Held:
    """A journal this process holds: the right to change the snapshot's committed objects."""

    def __init__(
        self, store: Store, key: str, journal: SwitchJournal, meta: ObjectMeta, lease: float
    ):
        self.store = store
        self.key = key
        self.journal = journal
        self.version = meta.version
        self.lease = lease
        self._since = time.monotonic()

    def check(self) -> None:
        """Raise CommitConflict unless the journal is still ours; renew an aging lease."""
        jkey = journal_key(self.key)
        try:
            meta = self.store.head(jkey)
        except NotFound:
            meta = None
        if meta is None or meta.version != self.version:
            raise CommitConflict(
                f"the switch of snapshot {self.key!r} was taken over by another writer or "
                f"repair (its lease of {self.lease:g} s ran out)",
                key=self.key,
            )
        if time.monotonic() - self._since > self.lease / 2:
            try:
                self._put(self.journal)
            except (PreconditionFailed, NotFound):
                raise CommitConflict(
                    f"the switch of snapshot {self.key!r} was taken over while renewing its "
                    f"lease of {self.lease:g} s",
                    key=self.key,
                ) from None

    def release(self) -> None:
        """Best effort: mark the journal released so others complete it at once."""
        with contextlib.suppress(ParquetryError):
            self._put(self.journal.replace(released=True))

    def finish(self) -> None:
        """Delete the journal if it is still ours; best effort, falling back to release."""
        try:
            meta = self.store.head(journal_key(self.key))
            if meta.version == self.version:
                self.store.delete(journal_key(self.key), missing_ok=True)
        except NotFound:
            pass
        except ParquetryError:
            self.release()

    def _put(self, journal: SwitchJournal) -> None:
        jkey = journal_key(self.key)
        if self.store.supports(Capability.COMPARE_AND_SWAP) and self.version is not None:
            meta = self.store.put(
                jkey, journal.to_json(), mode=PutMode.UPDATE, expected_version=self.version
            )
        else:
            meta = self.store.put(jkey, journal.to_json())
        self.journal, self.version, self._since = journal, meta.version, time.monotonic()


def acquire(store: Store, key: str, journal: SwitchJournal, lease: float) -> Held | None:
    """Create the journal (the lock); None if another one exists."""
    mode = PutMode.CREATE if store.supports(Capability.CONDITIONAL_CREATE) else PutMode.OVERWRITE
    try:
        meta = store.put(journal_key(key), journal.to_json(), mode=mode)
    except AlreadyExists:
        return None
    # Any other error: the put may still have happened (a lost acknowledgement); the caller
    # calls release_if_mine.
    return Held(store, key, journal, meta, lease)


def takeover(store: Store, key: str, pending: Pending, owner: str, lease: float) -> Held | None:
    """Take a finished or abandoned journal over; None if it is live or another won it."""
    if not pending.takeable(lease):
        return None
    if pending.journal is None:
        # Corrupt and abandoned: only a maintenance lock can stand in for it.
        journal = SwitchJournal(write_id=owner, owner=owner, kind=MAINTENANCE)
    else:
        journal = pending.journal.replace(owner=owner, released=False)
    jkey = journal_key(key)
    try:
        if store.supports(Capability.COMPARE_AND_SWAP) and pending.version is not None:
            meta = store.put(
                jkey, journal.to_json(), mode=PutMode.UPDATE, expected_version=pending.version
            )
        else:  # no compare-and-swap: racing takers are not excluded (documented)
            meta = store.put(jkey, journal.to_json())
    except (PreconditionFailed, NotFound):
        return None
    except BaseException:
        release_if_mine(store, key, owner)
        raise
    return Held(store, key, journal, meta, lease)


def release_if_mine(store: Store, key: str, owner: str) -> bool | None:
    """After an unclear failure: release the journal if ``owner`` holds it.

    Returns True if it did, False if ``owner`` surely holds no journal of ``key``, None if
    that could not be told.
    """
    try:
        pending = inspect(store, key)
    except ParquetryError:
        return None
    if pending is None or pending.journal is None or pending.journal.holder != owner:
        return False
    meta = ObjectMeta(key=journal_key(key), size=0, version=pending.version)
    Held(store, key, pending.journal, meta, 0.0).release()
    return True
