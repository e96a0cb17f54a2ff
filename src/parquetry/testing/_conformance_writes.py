"""Conformance checks for writes (modes, delete, copy, move) and listings."""

from __future__ import annotations

import pytest

from parquetry.errors import (
    AlreadyExists,
    InvalidArgument,
    InvalidKey,
    NotFound,
    PreconditionFailed,
)
from parquetry.store import Capability, PutMode, Store

__all__ = ["ListingChecks", "WriteChecks", "need"]


def need(store: Store, *caps: Capability) -> None:
    """Skip the calling test unless ``store`` has every capability in ``caps``."""
    missing = [c.value for c in caps if c not in store.capabilities]
    if missing:
        pytest.skip(f"{store!r} lacks {', '.join(missing)}")


class WriteChecks:
    """Put modes, delete, copy and move."""

    def test_overwrite_replaces(self, store: Store) -> None:
        need(store, Capability.WRITE)
        store.put("k", b"one")
        meta = store.put("k", b"second")
        assert store.get("k") == b"second"
        assert meta.size == 6

    def test_create_if_absent(self, store: Store) -> None:
        need(store, Capability.CONDITIONAL_CREATE)
        meta = store.put("c/k", b"first", mode=PutMode.CREATE)
        assert meta.version == store.head("c/k").version
        with pytest.raises(AlreadyExists, match="'c/k'") as info:
            store.put("c/k", b"second", mode=PutMode.CREATE)
        assert isinstance(info.value, FileExistsError)
        assert info.value.key == "c/k"
        assert store.get("c/k") == b"first"

    def test_compare_and_swap(self, store: Store) -> None:
        need(store, Capability.COMPARE_AND_SWAP)
        v1 = store.put("cas", b"1")
        v2 = store.put("cas", b"2", mode=PutMode.UPDATE, expected_version=v1.version)
        assert v2.version != v1.version
        assert v2.version == store.head("cas").version
        assert store.get("cas") == b"2"
        with pytest.raises(PreconditionFailed, match="'cas'") as info:
            store.put("cas", b"3", mode=PutMode.UPDATE, expected_version=v1.version)
        assert info.value.key == "cas"
        assert info.value.expected == v1.version
        assert store.get("cas") == b"2"
        with pytest.raises(NotFound, match="'absent'"):
            store.put("absent", b"1", mode=PutMode.UPDATE, expected_version=v1.version)
        assert not store.exists("absent")

    def test_put_mode_arguments(self, store: Store) -> None:
        need(store, Capability.COMPARE_AND_SWAP)
        with pytest.raises(InvalidArgument, match="expected_version"):
            store.put("k", b"1", mode=PutMode.UPDATE)
        with pytest.raises(InvalidArgument, match="expected_version"):
            store.put("k", b"1", expected_version="v")
        with pytest.raises(InvalidArgument, match="PutMode"):
            store.put("k", b"1", mode="create")  # type: ignore[arg-type]
        assert not store.exists("k")

    def test_delete(self, store: Store) -> None:
        need(store, Capability.DELETE)
        store.put("d/a/x", b"1")
        store.put("d/b", b"2")
        store.delete("d/a/x")
        assert not store.exists("d/a/x")
        with pytest.raises(NotFound, match="'d/a/x'") as info:
            store.delete("d/a/x")
        assert info.value.key == "d/a/x"
        store.delete("d/a/x", missing_ok=True)
        store.delete("never/there", missing_ok=True)
        # An emptied "directory" vanishes, as on an object store.
        listing = store.list_dir("d")
        assert listing.prefixes == ()
        assert [m.key for m in listing.objects] == ["d/b"]
        assert store.get("d/b") == b"2"

    def test_create_after_delete(self, store: Store) -> None:
        need(store, Capability.DELETE, Capability.CONDITIONAL_CREATE, Capability.COMPARE_AND_SWAP)
        old = store.put("k", b"same")
        store.delete("k")
        new = store.put("k", b"same", mode=PutMode.CREATE)
        assert store.get("k") == b"same"
        if old.version != new.version:  # an ETag of equal content may repeat
            with pytest.raises(PreconditionFailed):
                store.put("k", b"x", mode=PutMode.UPDATE, expected_version=old.version)

    def test_delete_many(self, store: Store) -> None:
        need(store, Capability.DELETE)
        for i in range(5):
            store.put(f"m/{i}", b"x")
        store.delete_many([f"m/{i}" for i in range(3)] + ["m/missing"])
        assert sorted(m.key for m in store.list("m")) == ["m/3", "m/4"]
        with pytest.raises(NotFound):
            store.delete_many(["m/3", "m/missing"], missing_ok=False)
        with pytest.raises(InvalidKey):
            store.delete_many(["m/4", "../x"])

    def test_copy(self, store: Store) -> None:
        need(store, Capability.WRITE)
        store.put("src/a", b"payload")
        store.put("dst/b", b"old")
        store.copy("src/a", "dst/b")
        store.copy("src/a", "dst/new/c")
        assert store.get("dst/b") == b"payload"
        assert store.get("dst/new/c") == b"payload"
        assert store.get("src/a") == b"payload"
        with pytest.raises(NotFound, match="'src/missing'"):
            store.copy("src/missing", "dst/x")
        assert not store.exists("dst/x")

    def test_move(self, store: Store) -> None:
        need(store, Capability.WRITE, Capability.DELETE)
        store.put("from/a", b"payload")
        store.put("to/b", b"old")
        store.move("from/a", "to/b")
        assert store.get("to/b") == b"payload"
        assert not store.exists("from/a")
        assert store.list_dir("").prefixes == ("to",)
        store.move("to/b", "to/b")
        assert store.get("to/b") == b"payload"
        with pytest.raises(NotFound, match="'from/a'"):
            store.move("from/a", "to/c")
        assert not store.exists("to/c")


