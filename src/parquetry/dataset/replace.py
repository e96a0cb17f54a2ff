"""Replacing the rows that match a predicate, in one commit (``replaceWhere``).

``commit_replace`` removes every row of the base version matching a kartothek DNF predicate
and adds new files: files whose rows all match are dropped, files with some matching rows
are rewritten with the others (new files, written before the commit point), files that
cannot match (partition values, secondary indices, statistics) are not read. Dynamic
partition overwrite is the special case whose predicate selects the written partitions,
decided on partition values alone (no file is read). Row-level deletes and updates can
reuse it: a delete is a replace with no new files.

A lost commit race is re-applied when the newer version has the same candidate files (those
that may match by partition values and statistics); otherwise a concurrent commit changed
the rows the predicate selects and this raises ``CommitConflict``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.dataset as pads

from parquetry.dataset.commit import MAX_RETRIES, commit_after, now_iso
from parquetry.dataset.intents import abandon_files, claim_for_commit
from parquetry.dataset.metadata import DatasetDocument
from parquetry.dataset.ops import apply_change, fit_concurrent_schema, partition_values_of
from parquetry.dataset.plan import make_plan
from parquetry.dataset.predicates import DNF, to_expression, validate_predicates
from parquetry.dataset.schema import cast_to_schema
from parquetry.dataset.staleread import base_reads
from parquetry.dataset.versions import LoadedState
from parquetry.dataset.write import FileDescription, iter_input
from parquetry.errors import CommitConflict, InvalidArgument, ReplaceConditionViolated
from parquetry.parquet import WriteOptions

if TYPE_CHECKING:
    from parquetry.dataset.dataset import Dataset

__all__ = [
    "ReplacePlan",
    "check_rows",
    "commit_replace",
    "describe_dnf",
    "partitions_predicate",
    "plan_replace",
    "replace_where",
]


def describe_dnf(dnf: DNF) -> str:
    """A DNF as readable text, for messages: ``(a == 1 AND b IS NULL) OR (...)``."""

    def lit(c: Any) -> str:
        if c.op in ("is null", "is not null"):
            return f"{c.column} {c.op.upper()}"
        value = list(c.value) if c.op == "in" else c.value
        return f"{c.column} {c.op.upper() if c.op == 'in' else c.op} {value!r}"

    return " OR ".join("(" + " AND ".join(lit(c) for c in conj) + ")" for conj in dnf)


def row_mask(table: pa.Table, dnf: DNF) -> pa.Array:
    """True where a row satisfies ``dnf`` (a null comparison is not satisfied)."""
    import pyarrow.compute as pc

    if table.num_rows == 0:
        return pa.array([], pa.bool_())
    out = pads.dataset(table).to_table(columns={"m": to_expression(dnf)}, use_threads=False)
    return pc.fill_null(out.column("m").combine_chunks(), False)


def check_rows(
    table: pa.Table, dnf: DNF, *, condition: str, where: str, row_offset: int = 0
) -> None:
    """Refuse rows that do not satisfy the replace condition (Delta's "does not conform").

    Raises:
        ReplaceConditionViolated: naming the condition, how many rows fail and the first.
    """
    import pyarrow.compute as pc

    mask = row_mask(table, dnf)
    bad = len(mask) - pc.sum(mask).as_py() if len(mask) else 0
    if bad:
        first = pc.index(mask, False).as_py()
        row = {k: v[0] for k, v in table.slice(first, 1).to_pydict().items()}
        raise ReplaceConditionViolated(
            f"Written data does not conform to the replace condition {condition}: {bad} of "
            f"{table.num_rows} rows of {where} do not satisfy it, e.g. row "
            f"{row_offset + first}: {row}",
            predicate=condition,
        )


def partitions_predicate(
    files: Sequence[FileDescription], partition_keys: Sequence[str]
) -> list[list[tuple[str, str, Any]]] | None:
    """The DNF selecting exactly the partitions ``files`` were written to (dynamic overwrite).

    ``None`` for an unpartitioned dataset: it is one partition, so (as Spark's dynamic
    overwrite of an unpartitioned table) everything is replaced; callers overwrite it whole.
    """
    if not partition_keys:
        return None
    seen: dict[tuple[tuple[str, Any], ...], None] = {}
    for f in files:
        seen.setdefault(tuple(f.partition), None)
    return [
        [(k, "is null", None) if v is None else (k, "==", v) for k, v in partition]
        for partition in seen
    ]


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplacePlan:
    """What a replace does to its base version."""

    remove: frozenset[str]  # labels whose rows all match (dropped) or some match (rewritten)
    kept: pa.Table | None  # the non-matching rows of partly matching files, to write anew
    candidates: frozenset[str]  # labels that may match by partition values and statistics


def _candidates(doc: DatasetDocument, schema: pa.Schema, dnf: DNF) -> frozenset[str]:
    values = partition_values_of(doc, schema, {})
    plan = make_plan(doc, schema, dnf, values, {}, version=None, requests=0, request_keys=())
    return frozenset(f.label for f in plan.files)


def _only_partition_keys(dnf: DNF, keys: Sequence[str]) -> bool:
    return all(lit.column in keys for conj in dnf for lit in conj)


def plan_replace(ds: Dataset, dnf: DNF) -> ReplacePlan:
    """Which files of ``ds`` lose rows to ``dnf``, reading only those that may partly match."""
    keys = ds.partition_keys
    candidates = _candidates(ds.document, ds.schema, dnf)
    planned = ds.plan([[lit.as_tuple() for lit in conj] for conj in dnf]).files
    if _only_partition_keys(dnf, keys):
        # The plan evaluated every literal on partition values exactly: all rows match.
        return ReplacePlan(
            remove=frozenset(p.label for p in planned), kept=None, candidates=candidates
        )
    remove: set[str] = set()
    kept: list[pa.Table] = []
    for planned_file in planned:
        table = ds.read_file(planned_file)
        mask = row_mask(table, dnf)
        matching = mask.true_count
        if matching == 0:
            continue
        remove.add(planned_file.label)
        if matching < table.num_rows:
            import pyarrow.compute as pc

            kept.append(table.filter(pc.invert(mask)))
    return ReplacePlan(
        remove=frozenset(remove),
        kept=pa.concat_tables(kept) if kept else None,
        candidates=candidates,
    )


def _schema_after(base: DatasetDocument, schema: pa.Schema) -> pa.Schema:
    """The schema of the replace's version on ``base``: ``base``'s own when a concurrent
    commit evolved it to one the replace's files (written in ``schema``) fit; committing
    ``schema`` there would drop the other writer's columns while its files still hold them.

    Raises:
        CommitConflict: the concurrent schema change does not take the replace's files.
    """
    assert base.schema is not None
    if base.schema.equals(schema):
        return schema
    return fit_concurrent_schema(base, schema, merge=False, what="replace")


def commit_replace(
    ds: Dataset,
    predicates: Any,
    files: Sequence[FileDescription],
    *,
    operation: str = "replace",
    metadata: Mapping[str, Any] | None = None,
    write_options: WriteOptions | None = None,
    max_retries: int | None = MAX_RETRIES,
    verify_files: bool = True,
    parameters: Mapping[str, Any] | None = None,
) -> LoadedState:
    """Commit ``files`` after ``ds``, removing every row of ``ds`` matching ``predicates``.

    ``files`` must already satisfy the predicate (see :func:`check_rows`); this does not
    read them. Rewritten files are deleted again when the commit is known not to happen.

    Raises:
        CommitConflict: a concurrent commit changed the files that may match.
    """
    dnf = validate_predicates(predicates, ds.schema)
    if dnf is None:
        raise InvalidArgument("a replace needs a predicate (kartothek DNF)")
    from parquetry.dataset.transact import string_parameters

    params = {"predicate": describe_dnf(dnf), **string_parameters(parameters)}
    # A file (or index piece) of the base version collected meanwhile: a stale base, a
    # conflict like a lost race (the caller's ``files`` stay its own), not VersionExpired.
    with base_reads(ds, operation):
        planned = plan_replace(ds, dnf)
    rewritten = (
        ds._write(planned.kept, write_options, merge_schema=False)[0]
        if planned.kept is not None
        else []
    )
    added = [*files, *rewritten]
    store, doc = ds.store, ds.document
    assert doc.schema is not None
    schema = doc.schema
    try:
        described = [(f.key, f.size, f.intent) for f in added]
        claim, work = claim_for_commit(store, doc.uuid, described, verify=verify_files)

        def make(base: DatasetDocument | None, number: int) -> DatasetDocument:
            assert base is not None
            target = _schema_after(base, schema)
            if base is not doc and _candidates(base, schema, dnf) != planned.candidates:
                raise CommitConflict(
                    f"dataset {doc.uuid!r}: a concurrent commit changed the files that may "
                    f"hold rows matching the replace condition {describe_dnf(dnf)}"
                )
            missing = planned.remove - set(base.partitions)
            if missing:
                raise CommitConflict(
                    f"dataset {doc.uuid!r}: a concurrent commit removed {sorted(missing)[:3]}, "
                    "which this replace rewrites"
                )
            return apply_change(
                work,
                base,
                number=number,
                parent=number - 1,
                committed_at=now_iso(),
                operation=operation,
                schema=target,
                add=added,
                remove=set(planned.remove),
                metadata=metadata,
                parameters=params,
            )

        return commit_after(ds, doc, ds._number, make, max_retries=max_retries, claim=claim)
    except CommitConflict:
        abandon_files(store, doc.uuid, rewritten)
        raise


def _conforming(
    in_schema: pa.Schema,
    batches: Iterator[pa.RecordBatch],
    schema: pa.Schema,
    dnf: DNF,
    condition: str,
    uuid: str,
) -> Iterator[pa.RecordBatch]:
    """``batches``, each checked against the condition in the dataset's types first."""
    seen = 0
    for batch in batches:
        if batch.num_rows == 0:
            continue
        typed = cast_to_schema(
            pa.Table.from_batches([batch], schema=in_schema),
            schema,
            where=f"writing {uuid}",
            row_offset=seen,
        )
        check_rows(typed, dnf, condition=condition, where=f"the data for {uuid!r}", row_offset=seen)
        seen += batch.num_rows
        yield batch


def replace_where(
    ds: Dataset,
    predicates: Any,
    data: Any = None,
    *,
    write_options: WriteOptions | None = None,
    operation: str = "replace",
) -> LoadedState:
    """The body of :meth:`Dataset.replace_where` (see there)."""
    dnf = validate_predicates(predicates, ds.schema)
    if dnf is None:
        raise InvalidArgument("replace_where needs a predicate (kartothek DNF)")
    files: list[FileDescription] = []
    if data is not None:
        in_schema, batches = iter_input(data)
        # Checked while streaming, before each batch is buffered for writing: a table that
        # fits in one write buffer is refused before any file is written.
        checked = _conforming(in_schema, batches, ds.schema, dnf, describe_dnf(dnf), ds.uuid)
        reader = pa.RecordBatchReader.from_batches(in_schema, checked)
        files, _ = ds._write(reader, write_options, merge_schema=False)
    return commit_replace(
        ds, predicates, files, operation=operation, write_options=write_options, verify_files=False
    )
