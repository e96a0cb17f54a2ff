"""Rules for store keys: ``/``-separated relative paths, validated once at the API edge."""

from __future__ import annotations

import re

from parquetry.errors import InvalidKey

__all__ = ["join_key", "validate_key", "validate_prefix"]

_FORBIDDEN_SEGMENTS = frozenset({"..", "."})


def validate_key(key: str) -> str:
    """Return ``key`` if it names an object, else raise :class:`InvalidKey` saying why."""
    if not isinstance(key, str):
        raise InvalidKey(f"store key must be a str, got {type(key).__name__}")
    if key == "":
        raise InvalidKey("store key is empty", key=key)
    _check(key)
    return key


def validate_prefix(prefix: str) -> str:
    """Like :func:`validate_key` but ``""`` (the root) is allowed and one trailing ``/`` is
    dropped, so ``"a/b/"`` and ``"a/b"`` name the same directory."""
    if not isinstance(prefix, str):
        raise InvalidKey(f"store prefix must be a str, got {type(prefix).__name__}")
    if prefix.endswith("/") and len(prefix) > 1:
        prefix = prefix[:-1]
    if prefix == "":
        return prefix
    _check(prefix)
    return prefix


def join_key(*parts: str) -> str:
    """Join key fragments with ``/``, skipping empty ones (the root prefix)."""
    return "/".join(p.strip("/") for p in parts if p and p.strip("/"))


#: Matches every way a key can be malformed; the common valid key costs one search.
_BAD = re.compile(r"(?:^|/)\.{1,2}(?:/|$)|//|^/|/$|\x00|\\")


def _check(key: str) -> None:
    if _BAD.search(key) is None:
        return
    _explain(key)
    raise InvalidKey(f"store key {key!r} is malformed", key=key)  # pragma: no cover


def _explain(key: str) -> None:
    if "\x00" in key:
        raise InvalidKey(f"store key {key!r} contains a NUL byte", key=key)
    if key.startswith("/"):
        raise InvalidKey(f"store key {key!r} must be relative (no leading '/')", key=key)
    if "\\" in key:
        raise InvalidKey(f"store key {key!r} contains a backslash; use '/'", key=key)
    for segment in key.split("/"):
        if segment == "":
            raise InvalidKey(f"store key {key!r} has an empty segment", key=key)
        if segment in _FORBIDDEN_SEGMENTS:
            raise InvalidKey(f"store key {key!r} contains a {segment!r} segment", key=key)
