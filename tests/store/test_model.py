"""Stateful property test: MemoryStore and LocalStore behave like a dict of bytes."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from parquetry.errors import AlreadyExists, InvalidKey, NotFound, PreconditionFailed
from parquetry.store import LocalStore, MemoryStore, PutMode, Store, join_key, validate_key

# Few distinct names so that operations collide; no name is both a file and a "directory".
KEYS = st.sampled_from(["a", "b/c", "b/d", "e/f/g", "e/f/h", "e/i"])
DATA = st.binary(max_size=64)


class StoreModel(RuleBasedStateMachine):
    """Every operation on the store and on a dict model gives the same answer."""

    def __init__(self) -> None:
        super().__init__()
        self.store = self.make_store()
        self.model: dict[str, bytes] = {}
        self.versions: dict[str, str] = {}  # last version seen per key
        self.stale: dict[str, str] = {}  # a version replaced since

    def make_store(self) -> Store:
        raise NotImplementedError

    def remember(self, key: str, version: str | None) -> None:
        assert version is not None
        if key in self.versions:
            self.stale[key] = self.versions[key]
        self.versions[key] = version

    @rule(key=KEYS, data=DATA)
    def overwrite(self, key: str, data: bytes) -> None:
        meta = self.store.put(key, data)
        self.model[key] = data
        self.remember(key, meta.version)

    @rule(key=KEYS, data=DATA)
    def create(self, key: str, data: bytes) -> None:
        if key in self.model:
            with pytest.raises(AlreadyExists):
                self.store.put(key, data, mode=PutMode.CREATE)
        else:
            meta = self.store.put(key, data, mode=PutMode.CREATE)
            self.model[key] = data
            self.remember(key, meta.version)

    @precondition(lambda self: bool(self.model))
    @rule(data=DATA, pick=st.randoms(use_true_random=False))
    def swap_current(self, data: bytes, pick: object) -> None:
        key = sorted(self.model)[pick.randrange(len(self.model))]  # type: ignore[attr-defined]
        meta = self.store.put(key, data, mode=PutMode.UPDATE, expected_version=self.versions[key])
        self.model[key] = data
        self.remember(key, meta.version)

    @precondition(lambda self: bool(self.stale))
    @rule(data=DATA)
    def swap_stale(self, data: bytes) -> None:
        key = sorted(self.stale)[0]
        stale = self.stale[key]
        error = PreconditionFailed if key in self.model else NotFound
        assert stale != self.versions.get(key)  # versions never repeat on these backends
        with pytest.raises(error):
            self.store.put(key, data, mode=PutMode.UPDATE, expected_version=stale)

    @rule(key=KEYS, missing_ok=st.booleans())
    def delete(self, key: str, missing_ok: bool) -> None:
        if key in self.model or missing_ok:
            self.store.delete(key, missing_ok=missing_ok)
            if key in self.model:
                self.stale[key] = self.versions.pop(key)
            self.model.pop(key, None)
        else:
            with pytest.raises(NotFound):
                self.store.delete(key)

    @rule(key=KEYS)
    def get(self, key: str) -> None:
        if key in self.model:
            assert self.store.get(key) == self.model[key]
            assert self.store.head(key).version == self.versions[key]
        else:
            with pytest.raises(NotFound):
                self.store.get(key)

    @rule(prefix=st.sampled_from(["", "b", "e", "e/f", "a", "x"]))
    def list_prefix(self, prefix: str) -> None:
        start = prefix + "/" if prefix else ""
        expected = sorted(k for k in self.model if k.startswith(start))
        assert sorted(m.key for m in self.store.list(prefix)) == expected
        level = self.store.list_dir(prefix)
        rests = [k[len(start) :] for k in expected]
        assert [m.key for m in level.objects] == sorted(start + r for r in rests if "/" not in r)
        dirs = {start + r.split("/")[0] for r in rests if "/" in r}
        assert level.prefixes == tuple(sorted(dirs))

    @invariant()
    def sizes_match(self) -> None:
        for meta in self.store.list():
            assert meta.size == len(self.model[meta.key])


class MemoryModel(StoreModel):
    def make_store(self) -> Store:
        return MemoryStore()


class LocalModel(StoreModel):
    def make_store(self) -> Store:
        self.tmp = tempfile.mkdtemp(prefix="parquetry-model-")
        return LocalStore(Path(self.tmp) / "root", fsync=False)

    def teardown(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)


_SETTINGS = settings(
    max_examples=40,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestMemoryModel = _SETTINGS(MemoryModel).TestCase
TestLocalModel = _SETTINGS(LocalModel).TestCase


@st.composite
def _segments(draw: st.DrawFn) -> list[str]:
    alphabet = st.characters(
        exclude_characters="/\\\x00\x7f", exclude_categories=("Cs",), min_codepoint=0x20
    )
    segment = st.text(alphabet, min_size=1, max_size=8).filter(lambda s: s not in (".", ".."))
    return draw(st.lists(segment, min_size=1, max_size=4))


@settings(max_examples=100, deadline=None)
@given(_segments())
def test_valid_keys_round_trip_through_join(segments: list[str]) -> None:
    key = join_key(*segments)
    assert validate_key(key) == key
    assert key.split("/") == segments
    with pytest.raises(InvalidKey):
        validate_key(key + "//x")
    with pytest.raises(InvalidKey):
        validate_key("/" + key)


def _slow_rules_reject(key: str) -> bool:
    """The key rules spelled out one by one: the oracle for the fast check."""
    if key == "" or key.startswith("/"):
        return True
    if any(ord(c) < 0x20 or c in "\x7f\\" or 0xD800 <= ord(c) <= 0xDFFF for c in key):
        return True
    if len(key.encode("utf-8")) > 1024:
        return True
    return any(seg in ("", ".", "..") or len(seg.encode("utf-8")) > 255 for seg in key.split("/"))


_CHARS = ["a", ".", "/", "\\", "\x00", "\x1f", "\x7f", "\udc80", "\ud83d", "é", "\U0001f600", "b"]


@settings(max_examples=300, deadline=None)
@given(st.text(st.sampled_from(_CHARS), max_size=8))
def test_key_check_matches_the_rules(key: str) -> None:
    if _slow_rules_reject(key):
        with pytest.raises(InvalidKey):
            validate_key(key)
    else:
        assert validate_key(key) == key


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["a", "é", "\U0001f600", ".", "\x01"]), st.integers(1, 300)),
        min_size=1,
        max_size=12,
    )
)
def test_key_length_limits_match_the_rules(runs: list[tuple[str, int]]) -> None:
    """Long segments and long keys, near the 255- and 1,024-byte limits."""
    key = "/".join(char * count for char, count in runs)
    if _slow_rules_reject(key):
        with pytest.raises(InvalidKey, match="store key"):
            validate_key(key)
    else:
        assert validate_key(key) == key
