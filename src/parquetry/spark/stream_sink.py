"""The Structured Streaming sink of the ``parquetry`` format: exactly-once micro-batches.

``df.writeStream.format("parquetry")`` hands each micro-batch to the batch writer's task side
(:class:`~parquetry.spark.writer.DatasetArrowWriter` / ``SnapshotArrowWriter``): tasks add
new, uniquely named files and report them. ``commit(messages, batchId)`` then commits them
once with ``txn=(query id, batchId)`` (:mod:`parquetry.dataset.txns`). The query id is the
``id`` in ``<checkpointLocation>/metadata``, which survives restarts (Spark's run id does
not). After a crash Spark replays every batch whose ``commits/<batchId>`` it had not
written, with the same id and the same rows (a replayable source): a batch parquetry had
already committed is then a no-op and its new files are deleted. So the dataset holds every
row exactly once, whether the driver died before, during or after the parquetry commit.

Option ``txnAppId`` replaces the query id (a checkpoint on a store parquetry cannot read).
Option ``autoCompact`` N compacts the partitions a batch wrote after every N-th batch
(``(batchId + 1) % N == 0``), in a commit of its own after the batch's.

Test hook: environment variable ``PARQUETRY_STREAM_PARK`` = ``<before|after>:<batchId>:<marker
file>`` makes the commit of that batch write the marker file and wait (to be killed) before
or after the parquetry commit (``tests/spark/test_stream_kill.py`` kills the driver there).
"""

from __future__ import annotations

import copy
import json
import os
import re
import time
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import WriterCommitMessage
from pyspark.sql.types import StructType

from parquetry.errors import InvalidArgument, ParquetryError
from parquetry.spark.options import SourceOptions
from parquetry.spark.writer import DatasetArrowWriter, SnapshotArrowWriter

try:  # pyspark >= 4.1: the Arrow stream writer (10,000-row batches, no per-row objects)
    from pyspark.sql.datasource import DataSourceStreamArrowWriter as _StreamWriterBase
except ImportError:  # pragma: no cover - pyspark 4.0
    _StreamWriterBase = None  # type: ignore[assignment,misc]

__all__ = [
    "PARK_ENV",
    "DatasetStreamWriter",
    "SnapshotStreamWriter",
    "query_id",
    "stream_writer",
]

PARK_ENV = "PARQUETRY_STREAM_PARK"


def query_id(options: SourceOptions) -> str:
    """The application id of a stream's commits: option ``txnAppId``, else the query id in
    ``<checkpointLocation>/metadata`` (a local path or a store URL).

    Raises:
        InvalidArgument: neither is available, or the metadata file holds no id.
    """
    if options.txn_app_id is not None:
        return options.txn_app_id
    location = options.checkpoint_location
    if not location:
        raise InvalidArgument(
            "a parquetry streaming write needs option 'checkpointLocation' (its query id makes "
            "replayed batches no-ops) or option 'txnAppId'"
        )
    try:
        raw = _read_metadata(location.rstrip("/"), options)
        value = json.loads(raw)["id"]
    except (OSError, ParquetryError, ValueError, KeyError, TypeError) as exc:
        raise InvalidArgument(
            f"cannot read the streaming query id from {location!r}/metadata ({exc}); give "
            "option 'txnAppId' instead",
            key=f"{location}/metadata",
        ) from None
    if not isinstance(value, str) or not value:
        raise InvalidArgument(f"{location!r}/metadata holds no query id", key=location)
    return value


def _read_metadata(location: str, options: SourceOptions) -> bytes:
    if "://" not in location or location.startswith("file:"):
        path = location.split("://", 1)[1] if "://" in location else location
        with open(os.path.join(path, "metadata"), "rb") as f:
            return f.read()
    from parquetry.store import open_store

    scheme = location.split("://", 1)[0]
    same = options.store_url.split("://", 1)[0] == scheme
    store = open_store(location, **(options.store_options if same else {}))
    return store.get("metadata")


