"""LocalStore specifics: cross-process races, temporary files, versions, file-system quirks."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from pathlib import Path

import pytest

from parquetry.errors import (
    AlreadyExists,
    InvalidKey,
    NotFound,
    ParquetryError,
    PreconditionFailed,
)
from parquetry.store import LocalStore, PutMode
from parquetry.testing._conformance_races import race
from parquetry.testing.processes import cas_worker, create_worker, run_processes


def files_on_disk(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


@pytest.mark.slow
def test_cas_counter_across_processes(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "s")
    store.put("counter", b"0")
    procs, threads, rounds = 4, 3, 5
    results = run_processes(
        cas_worker, [(store.url, "counter", rounds, threads) for _ in range(procs)]
    )
    swaps = sum(won for won, _ in results)
    assert swaps == procs * threads * rounds
    assert int(store.get("counter")) == swaps
    assert files_on_disk(store.root) == ["counter"]


@pytest.mark.slow
def test_create_race_across_processes(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "s")
    results = run_processes(create_worker, [(store.url, "k", f"p{i}".encode()) for i in range(4)])
    assert results.count(True) == 1
    assert store.get("k") == f"p{results.index(True)}".encode()


def test_versions_never_repeat_across_delete_and_recreate(tmp_path: Path) -> None:
    # ext4 reuses freed inodes at once: the version must still never repeat.
    store = LocalStore(tmp_path / "s", fsync=False)
    seen = set()
    for _ in range(200):
        meta = store.put("k", b"same size", mode=PutMode.CREATE)
        assert meta.version not in seen
        seen.add(meta.version)
        store.delete("k")


def test_put_reports_its_own_version_under_contention(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "s", fsync=False)
    results = race(8, lambda i: [store.put("k", f"{i}-{j}".encode()) for j in range(25)])
    versions = [m.version for batch in results for m in batch]
    assert len(set(versions)) == len(versions)  # each put saw its own file, not a neighbour's
    final = store.head("k").version
    assert versions.count(final) == 1


def test_delete_during_cas_race_is_final(tmp_path: Path) -> None:
    """A compare-and-swap never resurrects an object deleted after its check."""
    store = LocalStore(tmp_path / "s", fsync=False)
    store.put("k", b"0")
    stop = threading.Event()

    def bump(_i: int) -> int:
        swaps = 0
        while True:
            try:
                version = store.head("k").version
                value = int(store.get("k"))
                store.put(
                    "k", str(value + 1).encode(), mode=PutMode.UPDATE, expected_version=version
                )
                swaps += 1
            except PreconditionFailed:
                continue
            except NotFound:
                return swaps

    def delete_soon() -> None:
        time.sleep(0.05)
        store.delete("k")
        stop.set()

    deleter = threading.Thread(target=delete_soon)
    deleter.start()
    results = race(6, bump)
    deleter.join()
    assert all(isinstance(r, int) for r in results), results
    assert not store.exists("k")
    assert files_on_disk(store.root) == []


def test_failed_writes_leave_no_temporary_files(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "s")
    v1 = store.put("a/k", b"1")
    store.put("a/k", b"2")
    with pytest.raises(AlreadyExists):
        store.put("a/k", b"3", mode=PutMode.CREATE)
    with pytest.raises(PreconditionFailed):
        store.put("a/k", b"3", mode=PutMode.UPDATE, expected_version=v1.version)
    with pytest.raises(NotFound):
        store.put("a/missing", b"3", mode=PutMode.UPDATE, expected_version=v1.version)
    assert files_on_disk(store.root) == ["a/k"]


#: A temporary name the store itself could have made (only those are ever removed).
CRASHED = ".parquetry-tmp-" + "c" * 32


def test_crashed_writer_leftovers_are_harmless(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "s")
    store.put("d/x", b"1")
    store.put("top", b"2")
    (store.root / CRASHED).write_bytes(b"partial")
    (store.root / "d" / CRASHED).write_bytes(b"partial")
    (store.root / "e").mkdir()
    (store.root / "e" / CRASHED).write_bytes(b"partial")
    assert sorted(m.key for m in store.list()) == ["d/x", "top"]
    assert store.list_dir("").prefixes == ("d",)  # "e" holds no object
    assert [m.key for m in store.list_dir("").objects] == ["top"]
    store.put("d/x", b"3")
    assert store.get("d/x") == b"3"
    # A recent temporary file may belong to a live writer: it stays, the prefix hides.
    store.delete("d/x")
    assert (store.root / "d" / CRASHED).exists()
    assert store.list_dir("").prefixes == ()
    # An old one is a leftover: removed with the directory it kept alive.
    store.put("d/y", b"4")
    old = time.time() - 2 * 3600
    os.utime(store.root / "d" / CRASHED, (old, old))
    store.delete("d/y")
    assert not (store.root / "d").exists()


def test_reserved_names_are_invalid_keys(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "s")
    for key in [".parquetry-tmp-x", "a/.parquetry-lock/b"]:
        with pytest.raises(InvalidKey, match="reserved"):
            store.put(key, b"1")
    store.put("k", b"1")
    with pytest.raises(InvalidKey, match="reserved"):
        store.move("k", ".parquetry-x")
    assert store.get("k") == b"1"


def test_file_and_directory_with_one_name(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "s")
    store.put("a", b"file")
    with pytest.raises(InvalidKey, match="'a/b'"):
        store.put("a/b", b"x")
    store.put("d/e", b"x")
    with pytest.raises(InvalidKey, match="'d'"):
        store.put("d", b"x")
    with pytest.raises(NotFound):
        store.get("d")
    assert store.get("a") == b"file"


def test_path_and_fsync_option(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "s", fsync=False)
    store.put("x/y.bin", b"abc")
    assert store.path("x/y.bin").read_bytes() == b"abc"
    assert store.url == (tmp_path / "s").as_uri()
    assert LocalStore(tmp_path / "s") == store


def test_missing_root_reads_as_empty(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "never-created")
    assert list(store.list()) == []
    assert store.list_dir("").prefixes == ()
    assert not store.exists("k")
    store.delete("k", missing_ok=True)
    with pytest.raises(NotFound):
        store.delete("a/b")
    assert not (tmp_path / "never-created").exists()


def test_too_long_names_are_invalid_keys(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "s")
    key = "d/" + "x" * 300
    with pytest.raises(InvalidKey, match="too long"):
        store.put(key, b"1")
    for call in (lambda: store.get(key), lambda: store.head(key), lambda: store.exists(key)):
        with pytest.raises(InvalidKey, match="too long"):
            call()
    assert list(store.list()) == []


def test_no_file_descriptor_leaks(tmp_path: Path) -> None:
    """Every operation closes what it opens (a leaked fd per list once exhausted the limit)."""
    store = LocalStore(tmp_path / "fds")
    store.put("a/b/c", b"1")

    def open_fds() -> int:
        return len(os.listdir("/proc/self/fd"))

    def round_() -> None:
        store.put("a/b/c", b"2")
        list(store.list("a"))
        list(store.list("missing"))
        store.head("a/b/c")
        store.get("a/b/c")
        store.put("d/e/f", b"1")
        store.delete("d/e/f")  # prunes the emptied directories
        with contextlib.suppress(ParquetryError):
            store.put("a/b/c", b"3", mode=PutMode.CREATE)
        with contextlib.suppress(ParquetryError):
            store.get("x/y/missing")

    round_()
    before = open_fds()
    for _ in range(20):
        round_()
    assert open_fds() == before


def test_stream_writes_a_hidden_temporary_file_and_abort_removes_it(tmp_path: Path) -> None:
    """A streamed object fills a temporary file of its directory (never listed); an abort
    removes it and the directories made for it; a commit leaves only the object."""
    store = LocalStore(tmp_path)
    w = store.open_writer("a/b/obj")
    w.write(b"x" * 3_000_000)
    temps = [p.name for p in (tmp_path / "a" / "b").iterdir()]
    assert len(temps) == 1
    assert temps[0].startswith(".parquetry-tmp-")
    assert list(store.list()) == []
    w.abort()
    assert list(tmp_path.iterdir()) == []  # temporary file and directories gone
    with store.open_writer("a/b/obj") as w:
        w.write(b"y" * 3_000_000)
    assert [p.name for p in (tmp_path / "a" / "b").iterdir()] == ["obj"]
    assert (tmp_path / "a" / "b" / "obj").read_bytes() == b"y" * 3_000_000
