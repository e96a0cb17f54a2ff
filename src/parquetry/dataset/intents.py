"""Write intents: what a write in flight is about to reference, so GC leaves it alone.

A writer creates ``<uuid>/_intents/<id>.json`` *before* writing any file, and records each
key in it *before* putting that key (one compare-and-swap per batch of files). The intent has
a lease (``expires_at``) that every update renews. Garbage collection

- skips the files of an intent whose lease has not ended more than ``retention`` (plus
  :data:`CLOCK_SKEW`) ago, however old the files are;
- reaps any other intent: a compare-and-swap turns it into ``"state": "reaped"`` first, and
  only then deletes its files that no retained version references (no listing needed).

A commit *claims* each intent with a compare-and-swap (which also renews the lease) before its
commit point, and renews again whenever less than half the lease is left. Both sides change
the intent only by compare-and-swap on the version they read, so exactly one of "GC reaps"
and "the commit claims" wins: a reaped intent makes the commit fail with
:class:`IntentExpired`; a claimed one is skipped by GC for a whole lease. The commit point
follows a successful claim or renewal by far less than half a lease, and GC waits a lease end
plus ``retention`` plus :data:`CLOCK_SKEW`, so a commit never references a reaped file while
clocks disagree by less than :data:`CLOCK_SKEW`. After the commit the intent is deleted.
A commit in the process that wrote an intent less than half a lease ago takes it over
without a request: that write proved the intent live, and GC cannot reap it sooner.

The intent object's content, reading it and GC's reaping are in
:mod:`parquetry.dataset.intentstate` (re-exported here); this module holds the writers'
and the commits' side.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import threading
import uuid as uuid_module
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from parquetry.dataset.intentstate import CLOCK_SKEW, IntentState, list_intents, read_intent, reap
from parquetry.dataset.naming import intent_key
from parquetry.errors import (
    IntentExpired,
    NotFound,
    ParquetryError,
    PreconditionFailed,
)
from parquetry.store import PutMode, Store
from parquetry.store.base import ObjectMeta
from parquetry.store.wrappers import WrapperStore

__all__ = [
    "CLOCK_SKEW",
    "DEFAULT_LEASE",
    "Intent",
    "IntentRecordingStore",
    "IntentState",
    "abandon_files",
    "Claim",
    "claim_for_commit",
    "list_intents",
    "read_intent",
    "reap",
]

#: How long an intent protects its files without renewal. Writes renew it as they go, and
#: GC additionally waits ``retention`` after the lease ends.
DEFAULT_LEASE = dt.timedelta(minutes=10)


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


# Intents this process wrote: id -> (object version, keys, renewed at). A commit in the
# same process (``append``) takes them over without re-reading them; a commit elsewhere
# (a Spark driver) reads them.
_LOCAL: dict[str, tuple[str | None, tuple[str, ...], dt.datetime]] = {}
_LOCAL_LOCK = threading.Lock()


class Intent:
    """The writer's handle on one intent: records keys and renews the lease (thread-safe)."""

    def __init__(self, store: Store, uuid: str, *, lease: dt.timedelta = DEFAULT_LEASE):
        self.store, self.uuid, self.lease = store, uuid, lease
        self.id = uuid_module.uuid4().hex
        self.key = intent_key(uuid, self.id)
        self._keys: list[str] = []
        self._version: str | None = None
        self._lock = threading.Lock()

    def _state(self, state: str, keys: Sequence[str]) -> IntentState:
        return IntentState(
            id=self.id,
            uuid=self.uuid,
            state=state,
            expires_at=_now() + self.lease,
            keys=tuple(keys),
        )

    def record(self, keys: Iterable[str]) -> None:
        """Add ``keys`` (about to be written); creates the intent on first use."""
        with self._lock:
            new = [*self._keys, *keys]
            data = self._state("open", new).to_bytes()
            if self._version is None:
                meta = self.store.put(self.key, data, mode=PutMode.CREATE)
            else:
                meta = _cas(self.store, self.key, data, self._version, self.uuid)
            self._keys, self._version = new, meta.version
            with _LOCAL_LOCK:
                _LOCAL[self.id] = (meta.version, tuple(new), _now())


