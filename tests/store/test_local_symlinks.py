"""LocalStore never reads, writes, lists or deletes outside its root through a symbolic link
inside the root (issue 11, section 3)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings

from parquetry.errors import InvalidKey, ParquetryError, UnsafePath
from parquetry.store import LocalStore, PutMode, Store


def snapshot_tree(path: Path) -> dict[str, bytes]:
    """Every file under ``path`` with its content (links not followed)."""
    out: dict[str, bytes] = {}
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            full = Path(dirpath) / name
            out[str(full.relative_to(path))] = b"<link>" if full.is_symlink() else full.read_bytes()
    return out


@pytest.fixture
def planted(tmp_path: Path) -> tuple[LocalStore, Path]:
    """A store whose root holds links to a directory and a file outside it."""
    outside = tmp_path / "outside"
    (outside / "sub").mkdir(parents=True)
    (outside / "secret").write_bytes(b"outside secret")
    (outside / "sub" / "deeper").write_bytes(b"deeper secret")
    store = LocalStore(tmp_path / "root", fsync=False)
    store.put("real/obj", b"inside")
    root = tmp_path / "root"
    (root / "dirlink").symlink_to(outside)
    (root / "filelink").symlink_to(outside / "secret")
    (root / "real" / "dirlink").symlink_to(outside)
    (root / "real" / "filelink").symlink_to(outside / "secret")
    (root / "dangling").symlink_to(tmp_path / "nowhere")
    (root / "relative").symlink_to("../outside")
    return store, outside


#: Keys crossing a link inside the root: the link as a directory or as the object itself.
LINKED_KEYS = [
    "dirlink/secret",
    "dirlink/sub/deeper",
    "dirlink/new",
    "real/dirlink/secret",
    "relative/secret",
    "filelink",
    "real/filelink",
    "dangling",
    "dangling/new",
]


def calls(store: Store, key: str) -> dict[str, Callable[[], object]]:
    """Every Store method applied to ``key`` (as source and as destination)."""
    return {
        "get": lambda: store.get(key),
        "get_range": lambda: store.get_range(key, 0, 4),
        "get_range_empty": lambda: store.get_range(key, 2, 2),
        "get_ranges": lambda: store.get_ranges(key, [(0, 2), (3, 5)]),
        "read_buffer": lambda: store.read_buffer(key),
        "open": lambda: store.open(key).read(),
        "head": lambda: store.head(key),
        "exists": lambda: store.exists(key),
        "put": lambda: store.put(key, b"pwned"),
        "put_create": lambda: store.put(key, b"pwned", mode=PutMode.CREATE),
        "put_update": lambda: store.put(key, b"pwned", mode=PutMode.UPDATE, expected_version="x"),
        "delete": lambda: store.delete(key),
        "delete_missing_ok": lambda: store.delete(key, missing_ok=True),
        "delete_many": lambda: store.delete_many([key]),
        "copy_from": lambda: store.copy(key, "real/copy"),
        "copy_to": lambda: store.copy("real/obj", key),
        "move_from": lambda: store.move(key, "real/moved"),
        "move_to": lambda: store.move("real/obj", key),
        "list": lambda: list(store.list(key)),
        "list_dir": lambda: store.list_dir(key),
        "path": lambda: store.path(key),  # type: ignore[attr-defined]
    }


@pytest.mark.parametrize("key", LINKED_KEYS)
def test_no_operation_crosses_a_link(planted: tuple[LocalStore, Path], key: str) -> None:
    store, outside = planted
    before = snapshot_tree(outside)
    for name, call in calls(store, key).items():
        with pytest.raises(UnsafePath, match="symbolic link") as info:
            call()
        assert info.value.key is not None, name
        assert isinstance(info.value, InvalidKey)
        assert snapshot_tree(outside) == before, name
    assert store.get("real/obj") == b"inside"  # a refused move_to left the source alone
    assert not store.exists("real/copy")
    assert not store.exists("real/moved")


def test_listings_skip_links(planted: tuple[LocalStore, Path]) -> None:
    store, _outside = planted
    assert sorted(m.key for m in store.list()) == ["real/obj"]
    assert [m.key for m in store.list("real")] == ["real/obj"]
    level = store.list_dir("")
    assert (level.objects, level.prefixes) == ((), ("real",))
    assert [m.key for m in store.list_dir("real").objects] == ["real/obj"]


def test_delete_never_prunes_through_a_link(planted: tuple[LocalStore, Path]) -> None:
    store, outside = planted
    before = snapshot_tree(outside)
    store.delete("real/obj")
    assert snapshot_tree(outside) == before
    assert list(store.list()) == []


def test_a_linked_root_is_the_users_choice(tmp_path: Path) -> None:
    (tmp_path / "target").mkdir()
    (tmp_path / "alias").symlink_to(tmp_path / "target")
    store = LocalStore(tmp_path / "alias")
    store.put("a/b", b"1")
    assert (tmp_path / "target" / "a" / "b").read_bytes() == b"1"
    assert [m.key for m in store.list()] == ["a/b"]
    store.delete("a/b")
    assert list((tmp_path / "target").iterdir()) == []


def test_a_fifo_in_the_root_does_not_block(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "root")
    store.put("x", b"1")
    os.mkfifo(tmp_path / "root" / "fifo")
    for call in (
        lambda: store.get("fifo"),
        lambda: store.read_buffer("fifo"),
        lambda: store.get_range("fifo", 0, 1),
        lambda: store.head("fifo"),
    ):
        with pytest.raises(ParquetryError):
            call()
    assert not store.exists("fifo")
    assert [m.key for m in store.list()] == ["x"]


def test_foreign_names_are_not_listed(tmp_path: Path) -> None:
    """Names no key can spell (control characters, bytes that are not UTF-8, written by other
    programs) are skipped by listings instead of yielding keys every method refuses."""
    store = LocalStore(tmp_path / "root")
    store.put("ok", b"1")
    root = os.fsencode(tmp_path / "root")
    for name in (b"nl\nname", b"\x80bad-utf8", b"tab\tx"):
        with open(os.path.join(root, name), "wb") as f:
            f.write(b"x")
    assert [m.key for m in store.list()] == ["ok"]
    assert [m.key for m in store.list_dir("").objects] == ["ok"]


def test_a_root_link_pointed_elsewhere_later(tmp_path: Path) -> None:
    """The fast path remembers where the root resolved; a root link re-pointed later is
    followed to its new target, never mistaken for a link inside the root."""
    for name in ("one", "two"):
        (tmp_path / name).mkdir()
    (tmp_path / "alias").symlink_to(tmp_path / "one")
    store = LocalStore(tmp_path / "alias", fsync=False)
    store.put("d/k", b"1")
    (tmp_path / "alias").unlink()
    (tmp_path / "alias").symlink_to(tmp_path / "two")
    store.put("d/k", b"2")
    assert store.get("d/k") == b"2"
    assert store.head("d/k").size == 1
    assert (tmp_path / "one" / "d" / "k").read_bytes() == b"1"
    assert (tmp_path / "two" / "d" / "k").read_bytes() == b"2"


_NAMES = st.sampled_from(["a", "b", "c"])
_KEYS = st.lists(_NAMES, min_size=1, max_size=3).map("/".join)


def _plantable(root: Path, key: str) -> bool:
    """Whether the test can make ``key``'s parent directories without crossing a link."""
    path = root
    for segment in key.split("/")[:-1]:
        path = path / segment
        if path.is_symlink() or (path.exists() and not path.is_dir()):
            return False
    return True


