"""What one rewrite of the kartothek pointer costs, by dataset size (local disk).

The pointer (``<uuid>.by-dataset-metadata.json``) is the full kartothek document plus
parquetry's extension (every partition's file and statistics). A real dataset of 4 columns
(2 partition keys, per-file statistics on every column) is created, then its document is
grown to N partitions by repeating its entries under fresh labels (same shape, same bytes
per entry as real commits write). Per size: the pointer's bytes, the time to encode it
and to put it atomically (``LocalStore``), and to decode it again (what every kartothek or
parquetry open of the pointer pays). Median of ``--repeat`` runs.

The ``auto`` policy's threshold (``POINTER_EVERY_COMMIT_BYTES``) comes from these numbers:
see docs/compatibility.md. Usage: ``python benchmarks/bench_pointer.py [--quick]``.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid as uuid_module
from pathlib import Path

import pyarrow as pa

from parquetry import Dataset
from parquetry.dataset.metadata import FileInfos, decode_document, encode_document
from parquetry.dataset.naming import data_key, metadata_key
from parquetry.store import LocalStore


def _seed(store: LocalStore) -> Dataset:
    table = pa.table(
        {
            "country": pa.array(["DE", "FR"] * 4),
            "year": pa.array([2020, 2021] * 4, pa.int64()),
            "id": pa.array(range(8), pa.int64()),
            "amount": pa.array([1.5 * i for i in range(8)]),
            "name": pa.array([f"customer-{i}" for i in range(8)]),
        }
    )
    return Dataset.create(store, "bench", table, partition_on=["country", "year"])


def _grown(ds: Dataset, partitions: int) -> tuple[object, int]:
    doc = ds._doc
    template_label = next(iter(doc.partitions))
    info = doc.files.to_json()[template_label]
    prefix = template_label.rsplit("/", 1)[0]
    parts: dict[str, dict[str, str]] = {}
    files: dict[str, str] = {}
    for _ in range(partitions):
        label = f"{prefix}/{uuid_module.uuid4().hex}"
        parts[label] = {"table": data_key(doc.uuid, "table", label)}
        files[label] = info
    grown = doc.evolve(partitions=parts, files=FileInfos(files, owned=True))
    return grown, len(encode_document(grown))


def _median(fn, repeat: int) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1k and 10k partitions only")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    sizes = (1_000, 10_000) if args.quick else (1_000, 3_000, 10_000, 30_000, 100_000)
    with tempfile.TemporaryDirectory() as tmp:
        store = LocalStore(Path(tmp))
        ds = _seed(store)
        key = metadata_key("bench")
        print("| partitions | pointer | encode | put (local) | encode + put | decode |")
        print("|---|---|---|---|---|---|")
        for n in sizes:
            doc, size = _grown(ds, n)
            data = encode_document(doc)  # type: ignore[arg-type]
            enc = _median(lambda d=doc: encode_document(d), args.repeat)  # type: ignore[misc]
            put = _median(lambda b=data: store.put(key, b), args.repeat)  # type: ignore[misc]
            dec = _median(lambda b=data: decode_document(b, "json", key=key), args.repeat)  # type: ignore[misc]
            print(
                f"| {n:,} | {size / 2**20:.2f} MiB | {enc * 1e3:.0f} ms | {put * 1e3:.0f} ms "
                f"| {(enc + put) * 1e3:.0f} ms | {dec * 1e3:.0f} ms |"
            )


if __name__ == "__main__":
    main()
