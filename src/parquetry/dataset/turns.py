"""Turns: the writer that has waited longest commits next (fairness under contention).

Commits race for the next version entry (create-if-absent); the loser rolls forward and
tries again. A pure race is a lottery each round, so with 16 writers a few lose dozens of
rounds in a row (p99 latency of seconds while the median is 0.1 s). A *turn* is an advisory
claim on one version number, ``<uuid>/_turn.json`` = ``{"number", "owner", "since"}``
(``since``: when the claimant's commit started). A writer that lost a race (a *waiter*)
claims the number it is about to try unless a writer that started earlier holds it, by a
compare-and-swap that replaces only a younger writer's or a stale claim; a waiter about to
try a number that an older writer holds waits until that version exists.

The claim is never a lock: nothing depends on it for correctness (the version entry's
create-if-absent stays the commit point), a writer respects a given claim for at most
:func:`Turn.hold` seconds by its own clock (a killed claimant delays others once, by at
most ``HOLD_MAX_S``), and a claim on a number already committed means nothing. Failures
reading or writing the claim only cost fairness, so they are ignored.

Writers that never lost a race pay nothing: a process checks turns on a dataset only after
one of its commits there lost a race or waited within the last ``CONTENDED_S`` seconds, and
only while its attempts are quick (``TURN_MAX_ATTEMPT_S``); otherwise the commit loop backs
off at random (``commit._backoff``).
"""

from __future__ import annotations

import contextlib
import json
import math
import random
import secrets
import time

from parquetry.dataset.naming import turn_key, version_key
from parquetry.errors import AlreadyExists, NotFound, ParquetryError, PreconditionFailed
from parquetry.store import PutMode, Store

__all__ = [
    "CONTENDED_S",
    "HOLD_MAX_S",
    "HOLD_MIN_S",
    "TURN_MAX_ATTEMPT_S",
    "WAIT_BUDGET_S",
    "Turn",
    "sleep",
]

#: How long a process keeps checking turns on a dataset after it last saw contention there.
CONTENDED_S = 30.0
#: Bounds of how long a claim is respected (10 attempt durations of the waiting writer).
HOLD_MIN_S = 0.5
HOLD_MAX_S = 2.0
#: A commit waits for others' turns at most this long in all; then it only claims (a bound
#: whatever the claims do, e.g. claimants that keep losing to writers not taking turns).
WAIT_BUDGET_S = 2 * HOLD_MAX_S
#: Writers whose attempts take longer than this do not take turns (a claim could not be
#: respected for 10 attempts within HOLD_MAX_S): they back off at random as before. Measured
#: on S3 (moto, loaded machine), turns doubled the requests per commit and the tail.
TURN_MAX_ATTEMPT_S = HOLD_MAX_S / 10

#: (store url, dataset uuid) -> (monotonic time this process last saw contention there, the
#: duration of its last attempt then: how long the claimant of a turn may need).
_contended: dict[tuple[str, str], tuple[float, float]] = {}


def sleep(seconds: float) -> None:
    """Waiting for a turn (one place, so benchmarks can measure it)."""
    time.sleep(seconds)


