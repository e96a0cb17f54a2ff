"""Writing one compaction output: the input files' row groups streamed into one new file.

Memory bound (without ``sort_by``): the output is streamed into the store as pyarrow encodes
it (:meth:`~parquetry.store.Store.open_writer`: a 1 MiB piece, plus up to three 8 MiB parts
on an object store), never held whole. What is held: one buffered output row group (at most
half the target or :data:`ROW_GROUP_BYTES` decoded, whichever is smaller) with its encoded
pages (pyarrow keeps a dictionary-encoded column chunk's pages until the chunk ends), and
the input files read ahead (at most half the target or :data:`READ_AHEAD_BYTES` *encoded*,
held decoded: the largest share, see docs/benchmarks.md "Compaction memory"; a larger file
is decoded one row group at a time), plus one input row group.
With ``sort_by`` the whole output is decoded and sorted in memory first: one decoded target
file on top. A compaction writes two outputs at once (:mod:`parquetry.dataset.compact_pipeline`:
one reads its inputs while the other encodes its last row group): the reading one's inputs
read ahead and buffered row groups come on top.

Statistics and index values of the output are accumulated per row group (min of the
minima, max of the maxima, nulls summed; distinct index values), never from the whole file.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Literal

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from parquetry.dataset.compact_pipeline import NO_TURN, Turn
from parquetry.dataset.intents import Intent
from parquetry.dataset.naming import data_key, make_label, new_base_label
from parquetry.dataset.plan import PlannedFile
from parquetry.dataset.read import read_row_groups, read_whole_file
from parquetry.dataset.stats import ColumnStats, compute_stats, decode_value, encode_value
from parquetry.dataset.write import FileDescription
from parquetry.parquet import DecryptionSettings, WriteOptions
from parquetry.store import PutMode, Store, StoreWriter

if TYPE_CHECKING:
    from parquetry.dataset.compact_copy import BinCopier
    from parquetry.dataset.metadata import FileInfo

#: ``compact(binary_copy=...)``: see :mod:`parquetry.dataset.compact_copy`.
BinaryCopy = bool | Literal["auto"]

__all__ = ["Accumulator", "BinWriter", "BinaryCopy", "ROW_GROUP_BYTES", "merge_stats"]

#: Decoded bytes buffered before one output row group is written.
ROW_GROUP_BYTES = 64 << 20
#: Encoded bytes of input files read ahead (small files only: this is what makes 10,000
#: small files fast on an object store, where each GET waits on the network).
READ_AHEAD_BYTES = 32 << 20
READ_AHEAD_FILES = 16
#: Threads reading small files ahead (pyarrow releases the GIL while decoding).
READ_THREADS = 4


def merge_stats(
    a: dict[str, ColumnStats], b: dict[str, ColumnStats], schema: pa.Schema
) -> dict[str, ColumnStats]:
    """Statistics of two row sets together (``None`` bounds: all null, or unknown)."""
    out: dict[str, ColumnStats] = {}
    for name in a.keys() & b.keys():
        (alo, ahi, an), (blo, bhi, bn) = a[name], b[name]
        t = schema.field(name).type
        lo, hi = _bound(alo, blo, t, min), _bound(ahi, bhi, t, max)
        out[name] = [lo, hi, an + bn]
    return out


_UNKNOWN = object()


def _bound(x: Any, y: Any, t: pa.DataType, pick: Callable[[Any, Any], Any]) -> Any:
    if x is _UNKNOWN or y is _UNKNOWN:
        return _UNKNOWN
    if x is None:
        return y
    if y is None:
        return x
    return encode_value(pick(decode_value(x, t), decode_value(y, t)), t)


def _known(stats: dict[str, ColumnStats], rows: int) -> dict[str, ColumnStats]:
    """A None bound of a column that is not all null means unknown (NaN, long strings,
    nested types): it must stay unknown in the merge, not be replaced by the other side."""
    return {
        k: [_UNKNOWN, _UNKNOWN, n] if lo is None and n < rows else [lo, hi, n]
        for k, (lo, hi, n) in stats.items()
    }


class Accumulator:
    """Rows, statistics and index values of the row groups written so far."""

    def __init__(self, schema: pa.Schema, indices: Sequence[str]):
        self.schema, self.indices = schema, indices
        self.rows = 0
        self.stats: dict[str, ColumnStats] | None = None
        self.values: dict[str, list[pa.Array]] = {c: [] for c in indices}

    def add(self, table: pa.Table) -> None:
        self.add_stats(compute_stats(table), table.num_rows)
        self.add_values(table)

    def add_stats(self, stats: dict[str, ColumnStats], rows: int) -> None:
        """Rows with these statistics (a file's, from the version document) were written."""
        chunk = _known({k: v for k, v in stats.items() if k in self.schema.names}, rows)
        self.stats = chunk if self.stats is None else merge_stats(self.stats, chunk, self.schema)
        self.rows += rows

    def add_values(self, table: pa.Table) -> None:
        """The index columns of rows written (``table`` holds at least those columns)."""
        for c in self.indices:
            self.values[c].append(pc.unique(table.column(c).combine_chunks().drop_null()))

    def result(self) -> tuple[dict[str, ColumnStats], dict[str, pa.Array]]:
        stats = {
            k: [None, None, n] if lo is _UNKNOWN else [lo, hi, n]
            for k, (lo, hi, n) in (self.stats or {}).items()
        }
        values = {}
        for c, parts in self.values.items():
            t = self.schema.field(c).type
            merged = pa.concat_arrays(parts) if parts else pa.array([], t)
            values[c] = pc.unique(merged).sort()
        return stats, values


def _copy_allowed(opts: WriteOptions) -> bool:
    """Options a byte copy could not honour (encryption, bloom filters, sorting claims)
    make every output re-encoded."""
    return opts.encryption is None and not opts.bloom_filters and not opts.sorting_columns


class BinWriter:
    """Writes compaction outputs of one dataset (one per bin), under one write intent."""

    def __init__(
        self,
        store: Store,
        uuid: str,
        table: str,
        schema: pa.Schema,
        partition_keys: Sequence[str],
        indices: Sequence[str],
        opts: WriteOptions,
        decryption: DecryptionSettings | None,
        sort_by: Sequence[tuple[str, str]] | None = None,
        target: int = ROW_GROUP_BYTES,
        binary_copy: BinaryCopy = False,
        files: Mapping[str, FileInfo] | None = None,
    ):
        self.store, self.uuid, self.table = store, uuid, table
        self.schema = schema  # the dataset schema (partition columns included)
        self.payload = pa.schema([f for f in schema if f.name not in partition_keys])
        self.indices, self.opts, self.decryption = indices, opts, decryption
        self.sort_by = sort_by
        self.group_bytes = min(target // 2, ROW_GROUP_BYTES)
        from parquetry.dataset import compact_pipeline

        # Every bin in flight reads ahead: together they hold what one bin did before the
        # pipeline, so the compaction's memory bound does not grow with it.
        in_flight = max(1, compact_pipeline.BINS_IN_FLIGHT)
        self.ahead_bytes = min(target // 2, READ_AHEAD_BYTES) // in_flight
        self.intent = Intent(store, uuid)
        self.copier: BinCopier | None = None
        if binary_copy is not False and not sort_by and decryption is None and _copy_allowed(opts):
            from parquetry.dataset.compact_copy import BinCopier

            small_dict = "copy" if binary_copy is True else "reencode"
            self.copier = BinCopier(self, files or {}, small_dict)

    def _groups(self, files: Sequence[PlannedFile], turn: Turn = NO_TURN) -> Iterator[pa.Table]:
        """Every row group of ``files`` in order, reading small files ahead in threads, in
        the bin's ``turn`` (compact_pipeline.py)."""
        names = self.payload.names
        turn.begin()

        def whole(f: PlannedFile) -> list[pa.Table]:
            return read_whole_file(self.store, self.schema, f, names, self.decryption)

        with ThreadPoolExecutor(max_workers=READ_THREADS) as pool:
            pending: list[tuple[PlannedFile, Future[list[pa.Table]] | None]] = []
            i = 0
            while i < len(files) or pending:
                ahead = sum((f.size or 0) for f, fut in pending if fut is not None)
                while i < len(files) and len(pending) < READ_AHEAD_FILES:
                    f = files[i]
                    small = (f.size or 0) <= self.ahead_bytes
                    if small and ahead + (f.size or 0) > self.ahead_bytes and pending:
                        break
                    pending.append((f, pool.submit(whole, f) if small else None))
                    ahead += (f.size or 0) if small else 0
                    i += 1
                turn.check()
                f, fut = pending.pop(0)
                if fut is None:
                    yield from read_row_groups(self.store, self.schema, f, names, self.decryption)
                else:
                    yield from fut.result()
        turn.end()

    def write(
        self,
        partition: tuple[tuple[str, Any], ...],
        files: Sequence[PlannedFile],
        turn: Turn = NO_TURN,
    ) -> FileDescription:
        """One output file holding every row of ``files`` (in their order, or sorted);
        ``turn``: when it may read its inputs (compact_pipeline.py)."""
        if self.copier is not None:
            return self.copier.write(partition, files, turn)
        label = make_label(partition, new_base_label())
        key = data_key(self.uuid, self.table, label)
        # Streamed: pyarrow writes each row group's pages into the store's writer as it
        # encodes them; an exception discards the object (nothing visible, nothing left).
        with self.store.open_writer(key, mode=PutMode.CREATE) as sink:
            acc = self._encode(files, sink, turn)
            # Recorded before the commit makes the object visible: GC never sees it
            # uncovered, and an output that failed while encoding leaves no intent entry.
            self.intent.record([key])
        stats, values = acc.result()
        return FileDescription(
            table=self.table,
            key=key,
            label=label,
            partition=partition,
            rows=acc.rows,
            size=sink.commit().size,
            stats=stats,
            index_values=values,
            intent=self.intent.id,
        )

    def _encode(
        self, files: Sequence[PlannedFile], sink: StoreWriter, turn: Turn = NO_TURN
    ) -> Accumulator:
        """Every row of ``files`` written to ``sink`` as one Parquet file; its statistics."""
        acc = Accumulator(self.payload, self.indices)
        writer: pq.ParquetWriter | None = None
        buffered: list[pa.Table] = []
        size = 0

        def flush() -> None:
            nonlocal writer, size
            if not buffered:
                return
            data = pa.concat_tables(buffered)
            buffered.clear()
            size = 0
            if self.sort_by:
                data = data.take(pc.sort_indices(data, sort_keys=list(self.sort_by)))
            if writer is None:
                kwargs = self.opts.writer_kwargs(self.payload, data)
                writer = pq.ParquetWriter(sink, self.payload, **kwargs)
            rg = self.opts.row_group_size or data.num_rows or 1
            writer.write_table(data, row_group_size=rg)
            acc.add(data)

        for group in self._groups(files, turn):
            buffered.append(group)
            size += group.nbytes
            if size >= self.group_bytes and not self.sort_by:
                flush()
        turn.finish()  # one bin's last row groups in pyarrow at a time: memory
        flush()
        if writer is None:  # inputs without rows (a kartothek file of an empty frame)
            writer = pq.ParquetWriter(sink, self.payload, **self.opts.writer_kwargs(self.payload))
        writer.close()
        return acc
