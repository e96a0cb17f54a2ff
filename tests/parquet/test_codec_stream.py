"""ParquetStreamWriter: row group after row group, bounded buffering, footer at close."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import threading

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from parquetry.codec import ParquetCodec, ParquetField, ParquetSchema, ParquetType, SchemaViolation
from parquetry.errors import InvalidArgument, InvalidFormat, NotFound
from parquetry.parquet.options import WriteOptions
from parquetry.parquet.stream import DEFAULT_STREAM_ROW_GROUP, ParquetStreamWriter
from parquetry.store import Store
from parquetry.testing import CountingStore

SCHEMA = ParquetSchema(
    [ParquetField("id", ParquetType.INT64), ParquetField("name", ParquetType.STRING, nullable=True)]
)


def test_stream_to_sink_writes_row_groups_as_it_goes() -> None:
    sink = io.BytesIO()
    sizes = []
    with ParquetStreamWriter(
        sink, schema=SCHEMA, options=WriteOptions(row_group_size=1000)
    ) as writer:
        for chunk in range(10):
            writer.write(
                [{"id": i, "name": f"n{i}"} for i in range(chunk * 350, chunk * 350 + 350)]
            )
            sizes.append(len(sink.getvalue()))
            # Never more than one row group of rows waits in memory.
            assert writer._pending_rows < 1000
    assert writer.row_groups_written == 4
    # Bytes reached the sink before close: the file grows while streaming. A group is
    # encoded in the background, but the next flush (at 2,100 rows) waits for it.
    assert sizes[5] > 4
    assert sizes[5] < sizes[-1]
    data = sink.getvalue()
    md = pq.ParquetFile(io.BytesIO(data)).metadata
    assert (md.num_rows, md.num_row_groups) == (3500, 4)
    assert [md.row_group(i).num_rows for i in range(4)] == [1000, 1000, 1000, 500]
    decoded = ParquetCodec(SCHEMA).decode(data)
    assert [r["id"] for r in decoded] == list(range(3500))
    stats = writer.stats()
    assert stats is not None
    assert stats.row_count == 3500
    assert (stats.column("id").min, stats.column("id").max) == (0, 3499)


def test_stream_violation_names_the_global_record_index() -> None:
    writer = ParquetStreamWriter(io.BytesIO(), schema=SCHEMA)
    writer.write([{"id": 1}, {"id": 2}])
    with pytest.raises(SchemaViolation, match="record 3") as info:
        writer.write([{"id": 3}, {"id": "four"}])
    assert info.value.index == 3
    writer.abort()


def test_stream_takes_arrow_batches_and_checks_their_schema() -> None:
    sink = io.BytesIO()
    arrow_schema = pa.schema([pa.field("a", pa.int64()), pa.field("b", pa.string())])
    with ParquetStreamWriter(sink, schema=arrow_schema) as writer:
        writer.write(pa.record_batch({"b": ["x", "y"], "a": [1, 2]}))
        writer.write(pa.table({"a": [3], "b": ["z"]}))
        with pytest.raises(SchemaViolation):
            writer.write(pa.table({"a": [4]}))
        with pytest.raises(InvalidArgument):
            writer.write([{"a": 5, "b": "w"}])
    assert pq.read_table(io.BytesIO(sink.getvalue())).to_pydict() == {
        "a": [1, 2, 3],
        "b": ["x", "y", "z"],
    }


def test_empty_stream_is_a_valid_zero_row_file() -> None:
    sink = io.BytesIO()
    with ParquetStreamWriter(sink, schema=SCHEMA):
        pass
    assert ParquetCodec(SCHEMA).decode(sink.getvalue()) == []


def test_stream_to_store_uploads_once_at_close(any_store: Store) -> None:
    with ParquetStreamWriter(
        schema=SCHEMA,
        store=any_store,
        key="out/part.parquet",
        options=WriteOptions(row_group_size=64),
    ) as writer:
        writer.write([{"id": i} for i in range(200)])
        assert not any_store.exists("out/part.parquet")
    assert writer.result is not None
    assert writer.result.size > 0
    decoded = ParquetCodec(SCHEMA).decode(any_store.get("out/part.parquet"))
    assert [r["id"] for r in decoded] == list(range(200))


def test_stream_error_inside_block_uploads_nothing(memory_store: Store) -> None:
    def produce() -> None:
        with ParquetStreamWriter(schema=SCHEMA, store=memory_store, key="x.parquet") as writer:
            writer.write([{"id": 1}])
            raise RuntimeError("producer failed")

    with pytest.raises(RuntimeError):
        produce()
    with pytest.raises(NotFound):
        memory_store.head("x.parquet")


def test_stream_needs_exactly_one_target(memory_store: Store) -> None:
    with pytest.raises(InvalidArgument):
        ParquetStreamWriter(schema=SCHEMA)
    with pytest.raises(InvalidArgument):
        ParquetStreamWriter(io.BytesIO(), schema=SCHEMA, store=memory_store, key="k")
    writer = ParquetStreamWriter(io.BytesIO(), schema=SCHEMA)
    writer.close()
    with pytest.raises(InvalidArgument, match="closed"):
        writer.write([{"id": 1}])


def test_codec_stream_writer_and_unwritable_sinks(memory_store: Store) -> None:
    from parquetry.errors import CodecNotStreamable

    codec = ParquetCodec(SCHEMA)
    with codec.stream_writer(store=memory_store, key="c.parquet") as writer:
        writer.write([{"id": 1, "name": "x"}])
    assert codec.decode(memory_store.get("c.parquet")) == [{"id": 1, "name": "x"}]
    with pytest.raises(CodecNotStreamable, match="str"):
        codec.stream_writer("not-a-sink")


_MEMORY_PROBE = """
import io, json
import pyarrow as pa, pyarrow.compute as pc, pyarrow.parquet as pq
from parquetry.parquet.options import WriteOptions
from parquetry.parquet.stream import ParquetStreamWriter
arrow_schema = pa.schema([pa.field("id", pa.int64()), pa.field("text", pa.string())])
batch_rows, batches = 20_000, 30
def batch(i):
    ids = pa.array(range(i * batch_rows, (i + 1) * batch_rows), pa.int64())
    return pa.record_batch([ids, pc.cast(ids, pa.string())], schema=arrow_schema)
