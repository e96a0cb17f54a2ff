"""The conformance suite every :class:`~parquetry.store.Store` runs.

Subclass :class:`StoreConformance` in a test module and provide a ``store`` fixture that
returns a fresh, empty store (zarr's ``testing/store.py`` pattern)::

    class TestMyStore(StoreConformance):
        @pytest.fixture
        def store(self, tmp_path):
            return MyStore(tmp_path)

A store without the write capabilities (a read-only view) also overrides ``writer`` to
return a writable store over the same objects: read tests put their data through it, write
tests are skipped, and the capability tests check that writes fail before any I/O.

Class attributes tune the sizes for slow backends; the defaults are what issue 2 asks for.
"""

from __future__ import annotations

import pickle
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from parquetry.errors import CapabilityNotSupported, InvalidArgument, InvalidKey, NotFound
from parquetry.store import Capability, PutMode, Store
from parquetry.testing._conformance_keys import HostileKeyChecks
from parquetry.testing._conformance_races import RaceChecks
from parquetry.testing._conformance_streams import StreamChecks
from parquetry.testing._conformance_writes import ListingChecks, WriteChecks, need

__all__ = ["BAD_KEYS", "StoreConformance"]

#: Keys every store must reject with InvalidKey, and why.
BAD_KEYS: dict[str, str] = {
    "": "empty key",
    ".": "dot segment",
    "..": "parent segment",
    "../a": "leading parent segment",
    "a/../b": "inner parent segment",
    "a/./b": "inner dot segment",
    "a//b": "empty segment",
    "a/": "trailing slash (empty last segment)",
    "/a": "leading slash",
    "a\x00b": "NUL byte",
    "a\\b": "backslash",
}
_PAYLOAD = bytes(range(256)) * 4  # 1 KiB with every byte value