class ListingChecks:
    """Recursive and one-level listings, prefixes with directory semantics."""

    many_keys: int

    def test_list_nested(self, store: Store, writer: Store) -> None:
        keys = ["a/b/c", "a/b/d", "a/e", "ab/f", "a.txt", "top", "x/y/z/w"]
        for k in keys:
            writer.put(k, k.encode())

        def listed(prefix: str) -> list[str]:
            return sorted(m.key for m in store.list(prefix))

        assert listed("") == sorted(keys)
        assert listed("a") == ["a/b/c", "a/b/d", "a/e"]  # not ab/f, not a.txt
        assert listed("a/") == listed("a")
        assert listed("a/b") == ["a/b/c", "a/b/d"]
        assert listed("x/y") == ["x/y/z/w"]
        assert listed("missing") == []
        assert listed("a/e") == []  # an object is not a directory
        for meta in store.list(""):
            assert meta.size == len(meta.key)
            assert meta.version == store.head(meta.key).version

        root = store.list_dir("")
        assert [m.key for m in root.objects] == ["a.txt", "top"]
        assert root.prefixes == ("a", "ab", "x")
        level = store.list_dir("a")
        assert [m.key for m in level.objects] == ["a/e"]
        assert level.prefixes == ("a/b",)
        assert store.list_dir("a/").prefixes == ("a/b",)
        assert store.list_dir("x").prefixes == ("x/y",)
        assert store.list_dir("x").objects == ()
        assert store.list_dir("nothing").objects == ()
        assert store.list_dir("nothing").prefixes == ()

    def test_list_many_keys(self, store: Store, writer: Store) -> None:
        n = self.many_keys
        keys = [f"many/{i % 10}/{i:06d}" for i in range(n)]
        writer.map_concurrent(lambda k: writer.put(k, k[-6:].encode()), keys, max_workers=8)
        writer.put("other/x", b"1")
        listed = sorted(m.key for m in store.list("many"))
        assert listed == sorted(keys)
        assert all(m.size == 6 for m in store.list("many/3"))
        assert len(list(store.list("many/3"))) == len([k for k in keys if k.startswith("many/3/")])
        assert store.list_dir("many").prefixes == tuple(f"many/{d}" for d in range(10))
        assert len(store.list_dir("many/7").objects) == n // 10
