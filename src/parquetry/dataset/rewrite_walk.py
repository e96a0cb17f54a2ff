"""The rewrite engine's walk: read files one at a time, edit each, write what it keeps.

Part of :mod:`parquetry.dataset.rewrite` (its docstring states the interface, the memory
bound and the failure rules); this module reads each label's file, calls the ``edit``
function and hands the rows it keeps to a buffered writer, ``concurrency`` files at a time,
taking the results in order, and handing the kept rows to the writer in the order of the
files, so that the outcome (plans, metrics, output files) does not depend on timing.
"""

from __future__ import annotations

import itertools
import threading
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa

from parquetry.dataset.indexsinks import IndexSinks
from parquetry.dataset.plan import PlannedFile
from parquetry.dataset.staleread import read_base_file
from parquetry.dataset.write import FileDescription
from parquetry.errors import InvalidArgument
from parquetry.parquet import WriteOptions
from parquetry.parquet.footer_memo import FooterMemo

if TYPE_CHECKING:
    from parquetry.dataset.dataset import Dataset

__all__ = [
    "BUFFER_BYTES",
    "CONCURRENCY",
    "ENGINE_METRICS",
    "PARALLEL_BYTES",
    "Counts",
    "Edit",
    "FileEdit",
    "Progress",
    "Writer",
    "planned",
    "walk",
]

#: Kept rows buffered before they are written (small files are written together).
BUFFER_BYTES = 4 << 20
#: Files rewritten at the same time by the table operations (``delete_where``,
#: ``update_where``, ``upsert``): two overlap one file's decode and edit with another's
#: encode and store (pyarrow releases the GIL), measured in docs/benchmarks.md.
CONCURRENCY = 2
#: Decoded bytes (estimated) of the files in flight beyond the first: small files are
#: rewritten ``concurrency`` at a time, a file larger than this alone (the memory bound of
#: one large file stays that of concurrency 1). Small files are where the per-file costs
#: dominate (the benchmark's: 10,000 rows, 0.4 MB).
PARALLEL_BYTES = 4 << 20
#: The counts the engine keeps itself (see the module docstring).
ENGINE_METRICS = ("rows_deleted", "rows_updated", "rows_copied", "files_rewritten")


@dataclass(frozen=True, slots=True)
class FileEdit:
    """What an ``edit`` function decided for one file (label).

    ``keep``: the rows to write back in place of the file (dataset schema, partition
    columns included); None or empty removes the file without a replacement.
    ``rows_removed`` / ``rows_updated``: for the metrics (the engine does not diff tables).
    """

    label: str
    keep: pa.Table | None
    rows_removed: int = 0
    rows_updated: int = 0


#: ``edit(label, table) -> FileEdit | None`` (None: the file stays as it is).
Edit = Callable[[str, pa.Table], FileEdit | None]
#: ``progress(done_files, total_files)``.
Progress = Callable[[int, int], None]


def planned(ds: Dataset, label: str) -> PlannedFile:
    doc = ds.document
    files = doc.partitions.get(label)
    if files is None:
        raise InvalidArgument(f"dataset {ds.uuid!r} has no partition label {label!r}")
    table = doc.tables[0]
    info = doc.files.get(label)
    return PlannedFile(
        label=label,
        key=files[table],
        table=table,
        partition=ds._values_of(label),
        rows=info.rows if info else None,
        size=info.size if info else None,
    )


def _check_edit(edit: FileEdit | None, label: str, ds: Dataset) -> FileEdit | None:
    if edit is None:
        return None
    if not isinstance(edit, FileEdit) or edit.label != label:
        raise InvalidArgument(
            f"dataset {ds.uuid!r}: the edit of {label!r} returned {edit!r}, expected "
            f"FileEdit(label={label!r}, ...) or None"
        )
    return edit


class Writer:
    """Writes the rows edits keep as new files (thread-safe). Tables are buffered until
    ``buffer_bytes``: many small inputs make few outputs (one ``_write``, one write intent,
    one file per partition per flush); a table at least that large is written at once."""

    def __init__(
        self,
        ds: Dataset,
        write_options: WriteOptions | None,
        buffer_bytes: int,
        added: list[FileDescription],
        sinks: IndexSinks | None = None,
    ):
        self.ds, self.write_options, self.limit, self.added = ds, write_options, buffer_bytes, added
        self.sinks = sinks
        self.lock = threading.Lock()
        self.buffer: list[pa.Table] = []
        self.size = 0

    def add(self, decided: FileEdit) -> None:
        table = decided.keep
        if table is None or not table.num_rows:
            return
        batches: list[list[pa.Table]] = []
        with self.lock:
            if self.buffer and not table.schema.equals(self.buffer[0].schema):
                batches.append(self.buffer)  # written apart: one schema per write
                self.buffer, self.size = [], 0
            self.buffer.append(table)
            self.size += table.nbytes
            if self.size >= self.limit:
                batches.append(self.buffer)
                self.buffer, self.size = [], 0
        for tables in batches:
            self._write(tables)

    def _write(self, tables: list[pa.Table]) -> None:
        if not tables:
            return
        data = tables[0] if len(tables) == 1 else pa.concat_tables(tables)
        files = self.ds._write(data, self.write_options, merge_schema=False)[0]
        with self.lock:
            at = len(self.added)
            self.added.extend(files)  # abandoned on failure, the sinks' included
            if self.sinks is not None:
                # The index values go to the commit's sinks now, not with the descriptions
                # (bounded memory, indexsinks.py), in the order of ``added``.
                self.added[at:] = self.sinks.take(files)

    def flush(self) -> None:
        """Write what is buffered (after the last edit)."""
        with self.lock:
            rest, self.buffer, self.size = self.buffer, [], 0
        self._write(rest)


