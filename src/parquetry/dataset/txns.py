"""Idempotent commits (Delta's SetTransaction): ``txn=(app_id, version)``.

A state records, per application id, the last version of that application it committed
(``DatasetDocument.txns``; entries set it with ``set.txns``, checkpoint roots carry the whole
map). A commit given ``txn=(app, v)`` with ``v <= txns[app]`` is a *replay*: it commits
nothing and returns the newest state, and the files it wrote are abandoned. The check runs
inside the conflict-safe commit loop, on the newest state each attempt builds on, so two
racing replays of one batch commit once: the loser sees the winner's ``txns`` when it rolls
forward. A Structured Streaming sink uses ``(query id, batch id)``; ``foreachBatch`` jobs
pass Spark options ``txnAppId``/``txnVersion``.
"""

from __future__ import annotations

from typing import Any

from parquetry.dataset.metadata import DatasetDocument
from parquetry.errors import CommitConflict, InvalidArgument

__all__ = ["Txn", "TxnApplied", "applied", "check_txn", "with_txn"]

#: (application id, version): versions of one application must increase.
Txn = tuple[str, int]


class TxnApplied(CommitConflict):
    """Internal: the transaction's version is already committed (``doc``: the newest state).

    A CommitConflict so that every "known not committed" cleanup (claims, written files)
    runs; :func:`parquetry.dataset.transact.commit_change` turns it into a normal return.
    """

    def __init__(self, message: str, *, doc: DatasetDocument, key: str | None = None) -> None:
        super().__init__(message, key=key)
        self.doc = doc


def check_txn(txn: Any) -> Txn | None:
    """``txn`` validated (None stays None).

    Raises:
        InvalidArgument: not a (non-empty string, integer in [0, 2**63)) pair.
    """
    if txn is None:
        return None
    try:
        app, version = txn
    except (TypeError, ValueError):
        raise InvalidArgument(f"txn must be (app_id, version), got {txn!r}") from None
    if not isinstance(app, str) or not app:
        raise InvalidArgument(f"txn app_id must be a non-empty string, got {app!r}")
    if not isinstance(version, int) or isinstance(version, bool) or not 0 <= version < 1 << 63:
        # A 64-bit signed version, as Delta's and Spark's: a larger one failed deep in the
        # commit with a raw ValueError (10**5000 cannot even be written as JSON).
        shown = version if not isinstance(version, int) or version.bit_length() < 256 else "huge"
        raise InvalidArgument(f"txn version must be an integer in [0, 2**63), got {shown!r}")
    return app, version


def applied(doc: DatasetDocument | None, txn: Txn | None) -> bool:
    """Whether ``doc`` already holds ``txn`` (its application's version is at least it)."""
    if txn is None or doc is None:
        return False
    recorded = doc.txns.get(txn[0])
    return recorded is not None and txn[1] <= recorded


def with_txn(doc: DatasetDocument, txn: Txn | None) -> DatasetDocument:
    """``doc`` recording ``txn``."""
    if txn is None:
        return doc
    return doc.evolve(txns={**doc.txns, txn[0]: txn[1]})


def replayed(uuid: str, doc: DatasetDocument, txn: Txn) -> TxnApplied:
    recorded = doc.txns.get(txn[0])
    return TxnApplied(
        f"dataset {uuid!r}: transaction {txn[0]!r} version {txn[1]} is already committed "
        f"(recorded version {recorded}); nothing is committed",
        doc=doc,
    )
