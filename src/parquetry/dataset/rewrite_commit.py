"""The rewrite engine's commit: remove the edited labels, add the new files, once.

Part of :mod:`parquetry.dataset.rewrite` (its docstring states the conflict rules): on a
lost race the change is re-applied on the newer version when every label it removes is
still there with the same file, else CommitConflict names the labels and files.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from parquetry.dataset.commit import commit_after, now_iso
from parquetry.dataset.indexsinks import IndexSinks
from parquetry.dataset.intents import abandon_files, claim_for_commit
from parquetry.dataset.metadata import DatasetDocument
from parquetry.dataset.ops import apply_change, fit_concurrent_schema
from parquetry.dataset.versions import LoadedState
from parquetry.dataset.write import FileDescription
from parquetry.errors import CommitConflict

if TYPE_CHECKING:
    from parquetry.dataset.dataset import Dataset

__all__ = ["CheckAdded", "commit_rewrite"]

#: ``check_added(base, labels)``: called before committing on a newer version ``base`` with
#: the labels it has that this rewrite's version had not (files concurrent commits added);
#: raises (a CommitConflict) when they may change what the operation decided.
CheckAdded = Callable[[DatasetDocument, list[str]], None]


def _schema_after(base: DatasetDocument, schema: pa.Schema, merge: bool = False) -> pa.Schema:
    assert base.schema is not None
    if base.schema.equals(schema):
        return schema
    return fit_concurrent_schema(base, schema, merge=merge, what="rewrite")


def _gone(base: DatasetDocument, doc: DatasetDocument, removed: Sequence[str]) -> list[str]:
    """The labels of ``removed`` that ``base`` no longer has with the same file."""
    out = []
    for label in removed:
        now = base.partitions.get(label)
        if now is None or dict(now) != dict(doc.partitions[label]):
            out.append(label)
    return out


def _added(base: DatasetDocument, doc: DatasetDocument) -> list[str]:
    """The labels of ``base`` that ``doc`` does not have with the same file."""
    out = []
    for label, files in base.partitions.items():
        old = doc.partitions.get(label)
        if old is None or dict(old) != dict(files):
            out.append(label)
    return out


def commit_rewrite(
    ds: Dataset,
    removed: Sequence[str],
    added: list[FileDescription],
    operation: str,
    params: Mapping[str, str],
    recorded: Mapping[str, int],
    metadata: Mapping[str, Any] | None,
    max_retries: int | None,
    check_added: CheckAdded | None = None,
    index_sinks: IndexSinks | None = None,
) -> LoadedState:
    from parquetry.dataset.upsert_evolve import origin_of

    # A handle evolved by merge_schema (upsert_evolve) commits on the version it stands
    # for, so that the new version records the schema change (merged with a concurrent one).
    schema = ds.schema
    origin = origin_of(ds)
    evolving = origin is not ds
    store, doc = ds.store, origin.document
    remove = frozenset(removed)
    try:
        described = [(f.key, f.size, f.intent) for f in added]
        claim, work = claim_for_commit(store, doc.uuid, described, verify=False)
    except BaseException:
        abandon_files(store, doc.uuid, added)
        raise

    def make(base: DatasetDocument | None, number: int) -> DatasetDocument:
        assert base is not None
        if base is not doc:
            gone = _gone(base, doc, removed)
            if gone:
                keys = [doc.partitions[lbl][doc.tables[0]] for lbl in gone[:3]]
                raise CommitConflict(
                    f"dataset {doc.uuid!r}: a concurrent commit removed {len(gone)} of the "
                    f"files this {operation} rewrites or removes, e.g. {gone[:3]} "
                    f"(files {keys}); nothing is committed",
                    key=keys[0],
                )
            if check_added is not None:
                new_labels = _added(base, doc)
                if new_labels:
                    check_added(base, new_labels)
        new = apply_change(
            work,
            base,
            number=number,
            parent=number - 1,
            committed_at=now_iso(),
            operation=operation,
            schema=_schema_after(base, schema, merge=evolving),
            add=added,
            remove=remove,
            metadata=metadata,
            parameters=params,
            index_sinks=index_sinks,
        )
        assert new.version is not None
        return new.evolve(version=replace(new.version, extra=dict(recorded)))

    try:
        return commit_after(ds, doc, origin._number, make, max_retries=max_retries, claim=claim)
    except CommitConflict:
        # Known not committed: the files are nobody's.
        abandon_files(store, doc.uuid, added)
        raise
