"""``ParquetryTable.upsert(source, on=[...])``: MERGE a DataFrame into a dataset with Spark.

The source's rows are never collected to the driver, only its **key columns** (the bound:
the driver holds the source's keys, e.g. about 80 MB for 10 million int64 keys, plus one
row number each):

1. Driver: the source's schema is checked like an append (``merge_schema`` as in
   :meth:`Dataset.upsert`); its keys are collected and checked (a duplicate key raises
   InvalidArgument naming it, before anything is written); the candidate files are chosen
   from them by the dataset layer (partition keys, the secondary index on a key, file
   statistics: :func:`parquetry.dataset.upsertkeys.candidate_labels`).
2. Spark job 1, one task per candidate: read the file's key columns, match them with the
   keys (broadcast): which source keys each file holds.
3. Spark job 2: the source is joined with the (key, file) pairs found, grouped by file;
   the task of a file reads it whole, replaces (``update``) or removes (``delete``) its
   matched rows and writes the result as new files of the same partition.
4. Spark job 3 (``when_not_matched="insert"``): the source rows whose key matched nothing
   (a NULL key never matches) are written as new files by the source's own tasks.
5. Driver: one commit through the rewrite engine (the Python API's conflict rules).

A failed job commits nothing; the files its tasks wrote are deleted by the failing task or
left to garbage collection.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from parquetry.dataset.rewrite import FileEdit
from parquetry.dataset.schema import cast_to_schema
from parquetry.dataset.staleread import base_reads
from parquetry.dataset.upsertkeys import (
    DATA_ROW,
    FILE_ROW,
    candidate_labels,
    check_on,
    key_table,
    match_rows,
    planned_file,
)
from parquetry.dataset.write import FileDescription, storage_schema
from parquetry.errors import InvalidArgument, ParquetryError
from parquetry.spark.operations import OpOutcome, _edit_file, _env, _outcome
from parquetry.spark.tableops import (
    SparkTaskFailed,
    TaskEnv,
    TaskResult,
    commit_results,
    engine_metrics,
    run_tasks,
    stale_base,
)

if TYPE_CHECKING:
    from parquetry.dataset import Dataset

__all__ = ["upsert"]

_LABEL = "__parquetry_label"
_RESULT = T.StructType([T.StructField("result", T.StringType(), False)])
WHEN_MATCHED = ("update", "delete", "ignore")
WHEN_NOT_MATCHED = ("insert", "ignore")


def _source_df(spark: SparkSession, source: Any) -> DataFrame:
    if isinstance(source, DataFrame):
        return source
    if isinstance(source, pa.Table):
        from parquetry.spark.types import arrow_to_spark_schema

        # parquetry's type mapping (a naive timestamp stays naive: TimestampNTZ).
        return spark.createDataFrame(source, schema=arrow_to_spark_schema(source.schema))
    raise InvalidArgument(
        f"upsert source must be a Spark DataFrame or a pyarrow Table, got {type(source).__name__}"
    )


def _target_schema(ds: Dataset, df: DataFrame, merge_schema: bool) -> pa.Schema:
    from parquetry.dataset.evolve import resolve_write_schema
    from parquetry.spark.types import spark_to_arrow_schema, utc_schema

    given = storage_schema(utc_schema(spark_to_arrow_schema(df.schema)))
    return resolve_write_schema(
        ds.uuid, ds.schema, given, merge=merge_schema, partition_on=ds.partition_keys
    )


def _keys(df: DataFrame, on: Sequence[str], target: pa.Schema) -> pa.Table:
    """The source's key columns on the driver, typed like the dataset's, numbered."""
    collected = df.select(*on).toArrow()
    typed = cast_to_schema(collected, pa.schema([target.field(c) for c in on]), where="upsert keys")
    return key_table(typed, on)


def _ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


def _from_ipc(data: bytes) -> pa.Table:
    return pa.ipc.open_stream(data).read_all()


def _scan_task(ds: Dataset, item: Any, env: TaskEnv) -> TaskResult:
    label, keys_bc, on = item
    keys = _from_ipc(keys_bc.value)
    file_keys = ds.read_file(planned_file(ds, label), columns=list(on))
    pairs = match_rows(file_keys, keys, on)
    rows = pairs.column(DATA_ROW).to_pylist()
    return TaskResult(label, bool(rows), rows_updated=pairs.num_rows, matched=tuple(rows))


def _merge_edit(source: pa.Table, on: Sequence[str], when_matched: str) -> Any:
    """The Python API's per-file MERGE: each matched dataset row is removed (``delete``)
    or becomes its source row (``update``)."""
    keys = key_table(source, on)

    def edit(label: str, table: pa.Table) -> FileEdit | None:
        pairs = match_rows(table.select(list(on)), keys, on)
        if pairs.num_rows == 0:
            return None
        gone = np.zeros(table.num_rows, dtype=bool)
        gone[pairs.column(FILE_ROW).to_numpy()] = True
        kept = table.filter(pa.array(~gone))
        if when_matched == "delete":
            return FileEdit(label=label, keep=kept, rows_removed=int(gone.sum()))
        new = source.take(pairs.column(DATA_ROW)).select(kept.schema.names).cast(kept.schema)
        return FileEdit(label, pa.concat_tables([kept, new]), rows_updated=pairs.num_rows)

    return edit


def _rewrite_group(env: TaskEnv, on: Sequence[str], when_matched: str) -> Any:
    def run(group: pa.Table) -> pa.Table:
        label = group.column(_LABEL)[0].as_py()
        ds = env.open()
        source = cast_to_schema(
            group.drop_columns([_LABEL]), ds.schema, where="upsert source", fill_missing=True
        )
        result = _edit_file(ds, label, _merge_edit(source, on, when_matched), env)
        return pa.table({"result": [result.to_json()]})

    return run


def _insert_batches(env: TaskEnv) -> Any:
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from parquetry.dataset.intents import abandon_files
        from parquetry.spark.writer import chunks_of_rows

        ds = env.open()
        written: list[FileDescription] = []
        rows = 0
        try:
            for chunk in chunks_of_rows(batches, 1_000_000):
                table = cast_to_schema(chunk, ds.schema, where="upsert source", fill_missing=True)
                written += ds._write(table, env.write_options(), merge_schema=False)[0]
                rows += table.num_rows
        except BaseException:
            with contextlib.suppress(ParquetryError):
                abandon_files(ds.store, ds.uuid, written)
            raise
        result = TaskResult("", False, kept=rows, files=tuple(f.to_json() for f in written))
        yield pa.RecordBatch.from_pydict({"result": [result.to_json()]})

    return run


def _collect(df: DataFrame, env: TaskEnv, what: str) -> list[TaskResult]:
    try:
        texts = [r["result"] for r in df.collect()]
    except Exception as exc:  # Spark's own exception types
        from parquetry.spark.tableops import _spark_message

        raise SparkTaskFailed(
            f"dataset {env.dataset!r}: a Spark task of the upsert ({what}) failed, nothing is "
            f"committed (files written by tasks are left to garbage collection): "
            f"{_spark_message(exc)}"
        ) from None
    return [TaskResult.from_json(t) for t in texts]


def upsert(
    spark: SparkSession,
    ds: Dataset,
    options: Mapping[str, str],
    source: Any,
    on: Sequence[str] | str,
    *,
    when_matched: str,
    when_not_matched: str,
    merge_schema: bool,
    parameters: Mapping[str, str],
    compression: str | None = None,
) -> OpOutcome:
    """MERGE ``source`` into ``ds`` (see the module docstring)."""
    from parquetry.dataset.upsert_evolve import evolved_for_write

    if when_matched not in WHEN_MATCHED:
        raise InvalidArgument(f"when_matched must be one of {WHEN_MATCHED}, got {when_matched!r}")
    if when_not_matched not in WHEN_NOT_MATCHED:
        raise InvalidArgument(
            f"when_not_matched must be one of {WHEN_NOT_MATCHED}, got {when_not_matched!r}"
        )
    keys_on = check_on(ds, [on] if isinstance(on, str) else list(on))
    df = _source_df(spark, source)
    target = _target_schema(ds, df, merge_schema)
    ds = evolved_for_write(ds, target)  # merge_schema: the commit records the new schema
    keys = _keys(df, keys_on, target)
    with base_reads(ds, "upsert"):  # collected under the plan or the jobs: BaseCollected
        found = candidate_labels(ds, keys, keys_on, keys.num_rows)
    env = replace(_env(ds, options, compression), schema=target)
    keys_bc = spark.sparkContext.broadcast(_ipc(keys))
    try:
        with stale_base(ds, found.labels, "upsert"):
            scanned = run_tasks(
                spark, env, [(label, keys_bc, keys_on) for label in found.labels], _scan_task
            )
    finally:
        keys_bc.unpersist()
    pairs = [(row, r.label) for r in scanned for row in r.matched]
    hit = np.zeros(keys.num_rows, dtype=bool)  # by position in ``keys``
    position = {row: i for i, row in enumerate(keys.column(DATA_ROW).to_pylist())}
    for row, _ in pairs:
        hit[position[row]] = True

    results: list[TaskResult] = []
    key_cols = [keys.column(c) for c in keys_on]
    if pairs and when_matched != "ignore":
        take = pa.array([position[row] for row, _ in pairs], pa.int64())
        routing = pa.table(
            {
                **{c: col.take(take) for c, col in zip(keys_on, key_cols, strict=True)},
                _LABEL: [label for _, label in pairs],
            }
        )
        routed = df.join(spark.createDataFrame(routing), on=list(keys_on), how="inner")
        out = routed.groupBy(_LABEL).applyInArrow(
            _rewrite_group(env, keys_on, when_matched), _RESULT
        )
        with stale_base(ds, found.labels, "upsert"):
            results += _collect(out, env, "rewriting matched files")
    inserted: list[TaskResult] = []
    if when_not_matched == "insert":
        matched = keys.filter(pa.array(hit)).select(list(keys_on))
        rest = df
        if matched.num_rows:
            rest = df.join(spark.createDataFrame(matched), on=list(keys_on), how="left_anti")
        out = rest.mapInArrow(_insert_batches(env), _RESULT)
        inserted = _collect(out, env, "inserting")
    added = [FileDescription.from_json(f) for r in inserted for f in r.files]
    given = {
        "rows_inserted": sum(r.kept for r in inserted),
        "rows_updated": 0,
        "rows_deleted": 0,
        "rows_copied": 0,
        "files_rewritten": 0,
    }
    metrics = engine_metrics(results, given)
    params = {
        "on": list(keys_on),
        "when_matched": when_matched,
        "when_not_matched": when_not_matched,
        "chosen_by": found.how,
        **parameters,
    }
    state = commit_results(
        ds, results, add=added, operation="upsert", parameters=params, metrics=metrics
    )
    return _outcome(ds, state, metrics)