one_batch = batch(0).nbytes
baseline = pa.total_allocated_bytes()
peak = 0
sink = io.BytesIO()
with ParquetStreamWriter(
    sink, schema=arrow_schema, options=WriteOptions(row_group_size=batch_rows)
) as writer:
    for i in range(batches):
        writer.write(batch(i))
        peak = max(peak, pa.total_allocated_bytes() - baseline)
rows = pq.ParquetFile(io.BytesIO(sink.getvalue())).metadata.num_rows
print(json.dumps({"peak": peak, "one_batch": one_batch, "groups": writer.row_groups_written,
                  "rows": rows, "expected_rows": batch_rows * batches, "batches": batches}))
"""


def test_stream_memory_stays_bounded_by_one_row_group() -> None:
    # In a fresh process: pyarrow's allocation counter is process-wide, and threads other
    # tests left winding down (thread pools, a Spark session's) allocate into it.
    done = subprocess.run(
        [sys.executable, "-c", _MEMORY_PROBE], capture_output=True, text=True, check=True
    )
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["groups"] == got["batches"]
    # The whole file's data would be 30 batches; the writer never holds more than a few.
    assert got["peak"] < 4 * got["one_batch"] < got["batches"] * got["one_batch"]
    assert got["rows"] == got["expected_rows"]


class _FailingSink(io.BytesIO):
    """A sink whose writes fail once ``limit`` bytes have been written."""

    def __init__(self, limit: int):
        super().__init__()
        self.limit = limit

    def write(self, data: object) -> int:
        view = memoryview(data)  # type: ignore[arg-type]
        if self.tell() + view.nbytes > self.limit:
            raise OSError(28, "No space left on device")
        return super().write(view)


def _rows(start: int, count: int) -> list[dict[str, object]]:
    return [{"id": i, "name": f"n{i}"} for i in range(start, start + count)]


def test_a_failed_background_write_is_raised_and_the_file_never_gets_a_footer() -> None:
    threads_before = threading.active_count()
    sink = _FailingSink(limit=3000)
    writer = ParquetStreamWriter(sink, schema=SCHEMA, options=WriteOptions(row_group_size=500))

    def write_until_it_fails() -> None:
        for chunk in range(20):  # row groups go to the worker thread; one of them fails
            writer.write(_rows(chunk * 500, 500))

    with pytest.raises(OSError, match="No space left"):
        write_until_it_fails()
    # Whatever the caller does next, the failure stays: no footer over a missing group.
    with pytest.raises(OSError, match="No space left"):
        writer.write(_rows(10_000, 500))
    with pytest.raises(OSError, match="No space left"):
        writer.close()
    assert writer.closed
    assert not sink.getvalue().endswith(b"PAR1")
    assert threading.active_count() == threads_before  # the worker thread is gone


def test_context_manager_abort_stops_the_worker_thread() -> None:
    threads_before = threading.active_count()
    writer = ParquetStreamWriter(
        io.BytesIO(), schema=SCHEMA, options=WriteOptions(row_group_size=100)
    )

    def fail_inside_the_block() -> None:
        with writer:
            writer.write(_rows(0, 450))  # four groups handed to the worker
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        fail_inside_the_block()
    assert writer.closed
    assert threading.active_count() == threads_before


def test_codec_encode_writes_row_groups_of_the_record_default() -> None:
    codec = ParquetCodec(SCHEMA)
    rows = DEFAULT_STREAM_ROW_GROUP * 2 + 7
    data = codec.encode_bytes(_rows(0, rows))
    md = pq.ParquetFile(io.BytesIO(data)).metadata
    sizes = [md.row_group(i).num_rows for i in range(md.num_row_groups)]
    assert DEFAULT_STREAM_ROW_GROUP == 128 * 1024
    assert sizes == [DEFAULT_STREAM_ROW_GROUP, DEFAULT_STREAM_ROW_GROUP, 7]
    decoded = codec.decode(data)
    assert [r["id"] for r in decoded] == list(range(rows))
    # Statistics merge over the row groups.
    stats = codec.file_stats()
    assert stats is not None
    assert (stats.row_count, stats.column("id").min, stats.column("id").max) == (rows, 0, rows - 1)
    assert stats.column("name").max == max(f"n{i}" for i in range(rows))


def test_codec_encode_over_many_groups_reports_a_late_violation_and_writes_nothing() -> None:
    codec = ParquetCodec(SCHEMA, options=WriteOptions(row_group_size=1000))
    records = _rows(0, 5000)
    records[4321] = {"id": "4321", "name": "x"}
    sink = io.BytesIO()
    with pytest.raises(SchemaViolation, match="record 4321") as info:
        codec.encode(sink, records)
    assert (info.value.index, info.value.field) == (4321, "id")
    assert sink.getvalue() == b""
    assert codec.file_stats() is None
    # The same codec encodes again afterwards.
    records[4321] = {"id": 4321, "name": "x"}
    codec.encode(sink, records)
    assert pq.ParquetFile(io.BytesIO(sink.getvalue())).metadata.num_row_groups == 5


def test_iter_records_matches_decode_in_bounded_memory(memory_store: Store) -> None:
    codec = ParquetCodec(SCHEMA, options=WriteOptions(row_group_size=20_000))
    # Hashed names: data that compresses poorly, so the file is several megabytes.
    records = [
        {"id": i, "name": None if i % 7 == 0 else f"{(i * 2654435761) % 2**61:x}"}
        for i in range(200_000)
    ]
    data = codec.encode_bytes(records)
    memory_store.put("big.parquet", data)
    counting = CountingStore(memory_store)
    baseline = pa.total_allocated_bytes()
    peak = 0
    count = 0
    source = counting.open("big.parquet")
    for count, record in enumerate(codec.iter_records(source, batch_rows=5_000), 1):
        assert record == records[count - 1]
        if count % 5_000 == 0:
            peak = max(peak, pa.total_allocated_bytes() - baseline)
    assert count == len(records)
    whole = codec.decode_table(data)
    assert peak < whole.nbytes / 4  # about one row group in Arrow memory at a time
    # Read by ranges (footer, then column chunks), never one GET of the whole object.
    assert len(data) > 1_000_000
    assert counting.counts["get"] == 0
    assert counting.counts["get_range"] >= 10
    assert counting.bytes_read <= 1.2 * len(data)


def test_iter_records_checks_the_schema_before_the_first_record() -> None:
    data = ParquetCodec(SCHEMA).encode_bytes([{"id": 1, "name": "a"}])
    needs_more = ParquetSchema(
        [*SCHEMA.fields, ParquetField("missing", ParquetType.BOOL, nullable=False)]
    )
    records = ParquetCodec(needs_more).iter_records(data)
    with pytest.raises(SchemaViolation, match="missing"):
        next(records)
    empty = ParquetCodec(ParquetSchema([])).iter_records(data)
    assert list(empty) == [{}]
    with pytest.raises(InvalidFormat):
        next(ParquetCodec(SCHEMA).iter_records(b"not parquet data at all"))
