"""Store benchmark: put then get N objects, parquetry's stores against bare baselines.

Local disk: ``LocalStore`` (fsync on and off) against plain file I/O three ways: a bare
``open/write`` (no atomicity, no durability), temp file + rename (atomic), and temp file +
fsync + rename + directory fsync (atomic and durable, what ``LocalStore`` does by default).
S3: ``ObjectStore`` against bare ``obstore`` calls on a client built with the same
configuration, both against one moto server started here. Variants run interleaved, each
timed ``--repeats`` times; medians and ratios are printed.

    .venv/bin/python benchmarks/bench_store.py            # 1,000 x 1 MiB and 10,000 x 1 KiB
    .venv/bin/python benchmarks/bench_store.py --quick    # 100 x 1 MiB and 1,000 x 1 KiB
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import obstore

from parquetry.store import LocalStore, ObjectStore, open_store
from parquetry.testing.moto import start_moto_server

Runner = Callable[[list[str], bytes], tuple[float, float]]  # -> (put seconds, get seconds)


def timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


# --- local baselines --------------------------------------------------------------------


def plain_read(root: Path, keys: list[str]) -> None:
    """The baselines' get: open and read each file."""
    for k in keys:
        with open(root / k, "rb") as f:
            f.read()


def plain_write(root: Path) -> Runner:
    def run(keys: list[str], data: bytes) -> tuple[float, float]:
        def put() -> None:
            for k in keys:
                with open(root / k, "wb") as f:
                    f.write(data)

        return timed(put), timed(lambda: plain_read(root, keys))

    return run


def plain_atomic(root: Path, *, durable: bool) -> Runner:
    def run(keys: list[str], data: bytes) -> tuple[float, float]:
        def put() -> None:
            for k in keys:
                target = root / k
                tmp = target.parent / f".tmp-{uuid.uuid4().hex}"
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
                os.write(fd, data)
                if durable:
                    os.fsync(fd)
                os.close(fd)
                os.replace(tmp, target)
                if durable:
                    dfd = os.open(target.parent, os.O_RDONLY)
                    os.fsync(dfd)
                    os.close(dfd)

        return timed(put), timed(lambda: plain_read(root, keys))

    return run


def store_runner(store: Any) -> Runner:
    def run(keys: list[str], data: bytes) -> tuple[float, float]:
        def put() -> None:
            for k in keys:
                store.put(k, data)

        def get() -> None:
            for k in keys:
                store.get(k)

        return timed(put), timed(get)

    return run


# --- S3 baseline ----------------------------------------------------------------------------


def bare_obstore(store: ObjectStore) -> Runner:
    # A second client with exactly the store's configuration.
    return bare_obstore_on(store._connect())


def bare_obstore_on(client: Any) -> Runner:
    def run(keys: list[str], data: bytes) -> tuple[float, float]:
        def put() -> None:
            for k in keys:
                obstore.put(client, k, data, mode="overwrite", use_multipart=False)

        def get() -> None:
            for k in keys:
                bytes(obstore.get(client, k).bytes())

        return timed(put), timed(get)

    return run


# --- driver ---------------------------------------------------------------------------------


def measure(variants: dict[str, Runner], keys: list[str], data: bytes, repeats: int) -> dict:
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in variants}
    for _ in range(repeats):
        for name, run in variants.items():  # interleaved: drift hits every variant alike
            results[name].append(run(keys, data))
    return {
        name: (statistics.median(p for p, _ in r), statistics.median(g for _, g in r))
        for name, r in results.items()
    }


def report(title: str, medians: dict, pairs: list[tuple[str, str]], n: int) -> None:
    print(f"\n{title}")
    print(f"  {'variant':<34} {'put s':>8} {'get s':>8} {'put us/op':>10} {'get us/op':>10}")
    for name, (p, g) in medians.items():
        print(f"  {name:<34} {p:8.3f} {g:8.3f} {p / n * 1e6:10.1f} {g / n * 1e6:10.1f}")
    for ours, base in pairs:
        (p1, g1), (p0, g0) = medians[ours], medians[base]
        print(f"  ratio {ours} / {base}: put {p1 / p0:.3f}  get {g1 / g0:.3f}")