_OPS = st.sampled_from(["put", "create", "get", "head", "exists", "delete", "list", "move", "copy"])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    links=st.lists(st.tuples(_KEYS, st.booleans()), min_size=1, max_size=3),
    ops=st.lists(st.tuples(_OPS, _KEYS, _KEYS), min_size=1, max_size=12),
)
def test_links_anywhere_never_leak(
    links: list[tuple[str, bool]], ops: list[tuple[str, str, str]]
) -> None:
    """Links planted at random places, random operations: each works or raises a
    ParquetryError, the outside never changes, listings never show what is behind a link."""
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        outside = base / "outside"
        (outside / "a" / "b").mkdir(parents=True)
        for rel in ("a/b/c", "a/c", "c", "b"):
            (outside / rel).write_bytes(b"outside " + rel.encode())
        before = snapshot_tree(outside)
        store = LocalStore(base / "root", fsync=False)
        for key, to_dir in links:
            where = base / "root" / key
            if not _plantable(base / "root", key):
                continue  # planting it would go through a link (or a file) itself
            where.parent.mkdir(parents=True, exist_ok=True)
            if not where.exists() and not where.is_symlink():
                where.symlink_to(outside if to_dir else outside / "c")
        calls: dict[str, Callable[[str, str], object]] = {
            "put": lambda k, _: store.put(k, b"new"),
            "create": lambda k, _: store.put(k, b"new", mode=PutMode.CREATE),
            "get": lambda k, _: store.get(k),
            "head": lambda k, _: store.head(k),
            "exists": lambda k, _: store.exists(k),
            "delete": lambda k, _: store.delete(k, missing_ok=True),
            "list": lambda k, _: list(store.list(k)),
            "move": lambda k, d: store.move(k, d),
            "copy": lambda k, d: store.copy(k, d),
        }
        for op, key, other in ops:
            try:
                got = calls[op](key, other)
            except ParquetryError:
                continue
            if op == "get":
                assert not bytes(got).startswith(b"outside")  # type: ignore[arg-type]
        assert snapshot_tree(outside) == before
        for m in store.list():
            path = base / "root"
            for segment in m.key.split("/"):
                path = path / segment
                assert not path.is_symlink(), m.key
            assert not store.get(m.key).startswith(b"outside")