class IntentRecordingStore(WrapperStore):
    """Notes every object a commit's ``make`` writes under ``<uuid>/`` (index files).

    Index files exist only within one commit attempt (written at the end of ``make``, a
    moment before the commit point), so they need no intent: GC's sweep never deletes an
    index file younger than :data:`DEFAULT_LEASE`, and nothing else deletes unreferenced
    files without intents. The claim deletes those of lost attempts when it is released,
    except content-addressed index pieces (``_indices/``): one may be a committed
    version's, so unreferenced ones are left to GC.
    """

    def __init__(self, inner: Store, claim: Claim):
        super().__init__(inner)
        self._claim = claim

    def _put(
        self, key: str, data: bytes | memoryview, mode: PutMode, expected: str | None
    ) -> ObjectMeta:
        # Index pieces are content-addressed: an attempt may write (or find) the very piece a
        # committed version references, so a failed or lost attempt must not delete it;
        # unreferenced ones are garbage collection's (``dataset/gc.py``).
        if key.startswith(self._claim.uuid + "/") and "/_indices/" not in key:
            self._claim.note(key)
        return super()._put(key, data, mode, expected)


@dataclass(slots=True)
class _Held:
    id: str
    keys: tuple[str, ...]
    version: str | None


class Claim:
    """The intents one commit holds ("committing"), renewed while the commit retries."""

    def __init__(self, store: Store, uuid: str, lease: dt.timedelta = DEFAULT_LEASE):
        self.store, self.uuid, self.lease = store, uuid, lease
        self._held: list[_Held] = []
        self._renewed = _now()
        self._lock = threading.Lock()
        self._written: list[str] = []  # objects the commit's attempts wrote (index files)

    def _put(self, held: _Held, keys: tuple[str, ...]) -> None:
        state = IntentState(
            id=held.id,
            uuid=self.uuid,
            state="committing",
            expires_at=_now() + self.lease,
            keys=keys,
        )
        key = intent_key(self.uuid, held.id)
        if held.version is None:
            meta = self.store.put(key, state.to_bytes(), mode=PutMode.CREATE)
        else:
            meta = _cas(self.store, key, state.to_bytes(), held.version, self.uuid)
        held.keys, held.version = keys, meta.version

    def take(self, intents: Iterable[str]) -> None:
        """Claim existing intents (one HEAD + GET + CAS each, concurrently).

        An intent this process wrote less than half a lease ago is taken over without a
        request: its last successful write proves GC had not reaped it, and GC cannot reap
        it before the lease (plus retention and skew) is over; ``ensure_live`` renews it
        before the commit point if half the lease is gone.
        """
        oldest = _now()
        local: list[_Held] = []
        remote: list[str] = []
        with _LOCAL_LOCK:
            for intent in sorted(set(intents)):
                found = _LOCAL.pop(intent, None)
                if found is not None and _now() - found[2] < self.lease / 2:
                    local.append(_Held(id=intent, keys=found[1], version=found[0]))
                    oldest = min(oldest, found[2])
                else:
                    remote.append(intent)

        def one(intent: str) -> _Held:
            key = intent_key(self.uuid, intent)
            try:
                state, version = read_intent(self.store, self.uuid, intent)
            except NotFound:
                raise IntentExpired(
                    f"dataset {self.uuid!r}: write intent {intent} is gone (garbage collected "
                    "after its lease ended, or its files were committed already); the files "
                    "it covered may be deleted, so nothing is committed",
                    key=key,
                ) from None
            if state.state == "reaped":
                raise _reaped(self.uuid, key)
            held = _Held(id=intent, keys=state.keys, version=version)
            self._put(held, state.keys)
            return held

        taken = self.store.map_concurrent(one, remote, max_workers=16)
        with self._lock:
            self._held.extend(local + taken)
            self._renewed = oldest

    def note(self, key: str) -> None:
        """Remember an object this commit wrote (an index file of some attempt)."""
        with self._lock:
            self._written.append(key)

    def discard(self) -> None:
        """The commit failed: delete what its attempts wrote (best effort)."""
        with contextlib.suppress(ParquetryError):
            self.store.delete_many(sorted(set(self._written)), missing_ok=True)

    def release(self, committed: set[str]) -> None:
        """After the commit point: drop the intents (best effort; GC reaps leftovers).

        Index files of lost attempts are deleted. An intent covering files of the same
        write that this commit left out keeps covering just those (rewritten).
        """
        with contextlib.suppress(ParquetryError):
            self.store.delete_many(sorted(set(self._written) - committed), missing_ok=True)
        for held in self._held:
            leftover = tuple(sorted(set(held.keys) - committed))
            with contextlib.suppress(ParquetryError):
                if leftover:
                    self._put(held, leftover)
                else:
                    self.store.delete(intent_key(self.uuid, held.id), missing_ok=True)

    def ensure_live(self) -> None:
        """Right before the commit point: renew every held intent if half its lease is gone."""
        if _now() - self._renewed < self.lease / 2:
            return
        with self._lock:
            self.store.map_concurrent(lambda h: self._put(h, h.keys), self._held, max_workers=16)
            self._renewed = _now()


