"""Stage the parts of a write: encode and upload them concurrently under the staging prefix.

Nothing here touches a committed dataset: staged files live in
``{key}/_staging/{write_id}/`` until :mod:`parquetry.snapshot.switch` moves them into place.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait

import pyarrow as pa

from parquetry.errors import NotFound
from parquetry.parquet.options import WriteOptions
from parquetry.snapshot.encode import encode_batches, encode_table
from parquetry.snapshot.inputs import ArrowInput, split_stream, split_table
from parquetry.snapshot.layout import staged_key
from parquetry.snapshot.manifest import StagedPart, schema_hash
from parquetry.store.base import Store

__all__ = ["PartStager", "staged_name"]

_PUT_ATTEMPTS = 3


def staged_name(index: int) -> str:
    """Name of the ``index``-th part staged by ``write_dataset``."""
    return f"{index:05d}.parquet"


class PartStager:
    """Encodes and uploads the parts of one write (``key``, ``write_id``)."""

    def __init__(
        self,
        store: Store,
        key: str,
        write_id: str,
        options: WriteOptions,
        *,
        max_workers: int,
        target: Callable[[str], str] | None = None,
    ):
        self.store = store
        self.key = key
        self.write_id = write_id
        self.options = options
        self.max_workers = max_workers
        # Where a part named ``name`` goes: the staging area unless told otherwise.
        self.target = target or (lambda name: staged_key(key, write_id, name))

    def stage_table(self, name: str, table: pa.Table) -> StagedPart:
        """Encode one whole table as one staged part."""
        target = self.target(name)
        data = encode_table(table, self.options, where=target)
        return self._upload(name, target, data, table.num_rows, table.schema)

    def stage_batches(
        self, name: str, schema: pa.Schema, batches: Iterator[pa.RecordBatch]
    ) -> StagedPart:
        """Stream batches into one staged part (one row group of Arrow data held at a time)."""
        target = self.target(name)
        data, rows = encode_batches(schema, batches, self.options, where=target)
        return self._upload(name, target, data, rows, schema)

    def stage_input(self, source: ArrowInput, max_rows: int | None) -> list[StagedPart]:
        """Stage every part of ``source``: at most ``max_rows`` rows each, in order."""
        if source.table is not None:
            tasks = [
                _bind(self.stage_table, staged_name(i), part)
                for i, part in enumerate(split_table(source.table, max_rows))
            ]
            return _run_bounded(iter(tasks), self.max_workers, self.max_workers)
        assert source.batches is not None
        if max_rows is None:
            return [self.stage_batches(staged_name(0), source.schema, source.batches)]
        parts = split_stream(source.batches, max_rows)
        stream_tasks = (
            _bind(self.stage_table, staged_name(i), pa.Table.from_batches(batches, source.schema))
            for i, batches in enumerate(parts)
        )
        # One part encodes while the next one fills: about two parts of Arrow data in memory.
        staged = _run_bounded(stream_tasks, 1, self.max_workers)
        if not staged:  # an empty stream is still a dataset: one empty part
            return [self.stage_table(staged_name(0), source.schema.empty_table())]
        return staged

    def _upload(
        self, name: str, target: str, data: pa.Buffer, rows: int, schema: pa.Schema
    ) -> StagedPart:
        # Unsigned bytes view: zero-copy for every backend (obstore rejects format "b").
        view = memoryview(data).cast("B")
        for attempt in range(_PUT_ATTEMPTS):
            try:
                self.store.put(target, view)
                break
            except NotFound:
                # LocalStore: another write's cleanup can prune the empty staging directory
                # between this put creating it and writing into it; the put is then safe
                # to repeat.
                if attempt == _PUT_ATTEMPTS - 1:
                    raise
        return StagedPart(name=name, rows=rows, size=data.size, schema_hash=schema_hash(schema))


def _bind(
    fn: Callable[[str, pa.Table], StagedPart], name: str, table: pa.Table
) -> Callable[[], StagedPart]:
    return lambda: fn(name, table)


def _run_bounded(
    tasks: Iterator[Callable[[], StagedPart]], in_flight: int, max_workers: int
) -> list[StagedPart]:
    """Run tasks on a pool with at most ``in_flight`` pending; results in task order.

    Tasks are pulled from the iterator only when a slot is free, so a lazy iterator (a
    stream being cut into parts) never runs ahead of the encoders. The first error cancels
    what has not started and is raised once the running tasks have finished.
    """
    results: list[StagedPart] = []
    pending: deque[Future[StagedPart]] = deque()
    with ThreadPoolExecutor(max_workers=max(1, min(max_workers, in_flight))) as pool:
        try:
            for task in tasks:
                while len(pending) >= in_flight:
                    results.append(pending.popleft().result())
                pending.append(pool.submit(task))
                done, _ = wait(pending, timeout=0, return_when=FIRST_EXCEPTION)
                for future in done:
                    future.result()  # raise early; the finally block cancels the rest
            while pending:
                results.append(pending.popleft().result())
        finally:
            for future in pending:
                future.cancel()
    return results
