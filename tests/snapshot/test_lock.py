"""The switch lock (snapshot/lock.py): exactly one holder; a stale holder neither acts nor
deletes its successor's journal."""

from __future__ import annotations

import pytest

from parquetry import CommitConflict
from parquetry.snapshot.journal import MAINTENANCE, SwitchJournal
from parquetry.snapshot.lock import acquire, inspect, release_if_mine, takeover
from parquetry.store import Store


def _journal(owner: str) -> SwitchJournal:
    return SwitchJournal(write_id=owner, owner=owner, kind=MAINTENANCE)


def test_one_holder_and_takeover_rules(memory_store: Store) -> None:
    held = acquire(memory_store, "ds", _journal("w1"), lease=60.0)
    assert held is not None
    assert acquire(memory_store, "ds", _journal("w2"), lease=60.0) is None  # put-if-absent
    pending = inspect(memory_store, "ds")
    assert pending is not None
    assert takeover(memory_store, "ds", pending, "w2", lease=60.0) is None  # live: left alone
    held.check()  # still ours

    # Past its lease (0 s here) the journal is presumed dead: exactly one taker wins.
    first = takeover(memory_store, "ds", pending, "w2", lease=0.0)
    assert first is not None
    assert takeover(memory_store, "ds", pending, "w3", lease=0.0) is None  # stale version
    with pytest.raises(CommitConflict, match="taken over"):
        held.check()
    held.finish()  # not ours any more: the successor's journal stays
    now = inspect(memory_store, "ds")
    assert now is not None
    assert now.journal is not None
    assert now.journal.holder == "w2"
    first.finish()
    assert inspect(memory_store, "ds") is None


def test_released_journal_is_taken_at_once(memory_store: Store) -> None:
    held = acquire(memory_store, "ds", _journal("w1"), lease=3600.0)
    assert held is not None
    assert release_if_mine(memory_store, "ds", "someone-else") is False
    assert release_if_mine(memory_store, "ds", "w1") is True
    pending = inspect(memory_store, "ds")
    assert pending is not None
    assert pending.journal is not None
    assert pending.journal.released
    taker = takeover(memory_store, "ds", pending, "w2", lease=3600.0)
    assert taker is not None
    assert not taker.journal.released
    taker.finish()
    assert release_if_mine(memory_store, "ds", "w1") is False  # nothing left