def _reaped(uuid: str, key: str) -> IntentExpired:
    return IntentExpired(
        f"dataset {uuid!r}: write intent {key} expired and garbage collection reaped it "
        "(its files are deleted or about to be); nothing is committed",
        key=key,
    )


def _cas(store: Store, key: str, data: bytes, version: str, uuid: str) -> ObjectMeta:
    try:
        return store.put(key, data, mode=PutMode.UPDATE, expected_version=version)
    except (PreconditionFailed, NotFound):
        # Only GC changes an intent behind its writer's back: it reaped it.
        raise _reaped(uuid, key) from None


def abandon_files(store: Store, uuid: str, files: Sequence[Any]) -> None:
    """Delete uncommitted files (FileDescriptions) and then their intents (best effort)."""
    intents = sorted({f.intent for f in files if f.intent})
    with contextlib.suppress(ParquetryError):
        store.delete_many([f.key for f in files], missing_ok=True)
        store.delete_many([intent_key(uuid, i) for i in intents], missing_ok=True)


def claim_for_commit(
    store: Store,
    uuid: str,
    files: Sequence[tuple[str, int, str | None]],
    *,
    verify: bool = True,
) -> tuple[Claim, Store]:
    """Claim the intents of ``files`` ``(key, size, intent)`` and check that each file exists.

    Returns the claim and the store the commit's ``make`` must write through (it notes
    the index files each attempt writes, so that those of lost attempts are deleted). The
    existence check (one HEAD per file, 16 at a time) follows the claim: from then on GC
    leaves the files alone. ``verify=False`` skips it for files the caller has just written
    itself (``append``, ``update``).
    """
    claim = Claim(store, uuid)
    ids = {intent for _, _, intent in files if intent}
    if ids:
        claim.take(ids)

    def check(item: tuple[str, int, str | None]) -> None:
        key, size, _ = item
        try:
            found = store.head(key).size
        except NotFound:
            raise IntentExpired(
                f"dataset {uuid!r}: data file {key} to be committed is missing (deleted by "
                "garbage collection or by hand); nothing is committed",
                key=key,
            ) from None
        if found != size:
            raise IntentExpired(
                f"dataset {uuid!r}: data file {key} has {found} bytes, its description says "
                f"{size}; nothing is committed",
                key=key,
            )

    if verify:
        store.map_concurrent(check, files, max_workers=16)
    return claim, IntentRecordingStore(store, claim)
