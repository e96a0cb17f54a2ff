"""Record codec benchmark: validated encode/decode vs. pyarrow's unvalidated baseline.

1M records x 8 flat fields (int64, int32, float64, float32, string, bool, UTC timestamp,
bytes). In the same run:

- encode: ``ParquetCodec.encode`` (validates every value) vs ``pa.Table.from_pylist`` +
  ``pq.write_table`` (validates nothing), same compression;
- decode: ``ParquetCodec.decode`` vs ``pq.read_table(...).to_pylist()``.

Targets (issue 4): >= 1M records/s both ways and encode <= 1.5 x the baseline. The codec
writes its default 128 Ki-row groups (encoded on a background thread while the next group
is converted); the baseline writes pyarrow's default 1 Mi-row group.
Usage: ``python benchmarks/bench_codec.py [--quick] [--records N] [--repeat K]``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import io
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from parquetry.codec import (
    ParquetCodec,
    ParquetCompression,
    ParquetField,
    ParquetSchema,
    ParquetType,
)
from parquetry.parquet.options import WriteOptions

SCHEMA = ParquetSchema(
    [
        ParquetField("id", ParquetType.INT64),
        ParquetField("count", ParquetType.INT32),
        ParquetField("price", ParquetType.FLOAT64),
        ParquetField("ratio", ParquetType.FLOAT32, nullable=True),
        ParquetField("name", ParquetType.STRING),
        ParquetField("active", ParquetType.BOOL),
        ParquetField("created", ParquetType.TIMESTAMP),
        ParquetField("payload", ParquetType.BYTES, nullable=True),
    ]
)


def make_records(n: int) -> list[dict[str, Any]]:
    base = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    second = dt.timedelta(seconds=1)
    return [
        {
            "id": i,
            "count": i % 100_000,
            "price": i * 0.25,
            "ratio": None if i % 10 == 0 else (i % 7) / 7,
            "name": f"customer-{i % 50_000}",
            "active": i % 3 == 0,
            "created": base + i * second,
            "payload": b"\x00\x01" * (i % 4),
        }
        for i in range(n)
    ]


CPU: dict[str, float] = {}


def timed(fn: Callable[[], Any], repeat: int, name: str = "") -> tuple[float, Any]:
    """Median wall time (and, in ``CPU[name]``, median process CPU time) of ``repeat`` runs."""
    times, cpu, result = [], [], None
    fn()  # warm-up: first-call costs (imports, allocator growth) are not what we measure
    for _ in range(repeat):
        # Free the previous run's result before the clock starts: freeing 1M objects is not
        # part of producing them (it cost ~0.17 s inside the timed region for both sides).
        result = None
        gc.collect()  # each run starts with the same collector state
        start, start_cpu = time.perf_counter(), time.process_time()
        result = fn()
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    CPU[name] = statistics.median(cpu)
    return statistics.median(times), result


def run(n: int, repeat: int) -> None:
    records = make_records(n)
    print(f"records: {n:,} x 8 fields, median of {repeat}, load avg {os.getloadavg()[0]:.2f}")
    cases = [
        ("snappy", ParquetCodec(SCHEMA, compression=ParquetCompression.SNAPPY), {}),
        (
            "zstd(1)",
            ParquetCodec(SCHEMA, options=WriteOptions(compression="zstd", compression_level=1)),
            {"compression": "zstd", "compression_level": 1},
        ),
    ]
    for label, codec, baseline_kwargs in cases:

        def baseline_encode(kwargs: dict[str, Any] = baseline_kwargs) -> bytes:
            sink = io.BytesIO()
            pq.write_table(pa.Table.from_pylist(records), sink, **kwargs)
            return sink.getvalue()

        def codec_encode(codec: ParquetCodec = codec) -> bytes:
            sink = io.BytesIO()
            codec.encode(sink, records)
            return sink.getvalue()

        base_enc, base_data = timed(baseline_encode, repeat, "base_enc")
        enc, data = timed(codec_encode, repeat, "enc")
        base_dec, _ = timed(
            lambda d=base_data: pq.read_table(pa.BufferReader(d)).to_pylist(), repeat, "base_dec"
        )
        dec, decoded = timed(lambda c=codec, d=data: c.decode(d), repeat, "dec")
        assert len(decoded) == n
        groups = pq.ParquetFile(pa.BufferReader(data)).metadata.num_row_groups
        base_groups = pq.ParquetFile(pa.BufferReader(base_data)).metadata.num_row_groups
        print(
            f"\n[{label}] file {len(data) / 2**20:.1f} MiB in {groups} row groups "
            f"(baseline {len(base_data) / 2**20:.1f} MiB in {base_groups})"
        )
        print(
            f"  encode: codec {enc:.3f} s = {n / enc / 1e6:.2f} M rec/s | baseline "
            f"{base_enc:.3f} s = {n / base_enc / 1e6:.2f} M rec/s | ratio {enc / base_enc:.2f}x "
            f"(target <= 1.50x, >= 1M rec/s)"
        )
        print(
            f"  decode: codec {dec:.3f} s = {n / dec / 1e6:.2f} M rec/s | baseline "
            f"{base_dec:.3f} s = {n / base_dec / 1e6:.2f} M rec/s | ratio {dec / base_dec:.2f}x "
            f"(target >= 1M rec/s)"
        )
        print(
            f"  CPU s: encode {CPU['enc']:.3f} vs {CPU['base_enc']:.3f} "
            f"({CPU['enc'] / CPU['base_enc']:.2f}x), decode {CPU['dec']:.3f} vs "
            f"{CPU['base_dec']:.3f} ({CPU['dec'] / CPU['base_dec']:.2f}x)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100k records, two repetitions")
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if args.quick:
        run(100_000, 2)
    else:
        run(args.records, args.repeat)


if __name__ == "__main__":
    main()
