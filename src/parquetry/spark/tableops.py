"""Table operations of :class:`~parquetry.spark.handle.ParquetryTable`, run as Spark jobs.

Each operation is three steps (docs/spark.md, "Table operations"):

1. **Plan on the driver** with the dataset layer, on one version ``V``: which files a
   ``delete_where`` / ``update_where`` reads (``Dataset.plan``: partition values, indices,
   statistics; a file whose partition values alone match a delete is dropped unread), which
   bins a ``compact`` writes (``plan_compaction``). Arguments are checked here, before any
   task runs (an unknown column, a lossy ``set`` value: nothing is written).
2. **Rewrite in Spark tasks**, one task per file (per bin for ``compact``): the task opens
   the dataset at ``V``, reads its file, applies the same per-file edit as the Python API
   (:mod:`parquetry.dataset.rowops`), writes the rows kept as new files of the same
   partition (under write intents) and returns their descriptions. A task that fails
   deletes what it wrote; files of a retried or failed attempt that could not be deleted
   are left to garbage collection (their intents say so).
3. **Commit once on the driver** through the rewrite engine
   (:func:`parquetry.dataset.rewrite.rewrite_files`: the edited labels removed, the task
   outputs added): the conflict rules of the Python API (re-applied on a newer version
   unless a concurrent commit removed one of these files: then CommitConflict, the outputs
   deleted). If the job fails, nothing is committed and the outputs of the tasks that
   finished are left to GC: the dataset stays at ``V``.

Memory: a task holds one file decoded plus its output (the rewrite engine's bound per
file); the driver holds the plan and the file descriptions (a few hundred bytes a file).
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql import Column, SparkSession

from parquetry.dataset.write import FileDescription
from parquetry.errors import InvalidArgument, ParquetryError
from parquetry.parquet import WriteOptions

if TYPE_CHECKING:
    from parquetry.dataset import Dataset
    from parquetry.dataset.versions import LoadedState

__all__ = [
    "SparkTaskFailed",
    "TaskEnv",
    "TaskResult",
    "commit_results",
    "dnf_of",
    "run_tasks",
    "set_values",
    "stale_base",
]

#: Spark tasks at most per job (files are dealt out evenly beyond that).
MAX_TASKS = 10_000


class SparkTaskFailed(ParquetryError):
    """A Spark job of a table operation failed; nothing was committed."""


@dataclass(frozen=True)
class TaskEnv:
    """What a task needs to open the dataset at the planned version (pickled to workers)."""

    options: Mapping[str, str]  # the table's Spark options (store URL + store options)
    dataset: str
    version: int | None  # None: the newest (see operations._env)
    compression: str | None = None
    #: The schema the operation writes when it evolves the dataset's (upsert merge_schema).
    schema: pa.Schema | None = None

    def open(self) -> Dataset:
        from parquetry.dataset import Dataset
        from parquetry.dataset.upsert_evolve import evolved_for_write
        from parquetry.spark.options import SourceOptions

        store = SourceOptions.parse({**self.options, "dataset": self.dataset}).open_store()
        ds = Dataset.open(store, self.dataset, version=self.version)
        return ds if self.schema is None else evolved_for_write(ds, self.schema)

    def write_options(self) -> WriteOptions | None:
        return None if self.compression is None else WriteOptions(compression=self.compression)


@dataclass(frozen=True)
class TaskResult:
    """What one task did to one file (or bin), as the driver needs it to commit."""

    label: str
    changed: bool
    rows_removed: int = 0
    rows_updated: int = 0
    kept: int = 0
    files: tuple[dict[str, Any], ...] = field(default=())
    #: Source row numbers a file holds (upsert's key scan).
    matched: tuple[int, ...] = field(default=())

    def to_json(self) -> str:
        return json.dumps(
            {
                "label": self.label,
                "changed": self.changed,
                "rows_removed": self.rows_removed,
                "rows_updated": self.rows_updated,
                "kept": self.kept,
                "files": list(self.files),
                "matched": list(self.matched),
            }
        )

    @classmethod
    def from_json(cls, text: str) -> TaskResult:
        d = json.loads(text)
        return cls(
            d["label"],
            d["changed"],
            d["rows_removed"],
            d["rows_updated"],
            d["kept"],
            tuple(d["files"]),
            tuple(d.get("matched", ())),
        )


#: ``task(ds, item) -> TaskResult``: the work of one item, run in a Spark task; it writes
#: through ``ds`` and its files are deleted if a later item of the same task fails.
Task = Callable[["Dataset", Any, TaskEnv], TaskResult]


def _run_partition(env: TaskEnv, task: Task, items: Iterable[Any]) -> Iterator[str]:
    from parquetry.dataset.intents import abandon_files

    ds = env.open()
    written: list[FileDescription] = []
    out: list[str] = []
    try:
        for item in items:
            result = task(ds, item, env)
            written += [FileDescription.from_json(f) for f in result.files]
            out.append(result.to_json())
    except BaseException:
        # This attempt's files are nobody's: delete them now (GC covers a failed delete).
        with contextlib.suppress(ParquetryError):
            abandon_files(ds.store, ds.uuid, written)
        raise
    return iter(out)


def _spark_message(exc: BaseException) -> str:
    text = str(exc)
    for line in text.splitlines():
        if "parquetry.errors." in line or "Error:" in line:
            return line.strip()[:500]
    return text.splitlines()[0][:500] if text else type(exc).__name__


def run_tasks(
    spark: SparkSession, env: TaskEnv, items: Sequence[Any], task: Task
) -> list[TaskResult]:
    """Run ``task`` on each item in Spark tasks (one item per task up to MAX_TASKS); the
    results in the order of ``items``.

    Raises:
        SparkTaskFailed: the job failed (after Spark's retries); the message quotes the
            task's error. Nothing is committed by this function.
    """
    if not items:
        return []
    slices = min(len(items), MAX_TASKS)
    rdd = spark.sparkContext.parallelize(list(items), slices)
    try:
        texts = rdd.mapPartitions(lambda it: _run_partition(env, task, it)).collect()
    except Exception as exc:  # Py4JJavaError / PythonException: Spark's, not ours
        raise SparkTaskFailed(
            f"dataset {env.dataset!r}: a Spark task failed, nothing is committed (the dataset "
            f"stays at version {env.version}; files written by tasks are left to garbage "
            f"collection): {_spark_message(exc)}"
        ) from None
    return [TaskResult.from_json(t) for t in texts]


#: A parquetry error class a task's error text names (``parquetry.errors.InvalidFormat: ...``).
_TASK_ERROR = re.compile(r"\bparquetry\.[\w.]*?\.(\w+):")
#: Any other Python error class it names (``ModuleNotFoundError: ...``, ``MemoryError: ...``).
_OTHER_ERROR = re.compile(r"(?<![\w.])([A-Z]\w*Error):")
#: What a task raises when garbage collection collected its base version under it: the
#: version is a tombstone, a file or index piece is gone (or the task said so itself; a
#: chained FileNotFoundError may be the line quoted).
_COLLECTED_ERRORS = frozenset(
    {
        "BaseCollected",
        "DataFileMissing",
        "DatasetNotFound",
        "FileNotFoundError",
        "MetadataCorrupted",
        "NotFound",
        "VersionExpired",
    }
)


@contextlib.contextmanager
def stale_base(ds: Dataset, labels: Sequence[str], operation: str) -> Iterator[None]:
    """Around the Spark jobs of a row operation that read the files of ``labels`` at
    ``ds``'s version: a job that failed because garbage collection collected that version
    meanwhile raises :class:`~parquetry.dataset.staleread.BaseCollected` (a CommitConflict:
    run it again), as the Python API does, not SparkTaskFailed quoting the task's
    VersionExpired. The task's error reaches the driver as text only: the store is asked,
    unless the text names only errors garbage collection does not cause (a damaged file's
    InvalidFormat, a worker's ModuleNotFoundError while GC expired the version: still
    SparkTaskFailed, naming it)."""
    try:
        yield
    except SparkTaskFailed as failed:
        from parquetry.dataset.staleread import collected_base

        text = str(failed)
        quoted = set(_TASK_ERROR.findall(text)) | set(_OTHER_ERROR.findall(text))
        if quoted and not quoted & _COLLECTED_ERRORS:
            # The task named another error (a damaged file, a worker missing a module...):
            # garbage collection did not cause it.
            raise
        collected = collected_base(ds, labels, operation)
        if collected is None:
            raise
        raise collected from failed


def engine_metrics(results: Sequence[TaskResult], given: Mapping[str, int]) -> dict[str, int]:
    """The counts the rewrite engine records for these edits (only the non-zero ones), plus
    ``given`` (always recorded): the same metrics as the Python API's."""
    counts = {"rows_deleted": 0, "rows_updated": 0, "rows_copied": 0, "files_rewritten": 0}
    for r in results:
        if not r.changed:
            continue
        counts["rows_deleted"] += r.rows_removed
        counts["rows_updated"] += r.rows_updated
        counts["rows_copied"] += max(r.kept - r.rows_updated, 0)
        counts["files_rewritten"] += 1 if r.kept else 0
    out = {k: v for k, v in counts.items() if v}
    for key, value in given.items():
        out[key] = out.get(key, 0) + value
    return out


def _unused_edit(label: str, table: pa.Table) -> None:  # nothing is read by the commit
    return None


def commit_results(
    ds: Dataset,
    results: Sequence[TaskResult],
    *,
    drop: Sequence[str] = (),
    add: Sequence[FileDescription] = (),
    operation: str,
    parameters: Mapping[str, Any],
    metrics: Mapping[str, int],
) -> LoadedState | None:
    """Commit what the tasks did, once, through the rewrite engine (its conflict rules; it
    deletes the files when the commit is known not to happen); None if nothing changed."""
    from parquetry.dataset.rewrite import rewrite_files

    removed = [r.label for r in results if r.changed and r.label]
    files = [FileDescription.from_json(f) for r in results for f in r.files] + list(add)
    if not removed and not drop and not files:
        return None
    return rewrite_files(
        ds,
        (),
        _unused_edit,
        drop=[*drop, *removed],
        add=files,
        operation=operation,
        parameters=parameters,
        metrics=metrics,
    )


def dnf_of(ds: Dataset, condition: Any, what: str) -> Any:
    """A Spark SQL condition string (or kartothek DNF as is), typed for ``ds``'s columns."""
    from parquetry.spark.condition import typed_condition

    if isinstance(condition, Column):
        raise InvalidArgument(
            f'{what}: give the condition as a Spark SQL string (e.g. "id > 3") or kartothek '
            "DNF; a Column cannot be evaluated by parquetry's tasks"
        )
    if not isinstance(condition, str):
        return condition
    try:
        return typed_condition(condition, ds.schema)
    except InvalidArgument as exc:
        raise InvalidArgument(
            str(exc).replace("option 'replaceWhere'", f"{what} condition")
        ) from None


def set_values(ds: Dataset, assignments: Mapping[str, Any]) -> dict[str, Any]:
    """``set`` values as the dataset layer takes them: a string is a Spark SQL expression
    (:mod:`parquetry.spark.setexpr`), a Column is refused, anything else is a literal."""
    from parquetry.spark.setexpr import parse_set_value

    if not isinstance(assignments, Mapping):
        raise InvalidArgument(f"update_where needs set={{column: value}}, got {assignments!r}")
    out: dict[str, Any] = {}
    for column, value in assignments.items():
        t = ds.schema.field(column).type if column in ds.schema.names else None
        if isinstance(value, Column):
            raise InvalidArgument(
                f"update_where: the value of {column!r} is a Column; give a Spark SQL "
                'expression string (e.g. "price * 2") or a Python value'
            )
        out[column] = parse_set_value(value, t) if isinstance(value, str) else value
    return out
