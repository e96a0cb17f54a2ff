"""Conformance checks for streamed writes (``Store.open_writer``): put's semantics piece by
piece, nothing visible before the commit, nothing left behind by an abort or a fault."""

from __future__ import annotations

import os

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings

from parquetry.errors import (
    AlreadyExists,
    CapabilityNotSupported,
    InvalidArgument,
    InvalidKey,
    NotFound,
    PreconditionFailed,
)
from parquetry.store import Capability, PutMode, Store
from parquetry.store.writer import CHUNK_BYTES
from parquetry.testing._conformance_races import race
from parquetry.testing._conformance_writes import need
from parquetry.testing.stores import FaultyStore, InjectedFault

__all__ = ["StreamChecks"]


def _keys(store: Store) -> list[str]:
    return sorted(m.key for m in store.list())


def _stream(store: Store, key: str, data: bytes, piece: int, **kwargs: object) -> None:
    with store.open_writer(key, **kwargs) as w:  # type: ignore[arg-type]
        for at in range(0, len(data), piece):
            w.write(data[at : at + piece])


class StreamChecks:
    """``open_writer``: round trips, visibility, modes, aborts and faults."""

    #: Size of the streamed objects that must take each backend's large-object path (an
    #: object store's multipart upload): more than two of its parts.
    stream_size: int = 20 << 20
    #: Hypothesis examples of the piece-size property.
    stream_examples: int = 25

    def test_stream_roundtrip(self, store: Store, writer: Store) -> None:
        need(writer, Capability.WRITE)
        pieces = [b"", b"a", bytes(range(256)) * 3, os.urandom(CHUNK_BYTES + 5), b"z" * 70]
        with writer.open_writer("s/k") as w:
            for piece in pieces:
                assert w.write(piece) == len(piece)
            w.write(memoryview(b"tail"))
            w.write(bytearray(b"!"))
            assert w.tell() == sum(map(len, pieces)) + 5
        data = b"".join(pieces) + b"tail!"
        meta = w.commit()  # the first commit's result, again
        assert w.closed
        assert (meta.key, meta.size) == ("s/k", len(data))
        assert meta.version == store.head("s/k").version
        assert store.get("s/k") == data
        with writer.open_writer("s/empty"):
            pass
        assert store.get("s/empty") == b""
        with pytest.raises(InvalidArgument, match="'s/k'"):
            w.write(b"more")  # committed: closed for writes
        with pytest.raises(InvalidArgument, match="'s/x'"):
            writer.open_writer("s/x").write("text")  # type: ignore[arg-type]
        assert _keys(store) == ["s/empty", "s/k"]

    def test_stream_large_is_invisible_until_commit(self, store: Store, writer: Store) -> None:
        need(writer, Capability.WRITE)
        data = os.urandom(self.stream_size)
        writer.put("big/k", b"old")
        w = writer.open_writer("big/k")
        w2 = writer.open_writer("big/new")
        for at in range(0, len(data), 1 << 16):
            w.write(data[at : at + (1 << 16)])
            w2.write(data[at : at + (1 << 16)])
        assert store.get("big/k") == b"old"
        assert not store.exists("big/new")
        assert _keys(store) == ["big/k"]
        w.close()  # close publishes, as for a file
        assert w2.commit().size == len(data)
        assert store.get("big/k") == data
        assert store.head("big/new").size == len(data)
        assert store.get_range("big/new", len(data) - 10, len(data)) == data[-10:]

    @pytest.mark.parametrize("large", [False, True], ids=["small", "large"])
    def test_stream_abort_leaves_nothing(self, store: Store, writer: Store, large: bool) -> None:
        need(writer, Capability.WRITE)
        data = os.urandom(self.stream_size if large else 1000)
        writer.put("ab/old", b"old")
        w = writer.open_writer("ab/new")
        w.write(data)
        w.abort()
        w.abort()  # idempotent
        with pytest.raises(InvalidArgument, match="'ab/new'"):
            w.write(b"x")
        with pytest.raises(InvalidArgument, match="aborted"):
            w.commit()

        def fail_while_writing(key: str) -> None:
            with writer.open_writer(key) as w:
                w.write(data)
                raise RuntimeError("boom")

        for key in ("ab/new", "ab/old", "ab/deep/er/key"):
            with pytest.raises(RuntimeError, match="boom"):
                fail_while_writing(key)
        assert store.get("ab/old") == b"old"
        assert _keys(store) == ["ab/old"]
        assert store.list_dir("ab").prefixes == ()

    def test_stream_modes(self, store: Store, writer: Store) -> None:
        need(writer, Capability.CONDITIONAL_CREATE)
        small, large = b"small", os.urandom(self.stream_size)
        _stream(writer, "m/c", small, 2, mode=PutMode.CREATE)
        for data in (b"other", large):
            with pytest.raises(AlreadyExists, match="'m/c'"):
                _stream(writer, "m/c", data, 1 << 16, mode=PutMode.CREATE)
        assert store.get("m/c") == small
        _stream(writer, "m/big", large, 1 << 20, mode=PutMode.CREATE)
        assert store.get("m/big") == large
        assert _keys(store) == ["m/big", "m/c"]
        if Capability.COMPARE_AND_SWAP not in writer.capabilities:
            return
        v1 = store.head("m/c").version
        _stream(writer, "m/c", b"swapped", 3, mode=PutMode.UPDATE, expected_version=v1)
        assert store.get("m/c") == b"swapped"
        with pytest.raises(PreconditionFailed, match="'m/c'"):
            _stream(writer, "m/c", b"stale", 3, mode=PutMode.UPDATE, expected_version=v1)
        with pytest.raises(NotFound, match="'m/none'"):
            _stream(writer, "m/none", b"x", 1, mode=PutMode.UPDATE, expected_version=v1)
        assert store.get("m/c") == b"swapped"
        assert _keys(store) == ["m/big", "m/c"]

    def test_stream_arguments_are_checked_first(self, store: Store, writer: Store) -> None:
        with pytest.raises(InvalidKey):
            store.open_writer("a/../b")
        with pytest.raises(InvalidKey):
            writer.open_writer("")
        if Capability.WRITE not in store.capabilities:
            with pytest.raises(CapabilityNotSupported):
                store.open_writer("k")
        need(writer, Capability.COMPARE_AND_SWAP)
        with pytest.raises(InvalidArgument, match="expected_version"):
            writer.open_writer("k", mode=PutMode.UPDATE)
        with pytest.raises(InvalidArgument, match="expected_version"):
            writer.open_writer("k", expected_version="v")
        with pytest.raises(InvalidArgument, match="PutMode"):
            writer.open_writer("k", mode="create")  # type: ignore[arg-type]
        with pytest.raises(CapabilityNotSupported):
            writer.read_only().open_writer("k")
        assert _keys(store) == []

    @pytest.mark.parametrize("large", [False, True], ids=["small", "large"])
    def test_stream_faults_leave_nothing_visible(
        self, store: Store, writer: Store, large: bool
    ) -> None:
        need(writer, Capability.WRITE)
        data = os.urandom(self.stream_size if large else 3 * CHUNK_BYTES + 7)
        pieces = 4  # the writer hands over a piece per CHUNK_BYTES, and the rest at commit
        for n in range(1, pieces + 1):
            faulty = FaultyStore(writer, fail_on=n, kinds=("write",))
            with pytest.raises(InjectedFault):
                _stream(faulty, f"f/{n}", data, 1 << 16)
            assert faulty.failed
        faulty = FaultyStore(writer, fail_on=1, kinds=("put",))  # the commit itself fails
        with pytest.raises(InjectedFault):
            _stream(faulty, "f/put", data, 1 << 16)
        assert _keys(store) == []
        lost = FaultyStore(writer, fail_on=1, kinds=("put",), after=True)
        with pytest.raises(InjectedFault):
            _stream(lost, "f/lost-ack", data, 1 << 16)
        assert store.get("f/lost-ack") == data  # written, only the answer was lost
        assert _keys(store) == ["f/lost-ack"]

    def test_stream_create_race_has_one_winner(self, store: Store, writer: Store) -> None:
        need(writer, Capability.CONDITIONAL_CREATE)

        def create(i: int) -> object:
            _stream(writer, "race/k", f"writer {i}".encode() * 100, 64, mode=PutMode.CREATE)
            return i

        results = race(8, create)
        winners = [r for r in results if isinstance(r, int)]
        assert len(winners) == 1, results
        assert all(isinstance(r, AlreadyExists) for r in results if not isinstance(r, int))
        assert store.get("race/k") == f"writer {winners[0]}".encode() * 100

    def test_stream_pieces_property(self, store: Store, writer: Store) -> None:
        """Whatever the piece sizes, the object is their concatenation."""
        need(writer, Capability.WRITE)

        @settings(
            max_examples=self.stream_examples,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        )
        @given(
            sizes=st.lists(
                st.one_of(st.integers(0, 300), st.integers(CHUNK_BYTES - 3, CHUNK_BYTES + 3)),
                max_size=6,
            ),
            fill=st.integers(0, 255),
        )
        def check(sizes: list[int], fill: int) -> None:
            pieces = [bytes([(fill + i) % 256]) * n for i, n in enumerate(sizes)]
            with writer.open_writer("p/k") as w:
                for piece in pieces:
                    w.write(piece)
            assert store.get("p/k") == b"".join(pieces)

        check()