class StoreConformance(WriteChecks, ListingChecks, RaceChecks, HostileKeyChecks, StreamChecks):
    """Behaviour every store shares. Subclasses provide the ``store`` fixture."""

    #: Size of the big round trip (issue 2: 50 MiB).
    big_size: int = 50 * 1024 * 1024
    #: Keys in the listing test (issue 2: 10,000).
    many_keys: int = 10_000
    #: Threads in the race tests (issue 2: 16).
    race_threads: int = 16
    #: Successful compare-and-swap increments each racing thread makes.
    cas_rounds: int = 3

    @pytest.fixture
    def store(self) -> Store:
        raise NotImplementedError("a StoreConformance subclass must provide a `store` fixture")

    @pytest.fixture
    def writer(self, store: Store) -> Store:
        """A writable store over the same objects as ``store`` (itself by default)."""
        return store

    # --- round trips ---------------------------------------------------------------------

    @pytest.mark.parametrize("size", [0, 1, 1024])
    def test_roundtrip_small(self, store: Store, writer: Store, size: int) -> None:
        data = (_PAYLOAD * 2)[:size]
        meta = writer.put("obj", data)
        assert (meta.key, meta.size) == ("obj", size)
        assert store.get("obj") == data
        assert store.head("obj").size == size

    def test_roundtrip_big(self, store: Store, writer: Store) -> None:
        data = _PAYLOAD * (self.big_size // len(_PAYLOAD))
        writer.put("big/blob", memoryview(data))
        assert store.head("big/blob").size == len(data)
        got = store.get("big/blob")
        assert len(got) == len(data)
        assert got == data
        tail = store.get_range("big/blob", len(data) - 1000, len(data) + 1000)
        assert tail == data[-1000:]

    def test_put_accepts_bytes_like(self, store: Store, writer: Store) -> None:
        writer.put("ba", bytearray(b"abc"))
        writer.put("mv", memoryview(b"xyzw")[1:3])
        assert (store.get("ba"), store.get("mv")) == (b"abc", b"yz")

    def test_put_rejects_non_bytes(self, writer: Store) -> None:
        need(writer, Capability.WRITE)
        with pytest.raises(InvalidArgument, match="'k'"):
            writer.put("k", "text")  # type: ignore[arg-type]
        assert not writer.exists("k")

    def test_read_buffer(self, store: Store, writer: Store) -> None:
        writer.put("buf/k", _PAYLOAD)
        writer.put("buf/empty", b"")
        buf = store.read_buffer("buf/k")
        assert bytes(buf) == _PAYLOAD
        writer.put("buf/k", b"replaced")  # a buffer keeps the version it was taken from
        assert bytes(buf) == _PAYLOAD
        assert bytes(store.read_buffer("buf/empty")) == b""
        with pytest.raises(NotFound):
            store.read_buffer("buf/missing")

    def test_get_missing(self, store: Store) -> None:
        with pytest.raises(NotFound, match="'no/such'") as info:
            store.get("no/such")
        assert info.value.key == "no/such"
        assert isinstance(info.value, FileNotFoundError)

    # --- ranged reads --------------------------------------------------------------------

    def test_get_range_edges(self, store: Store, writer: Store) -> None:
        n = len(_PAYLOAD)
        writer.put("r", _PAYLOAD)
        cases = [(0, 1), (0, n), (n - 1, n), (10, 20), (n - 5, n + 100), (5, 5), (n, n + 10)]
        cases += [(n + 100, n + 200), (0, 10 * n)]
        for start, end in cases:
            assert store.get_range("r", start, end) == _PAYLOAD[start:end], (start, end)
        assert store.get_ranges("r", cases) == [_PAYLOAD[s:e] for s, e in cases]
        assert store.get_ranges("r", []) == []

    def test_get_range_invalid(self, store: Store, writer: Store) -> None:
        writer.put("r", b"abc")
        for start, end in [(-1, 2), (2, 1)]:
            with pytest.raises(InvalidArgument, match="'r'"):
                store.get_range("r", start, end)
            with pytest.raises(InvalidArgument):
                store.get_ranges("r", [(0, 1), (start, end)])

    def test_get_range_missing(self, store: Store) -> None:
        for start, end in [(0, 10), (3, 3)]:
            with pytest.raises(NotFound, match="'gone'"):
                store.get_range("gone", start, end)
        with pytest.raises(NotFound):
            store.get_ranges("gone", [(0, 1)])

    # --- head / exists -------------------------------------------------------------------

    def test_head(self, store: Store, writer: Store) -> None:
        put = writer.put("h/k", b"12345")
        meta = store.head("h/k")
        assert (meta.key, meta.size) == ("h/k", 5)
        assert isinstance(meta.version, str)
        assert meta.version
        assert put.version == meta.version
        assert meta.modified is not None
        assert meta.modified.tzinfo is not None
        assert abs(datetime.now(UTC) - meta.modified) < timedelta(minutes=10)

    def test_version_changes_on_overwrite(self, store: Store, writer: Store) -> None:
        first = writer.put("v", b"one")
        second = writer.put("v", b"two")
        assert first.version != second.version
        assert store.head("v").version == second.version

    def test_head_missing(self, store: Store) -> None:
        with pytest.raises(NotFound, match="'nope'"):
            store.head("nope")

    def test_exists(self, store: Store, writer: Store) -> None:
        writer.put("d/x", b"1")
        assert store.exists("d/x")
        assert not store.exists("d")  # a "directory" is not an object
        assert not store.exists("d/y")
        assert not store.exists("zzz")

    # --- keys ----------------------------------------------------------------------------

    @pytest.mark.parametrize("key", list(BAD_KEYS), ids=list(BAD_KEYS.values()))
    def test_bad_keys(self, store: Store, writer: Store, key: str) -> None:
        writer.put("good", b"1")
        calls: list[Callable[[], object]] = [
            lambda: store.get(key),
            lambda: store.get_range(key, 0, 1),
            lambda: store.head(key),
            lambda: store.exists(key),
            lambda: store.open(key),
            lambda: writer.put(key, b"x"),
            lambda: writer.put(key, b"x", mode=PutMode.CREATE),
            lambda: writer.delete(key, missing_ok=True),
            lambda: writer.copy("good", key),
            lambda: writer.copy(key, "good2"),
            lambda: writer.move(key, "good2"),
        ]
        for call in calls:
            with pytest.raises(InvalidKey):
                call()
        if key not in ("", "a/"):  # the root and a trailing slash are valid prefixes
            with pytest.raises(InvalidKey):
                list(store.list(key))
            with pytest.raises(InvalidKey):
                store.list_dir(key)
        assert sorted(m.key for m in store.list()) == ["good"]

    def test_non_string_key(self, store: Store) -> None:
        with pytest.raises(InvalidKey):
            store.get(5)  # type: ignore[arg-type]

    # --- capabilities --------------------------------------------------------------------

    def test_capabilities(self, store: Store) -> None:
        assert isinstance(store.capabilities, frozenset)
        assert all(isinstance(c, Capability) for c in store.capabilities)
        assert Capability.READ in store.capabilities
        for cap in Capability:
            assert store.supports(cap) == (cap in store.capabilities)

    def test_missing_capabilities_are_refused(self, store: Store, writer: Store) -> None:
        writer.put("k", b"1")
        gated: dict[Capability, Callable[[], object]] = {
            Capability.WRITE: lambda: store.put("k", b"2"),
            Capability.CONDITIONAL_CREATE: lambda: store.put("n", b"2", mode=PutMode.CREATE),
            Capability.COMPARE_AND_SWAP: lambda: store.put(
                "k", b"2", mode=PutMode.UPDATE, expected_version="x"
            ),
            Capability.DELETE: lambda: store.delete("k"),
            Capability.LIST: lambda: store.list_dir(""),
        }
        for cap, call in gated.items():
            if cap in store.capabilities:
                continue
            with pytest.raises(CapabilityNotSupported) as info:
                call()
            assert info.value.capability in {
                cap.value,
                Capability.WRITE.value,
            }, (cap, info.value)
        assert writer.get("k") == b"1"

    def test_read_only_view(self, store: Store, writer: Store) -> None:
        writer.put("k", b"1")
        view = store.read_only()
        assert view.read_only() is view
        assert not view.capabilities & {
            Capability.WRITE,
            Capability.DELETE,
            Capability.CONDITIONAL_CREATE,
            Capability.COMPARE_AND_SWAP,
            Capability.ATOMIC_WRITE,
        }
        assert view.get("k") == b"1"
        assert [m.key for m in view.list()] == ["k"]
        refused: dict[str, list[Callable[[], object]]] = {
            "write": [lambda: view.put("k", b"2"), lambda: view.copy("k", "c")],
            "delete": [lambda: view.delete("k")],
        }
        for capability, calls in refused.items():
            for call in calls:
                with pytest.raises(CapabilityNotSupported) as info:
                    call()
                assert info.value.capability in (capability, "write")
        assert writer.get("k") == b"1"
        assert not writer.exists("c")

    # --- pickling ------------------------------------------------------------------------

    def test_pickle_roundtrip(self, store: Store, writer: Store) -> None:
        writer.put("p/before", b"old")
        clone = pickle.loads(pickle.dumps(store))
        assert clone == store
        assert hash(clone) == hash(store)
        assert clone.url == store.url
        assert clone.capabilities == store.capabilities
        assert clone.get("p/before") == b"old"
        if Capability.WRITE in clone.capabilities:
            clone.put("p/after", b"new")
            assert store.get("p/after") == b"new"

    # --- random-access files -------------------------------------------------------------

    def test_open_file_object(self, store: Store, writer: Store) -> None:
        writer.put("f", _PAYLOAD)
        with store.open("f") as f:
            assert f.seekable()
            assert f.readable()
            assert f.read(4) == _PAYLOAD[:4]
            assert f.tell() == 4
            f.seek(-10, 2)
            assert f.read() == _PAYLOAD[-10:]
            assert f.read(5) == b""
            f.seek(3)
            buf = bytearray(6)
            assert f.readinto(buf) == 6
            assert bytes(buf) == _PAYLOAD[3:9]
        assert store.open("f", size=len(_PAYLOAD)).size == len(_PAYLOAD)
        with pytest.raises(NotFound):
            store.open("missing")

    def test_threads_share_a_store(self, store: Store, writer: Store) -> None:
        errors: list[BaseException] = []

        def work(i: int) -> None:
            try:
                writer.put(f"t/{i}", str(i).encode())
                assert store.get(f"t/{i}") == str(i).encode()
            except BaseException as exc:  # collected and re-raised in the test thread
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        assert len(list(store.list("t"))) == 8
