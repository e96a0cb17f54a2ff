"""Conformance checks for hostile keys: every Store method either behaves like a dict of
bytes or raises :class:`~parquetry.errors.InvalidKey`, identically on every backend.

The key rule itself lives in :mod:`parquetry.store.keys`; these checks hold each backend to
it (a valid key works, an invalid one is refused before any I/O) and drive random hostile
keys through every method against a dict model.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings

from parquetry.errors import InvalidKey, NotFound, ParquetryError, UnsafePath
from parquetry.store import Capability, PutMode, Store
from parquetry.store.keys import validate_key

__all__ = ["HOSTILE_VALID_KEYS", "HostileKeyChecks", "hostile_keys"]

_NFC = unicodedata.normalize("NFC", "caf\u00e9")
_NFD = unicodedata.normalize("NFD", "caf\u00e9")

#: Odd but valid keys: every backend must store and return them exactly.
HOSTILE_VALID_KEYS: dict[str, str] = {
    "space": "a b/c d",
    "percent": "a%2Fb/%00/%",
    "url chars": "q?x=1&y#frag/~t/+p",
    "brackets": "{a}/[b]/<c>/|d|/\"e\"/'f'/`g`/^h^/*",
    "dots inside": ".a/a./...",
    "equals": "=/x=/=y/col=val",
    "nfc": _NFC,
    "nfd": _NFD,
    "nfc dir": f"{_NFC}/x",
    "nfd dir": f"{_NFD}/x",
    "emoji": "\U0001f600/\u2028/\ufeffbom/\u200b",
    "c1 and rtl": "\u0085x/\u202eevil",
    "segment of 255 bytes": "s/" + "x" * 255,
    "multibyte segment of 255 bytes": "m/" + "\u00e9" * 127 + "x",
    "key of 1000 bytes": "k/" + "/".join(["y" * 99] * 9) + "/" + "z" * 98,
    "400 segments": "/".join(["d"] * 400),
}

#: Invalid keys beyond the basic ones of ``BAD_KEYS``: refused on every backend.
HOSTILE_INVALID_KEYS: dict[str, str] = {
    "control char": "a\x01b",
    "newline": "a/b\nc",
    "DEL": "a\x7f",
    "lone surrogate": "\udc80",
    "lone high surrogate": "a/\ud800/b",
    "segment of 256 bytes": "s/" + "x" * 256,
    "multibyte segment of 256 bytes": "m/" + "\u00e9" * 128,
    "key of 1,025 bytes": "k/" + "/".join(["y" * 99] * 10) + "/" + "z" * 23,
    "1,100 segments": "/".join(["d"] * 1100),
    "trailing slash": "a/b/",
    "double slash": "a//b",
    "backslash dotdot": "a\\..\\b",
}

_SEGMENTS = st.one_of(
    st.sampled_from(["a", "b", "a b", "=", "x=1", "%", "%2F", ".x", "..x", "~", _NFC, _NFD]),
    st.sampled_from(["", ".", "..", "\\", "\x00", "\x01", "\x1f", "\x7f", "\udc80", "\ud83d"]),
    st.text(st.characters(codec="utf-8", exclude_characters="/"), min_size=1, max_size=6),
    st.text(st.characters(), min_size=1, max_size=4),  # surrogates and controls too
    st.builds(
        lambda c, n: c * n, st.sampled_from(["x", "\u00e9", "\U0001f600"]), st.integers(60, 260)
    ),
)


@st.composite
def hostile_keys(draw: st.DrawFn) -> str:
    """Keys built from hostile segments, with stray leading, trailing and doubled slashes,
    occasionally very deep or very long."""
    shape = draw(st.integers(0, 9))
    if shape == 0:
        return "/".join(["d"] * draw(st.integers(300, 1100)))
    segments = draw(st.lists(_SEGMENTS, min_size=1, max_size=5))
    key = "/".join(segments)
    if shape == 1:
        key = "/" + key
    elif shape == 2:
        key += "/"
    return key


def _under(model: dict[str, bytes], prefix: str) -> list[str]:
    start = prefix[:-1] if prefix.endswith("/") and len(prefix) > 1 else prefix
    start = f"{start}/" if start else ""
    return sorted(k for k in model if k.startswith(start))


class HostileKeyChecks:
    """Hostile keys through every Store method (needs the ``store`` and ``writer`` fixtures)."""

    #: Hypothesis examples of the hostile-key property (lower it for slow backends).
    hostile_examples: int = 60

    def _all_methods(self, store: Store, writer: Store, key: str) -> dict[str, Callable[[], Any]]:
        return {
            "put": lambda: writer.put(key, b"v1"),
            "put_create": lambda: writer.put(key, b"v2", mode=PutMode.CREATE),
            "get": lambda: store.get(key),
            "get_range": lambda: store.get_range(key, 0, 1),
            "get_ranges": lambda: store.get_ranges(key, [(0, 1)]),
            "read_buffer": lambda: bytes(store.read_buffer(key)),
            "open": lambda: store.open(key).read(),
            "head": lambda: store.head(key),
            "exists": lambda: store.exists(key),
            "list": lambda: list(store.list(key)),
            "list_dir": lambda: store.list_dir(key),
            "copy_to": lambda: writer.copy("good", key),
            "copy_from": lambda: writer.copy(key, "good-copy"),
            "move_from": lambda: writer.move(key, "good-moved"),
            "delete": lambda: writer.delete(key, missing_ok=True),
            "delete_many": lambda: writer.delete_many([key]),
        }

    @pytest.mark.parametrize(
        "key", list(HOSTILE_INVALID_KEYS.values()), ids=list(HOSTILE_INVALID_KEYS)
    )
    def test_hostile_invalid_keys(self, store: Store, writer: Store, key: str) -> None:
        writer.put("good", b"1")
        for name, call in self._all_methods(store, writer, key).items():
            if name in ("list", "list_dir") and key == "a/b/":
                continue  # a trailing slash is a valid prefix
            with pytest.raises(InvalidKey, match="store key") as info:
                call()
            assert isinstance(info.value.key, str), name
        assert sorted(m.key for m in store.list()) == ["good"]

    @pytest.mark.parametrize("key", list(HOSTILE_VALID_KEYS.values()), ids=list(HOSTILE_VALID_KEYS))
    def test_hostile_valid_keys(self, store: Store, writer: Store, key: str) -> None:
        if Capability.WRITE not in writer.capabilities:
            pytest.skip("needs a writable store")
        writer.put(key, b"payload")
        assert store.get(key) == b"payload"
        assert store.get_range(key, 1, 3) == b"ay"
        assert bytes(store.read_buffer(key)) == b"payload"
        assert store.head(key).key == key
        assert store.exists(key)
        assert [m.key for m in store.list()] == [key]
        parent = key.rpartition("/")[0]
        assert [m.key for m in store.list(parent)] == [key]
        assert [m.key for m in store.list_dir(parent).objects] == [key]
        writer.move(key, "moved")
        writer.copy("moved", key)
        assert store.get(key) == b"payload"
        writer.delete(key)
        writer.delete("moved")
        assert not store.exists(key)
        assert list(store.list()) == []

    def test_normalization_variants_are_distinct_keys(self, store: Store, writer: Store) -> None:
        writer.put(_NFC, b"composed")
        writer.put(_NFD, b"decomposed")
        assert (store.get(_NFC), store.get(_NFD)) == (b"composed", b"decomposed")
        assert sorted(m.key for m in store.list()) == sorted([_NFC, _NFD])

    def test_hostile_keys_property(self, store: Store, writer: Store) -> None:
        """Random hostile keys: each method agrees with a dict model or raises InvalidKey;
        a key the rule accepts is never refused."""

        @settings(
            max_examples=self.hostile_examples,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
            database=None,
        )
        @given(keys=st.lists(hostile_keys(), min_size=1, max_size=4), data=st.binary(max_size=8))
        def check(keys: list[str], data: bytes) -> None:
            writer.delete_many([m.key for m in store.list()])
            model: dict[str, bytes] = {}
            for key in keys:
                _drive(store, writer, key, data, model)
            assert sorted(m.key for m in store.list()) == sorted(model)

        check()


def _rule_accepts(key: str) -> bool:
    try:
        validate_key(key)
    except InvalidKey:
        return False
    return True


def _drive(store: Store, writer: Store, key: str, data: bytes, model: dict[str, bytes]) -> None:
    """Apply the methods to ``key`` and check each answer against ``model``."""
    valid = _rule_accepts(key)
    # A valid key may still be refused where the backend cannot hold it: near S3's length
    # limit once the store's own prefix is added, a file where a local directory must be,
    # a local store's reserved names.
    may_refuse = (
        not valid
        or len(key.encode("utf-8", "surrogatepass")) > 1000
        or any(k.startswith(key + "/") or key.startswith(k + "/") for k in model)
        or ".parquetry-" in key
    )

    def attempt(fn: Callable[[], Any]) -> tuple[bool, Any]:
        refused: InvalidKey | None = None
        try:
            return True, fn()
        except InvalidKey as exc:
            refused = exc
        except NotFound:
            return True, NotFound
        except ParquetryError as exc:  # pragma: no cover - reported with the key
            raise AssertionError(f"{key!r}: {type(exc).__name__}: {exc}") from exc
        assert isinstance(refused.key, str), refused  # it names the key at fault
        # UnsafePath: a local store refuses keys crossing a link planted in its root.
        assert may_refuse or isinstance(refused, UnsafePath), f"{key!r} was refused: {refused}"
        return False, None

    ok, meta = attempt(lambda: writer.put(key, data))
    if ok:
        assert valid, f"{key!r} breaks the key rule but was stored"
        model[key] = data
        assert meta.key == key
    missing = NotFound
    for fn, expect in (
        (lambda: store.get(key), model.get(key, missing)),
        (lambda: store.get_range(key, 0, 3), model[key][:3] if key in model else missing),
        (lambda: bytes(store.read_buffer(key)), model.get(key, missing)),
        (lambda: store.head(key).size, len(model[key]) if key in model else missing),
        (lambda: store.exists(key), key in model),
        (lambda: sorted(m.key for m in store.list(key)), _under(model, key)),
    ):
        ok, got = attempt(fn)
        assert not ok or got == expect, (key, got, expect)
    ok, _ = attempt(lambda: writer.delete(key, missing_ok=True))
    if ok:
        model.pop(key, None)
