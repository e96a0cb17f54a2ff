"""``delete_where``, ``update_where`` and ``compact`` of a ParquetryTable as Spark jobs.

Planned on the driver, one Spark task per file (per bin for ``compact``), committed once on
the driver (see :mod:`parquetry.spark.tableops`). The per-file decisions are the Python
API's (:mod:`parquetry.dataset.rowops`, :mod:`parquetry.dataset.compact`), so both give the
same rows and record the same operation, parameters and metrics (plus ``engine=spark``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from parquetry.dataset.rowops import (
    checked_set,
    delete_edit,
    delete_targets,
    dnf_as_tuples,
    required_dnf,
    set_parameter,
    update_edit,
)
from parquetry.dataset.staleread import base_reads
from parquetry.dataset.upsertkeys import planned_file
from parquetry.dataset.write import FileDescription
from parquetry.spark.tableops import (
    TaskEnv,
    TaskResult,
    commit_results,
    dnf_of,
    engine_metrics,
    run_tasks,
    set_values,
    stale_base,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from parquetry.dataset import Dataset

__all__ = ["OpOutcome", "compact", "delete_where", "update_where"]


@dataclass(frozen=True)
class OpOutcome:
    """What a Spark table operation did: the version after it (the same when nothing was
    committed) and the metrics it recorded."""

    version: int
    committed: bool
    metrics: Mapping[str, int]


def _env(ds: Dataset, options: Mapping[str, str], compression: str | None) -> TaskEnv:
    # A state kartothek wrote last has no parquetry version of its own: tasks open the
    # newest state; labels name immutable files, and the commit checks they are still there.
    version = None if ds._foreign else ds.version
    return TaskEnv(dict(options), ds.uuid, version, compression)


def _edit_file(ds: Dataset, label: str, edit: Any, env: TaskEnv) -> TaskResult:
    table = ds.read_file(planned_file(ds, label))
    decided = edit(label, table)
    del table
    if decided is None:
        return TaskResult(label, False)
    keep = decided.keep
    kept = keep.num_rows if keep is not None else 0
    files = ds._write(keep, env.write_options(), merge_schema=False)[0] if kept else []
    return TaskResult(
        label,
        True,
        decided.rows_removed,
        decided.rows_updated,
        kept,
        tuple(f.to_json() for f in files),
    )


def _delete_task(ds: Dataset, item: Any, env: TaskEnv) -> TaskResult:
    label, predicates = item
    return _edit_file(ds, label, delete_edit(required_dnf(ds, predicates, "delete_where")), env)


def _update_task(ds: Dataset, item: Any, env: TaskEnv) -> TaskResult:
    label, predicates, assignments = item
    edit = update_edit(ds, required_dnf(ds, predicates, "update_where"), assignments)
    return _edit_file(ds, label, edit, env)


def _outcome(ds: Dataset, state: Any, metrics: Mapping[str, int]) -> OpOutcome:
    if state is None:
        return OpOutcome(ds.version, False, dict(metrics))
    return OpOutcome(state.number, True, dict(state.doc.version.extra))


def delete_where(
    spark: SparkSession,
    ds: Dataset,
    options: Mapping[str, str],
    condition: Any,
    parameters: Mapping[str, str],
    compression: str | None = None,
) -> OpOutcome:
    """Delete the rows matching ``condition`` (Spark SQL string or DNF); see the module."""
    from parquetry.dataset.replace import describe_dnf

    dnf = required_dnf(ds, dnf_of(ds, condition, "delete_where"), "delete_where")
    # The base collected under the plan or the tasks: BaseCollected, as in the Python API.
    with base_reads(ds, "delete_where"):
        read, drop, dropped_rows = delete_targets(ds, dnf)
    predicates = dnf_as_tuples(dnf)
    env = _env(ds, options, compression)
    with stale_base(ds, read, "delete_where"):
        results = run_tasks(spark, env, [(label, predicates) for label in read], _delete_task)
    given = {"rows_deleted": dropped_rows, "rows_copied": 0, "files_rewritten": 0}
    metrics = engine_metrics(results, given)
    state = commit_results(
        ds,
        results,
        drop=drop,
        operation="delete",
        parameters={"predicate": describe_dnf(dnf), **parameters},
        metrics=metrics,
    )
    return _outcome(ds, state, metrics)


def update_where(
    spark: SparkSession,
    ds: Dataset,
    options: Mapping[str, str],
    condition: Any,
    assignments: Mapping[str, Any],
    parameters: Mapping[str, str],
    compression: str | None = None,
) -> OpOutcome:
    """Set columns of the rows matching ``condition``; ``set`` values checked first."""
    from parquetry.dataset.replace import describe_dnf

    dnf = required_dnf(ds, dnf_of(ds, condition, "update_where"), "update_where")
    checked = checked_set(ds, set_values(ds, assignments))
    predicates = dnf_as_tuples(dnf)
    with base_reads(ds, "update_where"):
        labels = [f.label for f in ds.plan(predicates).files]
    env = _env(ds, options, compression)
    items = [(label, predicates, checked) for label in labels]
    with stale_base(ds, labels, "update_where"):
        results = run_tasks(spark, env, items, _update_task)
    metrics = engine_metrics(results, {"rows_updated": 0, "rows_copied": 0, "files_rewritten": 0})
    state = commit_results(
        ds,
        results,
        operation="update_where",
        parameters={
            "predicate": describe_dnf(dnf),
            "set": set_parameter(checked),
            **parameters,
        },
        metrics=metrics,
    )
    return _outcome(ds, state, metrics)


def _compact_task(ds: Dataset, item: Any, env: TaskEnv) -> TaskResult:
    from parquetry.dataset.compact_write import BinWriter
    from parquetry.dataset.encrypted import write_options_for
    from parquetry.parquet import WriteOptions

    b, sort_by, target = item
    opts = write_options_for(ds.uuid, ds.document.encryption, env.write_options(), ds._decryption)
    writer = BinWriter(
        ds.store,
        ds.uuid,
        ds.document.tables[0],
        ds.schema,
        ds.partition_keys,
        ds.secondary_indices,
        opts or WriteOptions(),
        ds._decryption,
        sort_by,
        target=target,
    )
    out = writer.write(b.partition, b.files)
    return TaskResult("", False, files=(out.to_json(),))


def compact(
    spark: SparkSession,
    ds: Dataset,
    options: Mapping[str, str],
    *,
    target_file_size: int,
    partitions: Any,
    sort_by: Any,
    min_files: int,
    parameters: Mapping[str, str],
    compression: str | None = None,
) -> tuple[OpOutcome, Any]:
    """Bin-pack small files, one Spark task per output file; (outcome, the plan)."""
    from parquetry.dataset.compact import compaction_metrics, sort_keys
    from parquetry.dataset.compact_plan import plan_compaction
    from parquetry.dataset.predicates import validate_predicates
    from parquetry.dataset.replace import describe_dnf

    keys = sort_keys(ds, sort_by)
    dnf = dnf_of(ds, partitions, "compact") if partitions is not None else None
    plan = plan_compaction(
        ds, target_file_size=target_file_size, partitions=dnf, min_files=min_files
    )
    if not plan.bins:
        return OpOutcome(ds.version, False, {}), plan
    env = _env(ds, options, compression)
    items = [(b, keys, plan.target_file_size) for b in plan.bins]
    results = run_tasks(spark, env, items, _compact_task)
    outputs = [FileDescription.from_json(f) for r in results for f in r.files]
    params = {"target_file_size": str(plan.target_file_size), "min_files": str(min_files)}
    checked = validate_predicates(dnf, ds.schema) if dnf else None
    if checked:
        params["partitions"] = describe_dnf(checked)
    if keys:
        params["sort_by"] = ", ".join(
            f"{c} {'ASC' if o == 'ascending' else 'DESC'}" for c, o in keys
        )
    metrics = compaction_metrics(plan, outputs)
    state = commit_results(
        ds,
        [],
        drop=sorted(plan.labels),
        add=outputs,
        operation="compact",
        parameters={**params, **parameters},
        metrics=metrics,
    )
    return _outcome(ds, state, metrics), plan