def _park(point: str, batch_id: int) -> None:
    """The test hook (see the module docstring): signal, then wait to be killed."""
    spec = os.environ.get(PARK_ENV)
    if not spec:
        return
    where, batch, marker = spec.split(":", 2)
    if where != point or int(batch) != batch_id:
        return
    with open(marker, "w") as f:
        f.write(f"{point} {batch_id} {os.getpid()}\n")
    while True:
        time.sleep(1)


_Base: Any = _StreamWriterBase if _StreamWriterBase is not None else object


class DatasetStreamWriter(_Base):  # type: ignore[misc]
    """Appends each micro-batch to a kartothek-format dataset, exactly once."""

    def __init__(self, options: SourceOptions, schema: StructType, app_id: str) -> None:
        self.batch = DatasetArrowWriter(options, schema, False)
        self.app_id = app_id

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return self.batch.write(iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        files = self.batch._files(messages)
        _park("before", batchId)
        committed = self.batch.commit_files(files, (self.app_id, batchId))
        _park("after", batchId)
        every = self.batch.options.auto_compact
        if committed and files and every and (batchId + 1) % every == 0:
            _compact(self.batch.options, files)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        self.batch.abort(messages)


class SnapshotStreamWriter(_Base):  # type: ignore[misc]
    """Replaces a snapshot with each micro-batch (outputMode complete), exactly once."""

    def __init__(self, options: SourceOptions, schema: StructType, app_id: str) -> None:
        self.batch = SnapshotArrowWriter(options, schema, True)
        self.app_id = app_id

    def _of_batch(self, batch_id: int | None) -> SnapshotArrowWriter:
        """The batch writer of one micro-batch. Spark builds the stream writer anew for the
        tasks and for the commit (separate workers), so the write id is derived from the
        query id and the batch id (the tasks read it from Spark's local property); a batch
        replayed after a crash reuses it, and a switch already done for it is resumed."""
        writer = copy.copy(self.batch)
        app = re.sub(r"[^A-Za-z0-9._=-]", "_", self.app_id)[:120]
        writer.write_id = f"stream-{app}-b{batch_id if batch_id is not None else 'x'}"
        return writer

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return self._of_batch(_task_batch_id()).write(iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        _park("before", batchId)
        self._of_batch(batchId).commit_txn(messages, (self.app_id, batchId))
        _park("after", batchId)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        self._of_batch(batchId).abort(messages)


def _task_batch_id() -> int | None:
    """The micro-batch a task belongs to (Spark sets ``streaming.sql.batchId``)."""
    from pyspark import TaskContext

    context = TaskContext.get()
    raw = context.getLocalProperty("streaming.sql.batchId") if context is not None else None
    return int(raw) if raw is not None else None


def stream_writer(options: SourceOptions, schema: StructType, overwrite: bool) -> Any:
    """The stream writer for ``options``: a dataset (``outputMode("append")``) or a
    snapshot (``outputMode("complete")``: each batch replaces it).

    Raises:
        InvalidArgument: pyspark 4.0, an output mode the layout does not support, or no
            query id (see :func:`query_id`).
    """
    if _StreamWriterBase is None:  # pragma: no cover - pyspark 4.0
        raise InvalidArgument("the parquetry streaming sink needs pyspark >= 4.1")
    if options.layout == "snapshot":
        if not overwrite:
            raise InvalidArgument(
                'a parquetry snapshot stream needs outputMode("complete") (each batch '
                "replaces the snapshot); append to a dataset (layout=dataset) instead"
            )
        return SnapshotStreamWriter(options, schema, query_id(options))
    if overwrite:
        raise InvalidArgument(
            'a parquetry dataset stream supports outputMode("append") only; '
            'outputMode("complete") needs layout=snapshot'
        )
    return DatasetStreamWriter(options, schema, query_id(options))


def _compact(options: SourceOptions, files: list[Any]) -> None:
    """Compact the partitions ``files`` were written to (best effort: a conflict or a
    failure leaves the batch committed and the files as they are)."""
    from parquetry.dataset import Dataset
    from parquetry.dataset.replace import partitions_predicate

    assert options.dataset is not None
    try:
        dataset = Dataset.open(options.open_store(), options.dataset)
        dataset.compact(partitions=partitions_predicate(files, dataset.partition_keys))
    except ParquetryError:
        pass
