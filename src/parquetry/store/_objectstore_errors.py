"""Translation of obstore's exceptions into parquetry's error tree, secrets scrubbed.

Part of the object store backend (:mod:`parquetry.store.objectstore`): with it, the only
modules that import obstore.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

from obstore.exceptions import (
    AlreadyExistsError,
    InvalidPathError,
    NotFoundError,
    PermissionDeniedError,
    PreconditionError,
    UnauthenticatedError,
    UnknownConfigurationKeyError,
)

from parquetry.errors import (
    AlreadyExists,
    InvalidArgument,
    InvalidKey,
    NotFound,
    ParquetryError,
    PreconditionFailed,
    StoreUnavailable,
)
from parquetry.store.secrets import is_secret_option

if TYPE_CHECKING:
    from parquetry.store.objectstore import ObjectStore

__all__ = ["_Translate", "_scrub", "is_panic"]


class _Translate:
    """Context manager turning obstore exceptions into parquetry errors, secrets scrubbed."""

    __slots__ = ("expected", "key", "store")

    def __init__(self, store: ObjectStore, key: str, *, expected: str | None = None):
        store.check_full_key(key)
        self.store = store
        self.key = key
        self.expected = expected

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> None:
        if exc is None or isinstance(exc, ParquetryError):
            return
        if not isinstance(exc, Exception):
            if not is_panic(exc):
                return  # KeyboardInterrupt, SystemExit, GeneratorExit: let them through
            text = str(exc).strip()
            detail = _scrub(text, self.store._options).splitlines()[0][:200] if text else "panic"
            raise StoreUnavailable(
                f"{self.store.url} failed on {self.key!r}: the object store client crashed "
                f"({detail})",
                key=self.key,
                store=self.store.url,
            ) from None
        # The original stays reachable as __context__: scrub it too.
        exc.args = tuple(_scrub(str(a), self.store._options) for a in exc.args)
        raise _translate(exc, self.store, self.key, self.expected) from None


def _translate(exc: Exception, store: ObjectStore, key: str, expected: str | None) -> Exception:
    url = store.url
    bucket = _missing_bucket(str(exc))
    if bucket is not None:
        # Not "no such key": every key of the store is unreachable, and "dataset not found"
        # would send the user looking for the wrong mistake.
        return StoreUnavailable(
            f"bucket {bucket or urlsplit(url).netloc!r} does not exist ({url}, key {key!r})",
            key=key,
            store=url,
        )
    if isinstance(exc, NotFoundError | FileNotFoundError):
        return NotFound(f"{key!r} not found in {url}", key=key, store=url)
    if isinstance(exc, AlreadyExistsError | FileExistsError):
        return AlreadyExists(f"{key!r} already exists in {url}", key=key, store=url)
    if isinstance(exc, PreconditionError):
        return PreconditionFailed(
            f"{key!r} changed in {url}: expected version {expected}",
            key=key,
            store=url,
            expected=expected,
        )
    if isinstance(exc, InvalidPathError):
        return InvalidKey(f"invalid key {key!r} for {url}", key=key, store=url)
    if isinstance(exc, PermissionDeniedError | UnauthenticatedError):
        return StoreUnavailable(f"access to {key!r} in {url} denied", key=key, store=url)
    if isinstance(exc, UnknownConfigurationKeyError):
        return InvalidArgument(f"bad configuration for {url}: {exc}", key=key, store=url)
    msg = str(exc).splitlines()[0][:300] if str(exc) else ""
    return StoreUnavailable(
        f"{url} failed on {key!r}: {type(exc).__name__}: {msg}", key=key, store=url
    )


_NO_SUCH_BUCKET = re.compile(
    r"<Code>NoSuchBucket</Code>(?:.*?<BucketName>([^<]*)</BucketName>)?", re.S
)


def _missing_bucket(text: str) -> str | None:
    """The bucket an S3 404 names as missing (NoSuchBucket; "" when it names none), or None
    when the 404 is about a key. A HEAD response has no body, so it cannot tell."""
    match = _NO_SUCH_BUCKET.search(text)
    return None if match is None else match.group(1) or ""


def is_panic(exc: BaseException) -> bool:
    """Whether ``exc`` is a Rust panic surfacing through pyo3 (``PanicException`` derives
    from BaseException, so ``except Exception`` misses it)."""
    return type(exc).__name__ == "PanicException" and not isinstance(exc, Exception)


def _scrub(text: str, options: Mapping[str, Any]) -> str:
    for name, value in options.items():
        if is_secret_option(name) and isinstance(value, str) and value:
            for form in {value, quote(value, safe="")}:
                # Real secrets are long; a short one is masked only where it stands alone, so a
                # test secret like "a" does not garble every word of the message.
                pattern = re.escape(form) if len(form) >= 8 else rf"(?<!\w){re.escape(form)}(?!\w)"
                text = re.sub(pattern, "***", text)
    return text