@dataclass(frozen=True, slots=True)
class _Done:
    """What one file's edit did, without its tables (they are gone once written)."""

    label: str
    changed: bool
    rows_removed: int = 0
    rows_updated: int = 0
    kept: int = 0


class Counts:
    def __init__(self) -> None:
        self.values = dict.fromkeys(ENGINE_METRICS, 0)

    def add(self, done: _Done) -> None:
        self.values["rows_deleted"] += done.rows_removed
        self.values["rows_updated"] += done.rows_updated
        self.values["rows_copied"] += max(done.kept - done.rows_updated, 0)
        self.values["files_rewritten"] += 1 if done.kept else 0

    def merged(self, given: Mapping[str, int]) -> dict[str, int]:
        out = {k: v for k, v in self.values.items() if v}
        for key, value in given.items():
            if not isinstance(value, int) or isinstance(value, bool):
                raise InvalidArgument(f"metric {key!r} must be an int, got {value!r}")
            out[key] = out.get(key, 0) + value
        return out


def walk(
    ds: Dataset,
    read: Sequence[str],
    edit: Edit,
    progress: Progress | None,
    on_edit: Callable[[FileEdit], None],
    concurrency: int = 1,
    operation: str = "rewrite",
    parallel_bytes: int = PARALLEL_BYTES,
) -> tuple[list[str], list[str], list[str], Counts]:
    """Read ``read``, at most ``concurrency`` files at a time and, beyond the first, only
    while the files in flight add up to ``parallel_bytes`` (decoded, estimated), each read, edited
    and written (``on_edit``) by one task; results are taken in order, so the outcome does
    not depend on timing. On an error no new file is started, the running ones finish
    (their files are recorded for abandonment) and the first error is raised."""
    if concurrency < 1:
        raise InvalidArgument(f"concurrency must be >= 1, got {concurrency}")

    in_order = _InOrder(on_edit)
    # The files of one dataset are usually written alike: their footers decode through
    # templates (footer_memo.py), still checked before pyarrow sees them.
    memo = FooterMemo()

    def one(index: int, label: str) -> _Done:
        # A file garbage collected meanwhile is a stale base (BaseCollected), not corruption.
        table = read_base_file(ds, planned(ds, label), operation, memo=memo)
        decided = _check_edit(edit(label, table), label, ds)
        del table  # the input is not needed while its output is written
        in_order(index, decided)
        if decided is None:
            return _Done(label, changed=False)
        kept = decided.keep.num_rows if decided.keep is not None else 0
        return _Done(label, True, decided.rows_removed, decided.rows_updated, kept)

    counts = Counts()
    rewritten: list[str] = []
    unchanged: list[str] = []
    emptied: list[str] = []
    total = len(read)

    def collect(done: _Done) -> None:
        if not done.changed:
            unchanged.append(done.label)
        else:
            counts.add(done)
            rewritten.append(done.label)
            if not done.kept:
                emptied.append(done.label)
        if progress is not None:
            progress(len(rewritten) + len(unchanged), total)

    if progress is not None:
        progress(0, total)
    width = _row_width(ds.schema)
    sizes = [_decoded_size(ds, label, width) for label in read] if concurrency > 1 else []
    if not any(a + b <= parallel_bytes for a, b in itertools.pairwise(sizes)):
        # No two files would be in flight together: no worker threads either (each thread's
        # stack counts against an address-space limit).
        for index, label in enumerate(read):
            collect(one(index, label))
        return rewritten, unchanged, emptied, counts
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        pending: deque[tuple[Future[_Done], int]] = deque()
        held = 0  # decoded bytes (estimated) of the files in flight
        try:
            for index, (label, size) in enumerate(zip(read, sizes, strict=True)):
                # A file joins the ones in flight only while they fit the budget together:
                # large files go one at a time (the memory bound of concurrency 1).
                while pending and (len(pending) >= concurrency or held + size > parallel_bytes):
                    future, done_size = pending.popleft()
                    held -= done_size
                    collect(future.result())
                pending.append((pool.submit(one, index, label), size))
                held += size
            while pending:
                collect(pending.popleft()[0].result())
        except BaseException:
            for future, _ in pending:
                future.cancel()
            wait([future for future, _ in pending])
            raise
    return rewritten, unchanged, emptied, counts


class _InOrder:
    """Hands the edits to ``on_edit`` in the order of their files, whichever worker finishes
    first (an edit that comes early waits for the ones before it): the writer buffers and
    groups kept rows in that order, so the output files, their sizes and the commit's
    metrics do not depend on timing. ``on_edit`` runs under the lock: one at a time."""

    def __init__(self, on_edit: Callable[[FileEdit], None]):
        self.on_edit = on_edit
        self.lock = threading.Lock()
        self.next = 0
        self.parked: dict[int, FileEdit | None] = {}

    def __call__(self, index: int, decided: FileEdit | None) -> None:
        with self.lock:
            self.parked[index] = decided
            while self.next in self.parked:
                ready = self.parked.pop(self.next)
                self.next += 1
                if ready is not None:
                    self.on_edit(ready)


def _decoded_size(ds: Dataset, label: str, width: int) -> int:
    """A file's decoded size, estimated from its rows (its encoded size a floor: Parquet
    compresses some columns 100x, so the encoded size alone would understate it)."""
    info = ds.document.files.get(label)
    # Unknown (a file kartothek wrote): counted as large, so it is read alone.
    return max(info.size, info.rows * width) if info is not None else PARALLEL_BYTES + 1


def _row_width(schema: pa.Schema) -> int:
    """Decoded bytes per row: fixed widths, 16 per variable-width or nested value."""
    out = 0
    for field in schema:
        try:
            out += max(field.type.bit_width // 8, 1)
        except ValueError:
            out += 16
    return out
