"""Rules for store keys: ``/``-separated relative paths, validated once at the API edge.

The one rule every backend (memory, local disk, S3/GCS/Azure) applies, so a key that works
on one works on all and a key refused by one is refused by all, with :class:`InvalidKey`:

- a key is a non-empty ``str`` of ``/``-separated segments: no leading or trailing ``/``, no
  empty, ``.`` or ``..`` segment;
- no NUL, no ASCII control character (``\\x00``-``\\x1f``, ``\\x7f``: object stores refuse
  them), no backslash (a separator on Windows), no lone surrogate (not encodable as UTF-8);
- at most :data:`MAX_SEGMENT_BYTES` bytes of UTF-8 per segment (file names on local disks)
  and :data:`MAX_KEY_BYTES` bytes for the whole key (S3's limit).

Keys are compared code point by code point: Unicode normalization variants (NFC ``"é"`` and
NFD ``"e\\u0301"``) are different keys, as they are on S3 and on Linux file systems.
"""

from __future__ import annotations

import re

from parquetry.errors import InvalidKey

__all__ = ["MAX_KEY_BYTES", "MAX_SEGMENT_BYTES", "join_key", "validate_key", "validate_prefix"]

#: Longest key, in bytes of UTF-8 (S3 limits object keys to 1,024 bytes).
MAX_KEY_BYTES = 1024
#: Longest segment, in bytes of UTF-8 (NAME_MAX of local file systems).
MAX_SEGMENT_BYTES = 255

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


def is_valid_segment(name: str) -> bool:
    """Whether ``name`` can be one segment of a key (used to skip foreign names in listings)."""
    try:
        _check(name)
    except InvalidKey:
        return False
    return "/" not in name


def join_key(*parts: str) -> str:
    """Join key fragments with ``/``, skipping empty ones (the root prefix)."""
    return "/".join(p.strip("/") for p in parts if p and p.strip("/"))


#: Matches every character-level way a key can be malformed; a valid key costs one search.
_BAD = re.compile(r"(?:^|/)\.{1,2}(?:/|$)|//|^/|/$|[\x00-\x1f\x7f\\]")


def _check(key: str) -> None:
    # Fast path: an ASCII key of at most 255 characters cannot break a length limit.
    if _BAD.search(key) is None and len(key) <= MAX_SEGMENT_BYTES and key.isascii():
        return
    _explain(key)


def _explain(key: str) -> None:
    shown = _shorten(key)
    if "\x00" in key:
        raise InvalidKey(f"store key {shown} contains a NUL byte", key=key)
    if key.startswith("/"):
        raise InvalidKey(f"store key {shown} must be relative (no leading '/')", key=key)
    if "\\" in key:
        raise InvalidKey(f"store key {shown} contains a backslash; use '/'", key=key)
    control = re.search(r"[\x00-\x1f\x7f]", key)
    if control is not None:
        raise InvalidKey(
            f"store key {shown} contains the control character {control.group()!r}", key=key
        )
    try:
        size = len(key.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise InvalidKey(
            f"store key {shown} is not valid Unicode (lone surrogate {key[exc.start]!r})",
            key=key,
        ) from None
    if size > MAX_KEY_BYTES:
        raise InvalidKey(
            f"store key {shown} is too long: {size} bytes of UTF-8, at most {MAX_KEY_BYTES}",
            key=key,
        )
    for segment in key.split("/"):
        if segment == "":
            raise InvalidKey(f"store key {shown} has an empty segment", key=key)
        if segment in _FORBIDDEN_SEGMENTS:
            raise InvalidKey(f"store key {shown} contains a {segment!r} segment", key=key)
        length = len(segment.encode("utf-8"))
        if length > MAX_SEGMENT_BYTES:
            raise InvalidKey(
                f"store key {shown} is too long: a segment of {length} bytes of UTF-8, "
                f"at most {MAX_SEGMENT_BYTES}",
                key=key,
            )


def _shorten(key: str) -> str:
    """``repr(key)``, cut in the middle when long, so a message stays one readable line."""
    text = repr(key)
    return text if len(text) <= 120 else f"{text[:60]}...{text[-50:]}"
