"""ReadOnlyStore, CountingStore and FaultyStore: gating before I/O, counts, injected faults."""

from __future__ import annotations

import pickle

import pytest

from parquetry.errors import CapabilityNotSupported, NotFound
from parquetry.store import Capability, MemoryStore, PutMode, ReadOnlyStore
from parquetry.testing import CountingStore, FaultyStore, InjectedFault


def test_read_only_refuses_writes_before_any_io() -> None:
    inner = MemoryStore()
    inner.put("k", b"1")
    counting = CountingStore(inner)
    view = counting.read_only()
    assert isinstance(view, ReadOnlyStore)
    refused = {
        "write": [
            lambda: view.put("k", b"2"),
            lambda: view.put("n", b"2", mode=PutMode.CREATE),
            lambda: view.put("k", b"2", mode=PutMode.UPDATE, expected_version="1"),
            lambda: view.copy("k", "c"),
            lambda: view.move("k", "m"),
        ],
        "delete": [lambda: view.delete("k"), lambda: view.delete_many(["k"])],
    }
    for capability, calls in refused.items():
        for call in calls:
            with pytest.raises(CapabilityNotSupported, match=capability) as info:
                call()
            assert info.value.capability == capability
            assert info.value.store == inner.url
    assert counting.total == 0  # refused before any request reached the store
    assert view.get("k") == b"1"
    assert counting.counts == {"get": 1}


def test_require_names_the_first_missing_capability() -> None:
    view = MemoryStore().read_only()
    view.require(Capability.READ, Capability.LIST)
    with pytest.raises(CapabilityNotSupported) as info:
        view.require(Capability.READ, Capability.COMPARE_AND_SWAP, Capability.WRITE)
    assert info.value.capability == "compare_and_swap"
    assert "compare_and_swap" in str(info.value)


def test_counting_store_counts_every_kind() -> None:
    store = CountingStore(MemoryStore())
    store.put("a", b"12345")
    store.get("a")
    store.get_range("a", 1, 3)
    store.get_ranges("a", [(0, 1), (2, 4)])
    store.head("a")
    store.exists("a")
    store.copy("a", "b")
    store.move("b", "c")
    list(store.list())
    store.list_dir("")
    store.delete("c")
    assert store.counts == {
        "put": 1,
        "get": 1,
        "get_range": 3,
        "head": 1,
        "exists": 1,
        "copy": 1,
        "move": 1,
        "list": 1,
        "list_dir": 1,
        "delete": 1,
    }
    assert store.total == 12
    assert store.bytes_written == 5
    assert store.bytes_read == 5 + 2 + 1 + 2
    assert ("move", "b") in store.log
    store.reset()
    assert (store.total, store.bytes_read, store.bytes_written, store.log) == (0, 0, 0, [])


def test_counting_and_faulty_stores_pickle() -> None:
    inner = MemoryStore("pickled-wrappers")
    counting = CountingStore(inner)
    counting.put("k", b"1")
    clone = pickle.loads(pickle.dumps(counting))
    assert clone == counting
    assert clone.get("k") == b"1"
    assert clone.counts["get"] == 1
    faulty = FaultyStore(inner, fail_on=2, kinds=("get",))
    copy = pickle.loads(pickle.dumps(faulty))
    assert copy == faulty
    copy.get("k")
    with pytest.raises(InjectedFault):
        copy.get("k")


def test_faulty_store_fails_the_nth_call_of_a_kind() -> None:
    store = FaultyStore(MemoryStore(), fail_on=2, kinds=("put",))
    store.put("a", b"1")
    store.get("a")  # not a counted kind
    with pytest.raises(InjectedFault, match="put 'b'") as info:
        store.put("b", b"2")
    assert info.value.key == "b"
    assert store.failed
    assert not store.exists("b")  # failed before the write
    store.put("c", b"3")  # only the 2nd call fails
    assert store.calls == 3


def test_faulty_store_always_and_custom_error() -> None:
    store = FaultyStore(
        MemoryStore(),
        always=True,
        kinds=("copy", "move"),
        error=lambda kind, key: NotFound(f"boom {kind} {key}", key=key),
    )
    store.put("a", b"1")
    for call in (lambda: store.copy("a", "b"), lambda: store.move("a", "b")):
        with pytest.raises(NotFound, match="boom"):
            call()
    assert store.get("a") == b"1"
    assert not store.exists("b")


def test_faulty_store_after_loses_the_acknowledgement() -> None:
    store = FaultyStore(MemoryStore(), fail_on=1, kinds=("put",), after=True)
    with pytest.raises(InjectedFault):
        store.put("k", b"written")
    assert store.get("k") == b"written"  # the write happened; only its answer was lost


def test_faulty_store_without_faults_counts_calls() -> None:
    store = FaultyStore(MemoryStore())
    store.put("k", b"1")
    store.get("k")
    assert store.calls == 2
    assert not store.failed


def test_counting_store_counts_failed_requests() -> None:
    from parquetry.errors import NotFound

    store = CountingStore(MemoryStore())
    with pytest.raises(NotFound):
        store.get("missing")
    with pytest.raises(NotFound):
        store.get_range("missing", 0, 10)
    assert store.counts == {"get": 1, "get_range": 1}
    assert store.bytes_read == 0


def test_streamed_writes_through_wrappers() -> None:
    """A streamed object is one ``put`` for CountingStore (bytes counted) and reaches a
    wrapper that overrides ``_put`` through that ``_put`` (here: a dry run records it and
    writes nothing), so wrappers written before streaming keep seeing every write."""
    from parquetry.cli.maintenance import DryRunStore

    inner = MemoryStore()
    counting = CountingStore(inner)
    with counting.open_writer("s/k") as w:
        for _ in range(3):
            w.write(b"x" * 700_000)
    assert counting.counts == {"put": 1}
    assert counting.bytes_written == 2_100_000
    assert counting.log == [("put", "s/k")]
    dry = DryRunStore(inner)
    with dry.open_writer("s/dry") as w:
        w.write(b"abc")
    assert dry.written == ["s/dry"]
    assert not inner.exists("s/dry")
    assert sorted(m.key for m in inner.list()) == ["s/k"]