def run_local(workloads: list[tuple[int, int]], repeats: int, base: Path) -> None:
    for count, size in workloads:
        data = os.urandom(size)
        keys = [f"bench/{i:06d}" for i in range(count)]
        roots = {name: base / name for name in ["open", "tmp", "tmp_fsync", "ls", "ls_nofsync"]}
        for root in roots.values():
            (root / "bench").mkdir(parents=True, exist_ok=True)
        variants: dict[str, Runner] = {
            "plain open/write": plain_write(roots["open"]),
            "plain temp+rename": plain_atomic(roots["tmp"], durable=False),
            "plain temp+fsync+rename+dirsync": plain_atomic(roots["tmp_fsync"], durable=True),
            "LocalStore(fsync=True)": store_runner(LocalStore(roots["ls"])),
            "LocalStore(fsync=False)": store_runner(LocalStore(roots["ls_nofsync"], fsync=False)),
        }
        medians = measure(variants, keys, data, repeats)
        report(
            f"local disk: {count} x {size // 1024} KiB (median of {repeats})",
            medians,
            [
                ("LocalStore(fsync=True)", "plain temp+fsync+rename+dirsync"),
                ("LocalStore(fsync=False)", "plain temp+rename"),
                ("LocalStore(fsync=False)", "plain open/write"),
            ],
            count,
        )
        for root in roots.values():
            shutil.rmtree(root)


def run_s3(workloads: list[tuple[int, int]], repeats: int) -> None:
    server = start_moto_server()
    try:
        for count, size in workloads:
            data = os.urandom(size)
            keys = [f"bench/{i:06d}" for i in range(count)]
            store = open_store(server.url(), **server.options())
            assert isinstance(store, ObjectStore)
            variants = {
                "bare obstore": bare_obstore(store),
                "parquetry ObjectStore": store_runner(store),
            }
            medians = measure(variants, keys, data, repeats)
            report(
                f"S3 (moto): {count} x {size // 1024} KiB (median of {repeats})",
                medians,
                [("parquetry ObjectStore", "bare obstore")],
                count,
            )
    finally:
        server.stop()


def run_in_memory_overhead(workloads: list[tuple[int, int]], repeats: int) -> None:
    """Parquetry's own per-call cost: both sides on obstore's in-process MemoryStore."""
    from obstore.store import MemoryStore as ObstoreMemory

    for count, size in workloads:
        data = os.urandom(size)
        keys = [f"bench/{i:06d}" for i in range(count)]
        store = ObjectStore("s3", "unused", options={"region": "us-east-1", "skip_signature": True})
        store._client = ObstoreMemory()  # same code path, no network: isolates the overhead
        bare = ObjectStore("s3", "unused", options={"region": "us-east-1", "skip_signature": True})
        bare._client = ObstoreMemory()
        variants = {"bare obstore": bare_obstore_on(bare._client), "parquetry": store_runner(store)}
        medians = measure(variants, keys, data, repeats)
        report(
            f"no network (obstore MemoryStore): {count} x {size // 1024} KiB (median of {repeats})",
            medians,
            [("parquetry", "bare obstore")],
            count,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10x fewer objects, 1 repeat")
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--only", choices=["local", "s3", "overhead"], default=None)
    args = parser.parse_args()
    scale = 10 if args.quick else 1
    workloads = [(1000 // scale, 1024 * 1024), (10_000 // scale, 1024)]
    repeats = args.repeats or (1 if args.quick else 3)
    print(f"load average before: {os.getloadavg()}")
    if args.only in (None, "local"):
        with tempfile.TemporaryDirectory(prefix="bench-store-", dir=os.getcwd()) as tmp:
            run_local(workloads, repeats, Path(tmp))
    if args.only in (None, "overhead"):
        run_in_memory_overhead(workloads, max(repeats, 3))
    if args.only in (None, "s3"):
        run_s3(workloads, repeats)
    print(f"\nload average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
