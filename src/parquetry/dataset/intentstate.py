"""A write intent as stored: its content (:class:`IntentState`, format 1), reading it in
the order that makes a later compare-and-swap safe, and garbage collection's side of the
protocol (listing intents, reaping one). The writers' and commits' side, and the protocol
itself, are in :mod:`parquetry.dataset.intents` (which re-exports these names).
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass

from parquetry.dataset.naming import intent_key, intents_prefix
from parquetry.errors import AlreadyExists, MetadataCorrupted, NotFound, PreconditionFailed
from parquetry.store import PutMode, Store
from parquetry.store.base import ObjectMeta

__all__ = ["CLOCK_SKEW", "IntentState", "list_intents", "reap", "read_intent"]

#: Clock disagreement between writers and GC that the protocol tolerates.
CLOCK_SKEW = dt.timedelta(seconds=60)
_FORMAT = "parquetry_intent"


def _parse_time(text: str) -> dt.datetime:
    value = dt.datetime.fromisoformat(text)
    return value if value.tzinfo else value.replace(tzinfo=dt.UTC)


@dataclass(frozen=True, slots=True, kw_only=True)
class IntentState:
    """The content of one intent object."""

    id: str
    uuid: str
    state: str  # "open" | "committing" | "reaped"
    expires_at: dt.datetime
    keys: tuple[str, ...]

    def to_bytes(self) -> bytes:
        doc = {
            _FORMAT: 1,
            "id": self.id,
            "uuid": self.uuid,
            "state": self.state,
            "expires_at": self.expires_at.isoformat(),
            "keys": list(self.keys),
        }
        return json.dumps(doc, separators=(",", ":")).encode()

    @classmethod
    def from_bytes(cls, data: bytes, key: str) -> IntentState:
        try:
            doc = json.loads(data)
            if not isinstance(doc, dict) or doc.get(_FORMAT) != 1:
                raise ValueError("not a parquetry intent (format 1)")
            keys = doc["keys"]
            if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
                raise ValueError("keys must be a list of strings")
            state = doc["state"]
            if state not in ("open", "committing", "reaped"):
                raise ValueError(f"unknown state {state!r}")
            return cls(
                id=str(doc["id"]),
                uuid=str(doc["uuid"]),
                state=state,
                expires_at=_parse_time(str(doc["expires_at"])),
                keys=tuple(keys),
            )
        except (ValueError, KeyError, TypeError, RecursionError) as exc:
            raise MetadataCorrupted(f"write intent {key} is invalid: {exc}", key=key) from None

    def reapable(self, now: dt.datetime, retention: dt.timedelta) -> bool:
        """Whether GC may reap this intent at ``now`` (its lease ended long enough ago)."""
        return self.state == "reaped" or self.expires_at + retention + CLOCK_SKEW < now


def read_intent(store: Store, uuid: str, intent: str) -> tuple[IntentState, str | None]:
    """An intent and its object version, read in the order that makes a later CAS safe.

    The version is read *before* the content: if the object changes in between, the CAS
    on the older version fails instead of overwriting the newer content.
    """
    key = intent_key(uuid, intent)
    meta = store.head(key)
    return IntentState.from_bytes(store.get(key), key), meta.version


def list_intents(store: Store, uuid: str) -> list[ObjectMeta]:
    return [m for m in store.list(intents_prefix(uuid)) if m.key.endswith(".json")]


def reap(
    store: Store, uuid: str, key: str, now: dt.datetime, retention: dt.timedelta
) -> tuple[IntentState | None, bool]:
    """(state, or None if gone or unreadable; whether it is reaped now, by us or before)."""
    intent = key.rsplit("/", 1)[-1].removesuffix(".json")
    try:
        state, version = read_intent(store, uuid, intent)
    except (NotFound, MetadataCorrupted):
        return None, False
    if state.state == "reaped":
        return state, True
    if not state.reapable(now, retention) or version is None:
        return state, False
    reaped = IntentState(
        id=state.id, uuid=uuid, state="reaped", expires_at=state.expires_at, keys=state.keys
    )
    try:
        store.put(key, reaped.to_bytes(), mode=PutMode.UPDATE, expected_version=version)
    except (PreconditionFailed, NotFound, AlreadyExists):
        return state, False  # renewed or claimed meanwhile: the writer won
    return reaped, True