class Turn:
    """One commit's view of the turn of dataset ``uuid`` (see the module docstring)."""

    def __init__(self, store: Store, uuid: str) -> None:
        self.store, self.uuid = store, uuid
        self.key = turn_key(uuid)
        self.owner = secrets.token_hex(8)
        self.since = time.time()
        self.claimed: int | None = None
        self.waited = 0.0  # seconds this commit waited for others' turns
        self._seen: dict[tuple[str, int], float] = {}  # claim -> when first respected
        seen, self.attempt_s = _contended.get((store.url, uuid), (-math.inf, 0.02))
        self.waiting = time.monotonic() - seen < CONTENDED_S

    def contended(self, attempt_s: float | None = None) -> None:
        """This commit lost a race or waited (an attempt of ``attempt_s`` seconds): it
        claims turns from now on, and so do this process's next commits for a while."""
        self.waiting = True
        if attempt_s is not None:
            self.attempt_s = attempt_s
        _contended[(self.store.url, self.uuid)] = (time.monotonic(), self.attempt_s)

    @property
    def active(self) -> bool:
        """Whether this writer takes turns (it is contended, its attempts are quick, and it
        has not used up its wait budget)."""
        return self.waiting and self.attempt_s <= TURN_MAX_ATTEMPT_S and self.waited < WAIT_BUDGET_S

    def hold(self) -> float:
        return min(HOLD_MAX_S, max(HOLD_MIN_S, 10 * self.attempt_s))

    def _read(self, with_version: bool) -> tuple[tuple[int, str, float] | None, str | None]:
        """(the claim, its version token if ``with_version``); (None, None) when there is
        none. The HEAD comes first: a claim replaced between the two requests fails the
        compare-and-swap. A garbled claim (or a failed read) is (None, ""): replaceable."""
        try:
            version = self.store.head(self.key).version if with_version else ""
            raw = json.loads(self.store.get(self.key))
            return (int(raw["number"]), str(raw["owner"]), float(raw["since"])), version
        except NotFound:
            return None, None
        except (
            ParquetryError,
            ValueError,
            TypeError,
            KeyError,
            AttributeError,
            OverflowError,  # {"number": 1e400}: int(inf)
            RecursionError,  # deeply nested JSON
        ):
            return None, ""

    def _decide(self, found: tuple[int, str, float] | None, number: int) -> str | None:
        if found is not None and found[0] > number:
            # Never replace the claim of a writer that is ahead with one on a taken number
            # (a claim far ahead of every version is garbage: replace it).
            return "behind" if self._exists(number) else None
        if found is not None and found[0] == number:
            n, owner, since = found
            if owner == self.owner:
                return "go"
            if (since, owner) < (self.since, self.owner):
                first = self._seen.setdefault((owner, n), time.monotonic())
                if time.monotonic() - first < self.hold():
                    return "wait"
        return None  # claim it

    def _older_holds(self, number: int) -> str:
        """``"go"``: this writer may attempt ``number`` (a waiter has claimed it: a
        compare-and-swap that replaces only a younger writer's claim or a stale one, so
        racing claims converge to the oldest waiter); ``"wait"``: an older writer holds it;
        ``"behind"``: a claim on a later number, and version ``number`` exists.

        One GET when the claim decides (the usual case while waiting or holding it); a
        HEAD, a GET and a PUT to claim."""
        found, _ = self._read(with_version=False)
        decided = self._decide(found, number)
        if decided is not None:
            return decided
        for _ in range(4):
            found, version = self._read(with_version=True)
            decided = self._decide(found, number)
            if decided is not None:
                return decided
            body = json.dumps({"number": number, "owner": self.owner, "since": self.since})
            try:
                if version is None:
                    self.store.put(self.key, body.encode(), mode=PutMode.CREATE)
                elif version:
                    self.store.put(
                        self.key, body.encode(), mode=PutMode.UPDATE, expected_version=version
                    )
                else:
                    self.store.put(self.key, body.encode())
                self.claimed = number
                return "go"
            except (AlreadyExists, PreconditionFailed, NotFound):
                continue  # another writer claimed meanwhile: read its claim
            except ParquetryError:
                return "go"
        return "go"

    def _exists(self, number: int) -> bool:
        try:
            return self.store.exists(version_key(self.uuid, number))
        except ParquetryError:
            return True  # cannot tell: stop waiting (the caller rolls forward)

    def check(self, number: int) -> bool:
        """Before attempting ``number``: True if this writer must roll forward first (it
        waited for an older writer's turn, until version ``number`` existed or the claim's
        hold ran out, or it is behind), False if it may attempt now (a waiter has claimed
        the number then)."""
        if not self.active:
            return False
        state = self._older_holds(number)
        if state == "go":
            return False
        if state == "behind":
            return True
        self.contended()
        started = time.monotonic()
        pace = min(0.25, max(0.002, self.attempt_s / 4))
        while time.monotonic() - started < self.hold():
            sleep(random.uniform(0.5, 1.5) * pace)
            if self._exists(number):
                break
        self.waited += time.monotonic() - started
        return True

    def release(self) -> None:
        """A commit that ends without taking its claimed number (a conflict, an error)
        gives the turn back, so others need not wait for the hold to run out."""
        if self.claimed is None:
            return
        found, _ = self._read(with_version=False)
        if found is not None and found[1] == self.owner:
            with contextlib.suppress(ParquetryError):
                self.store.delete(self.key, missing_ok=True)
