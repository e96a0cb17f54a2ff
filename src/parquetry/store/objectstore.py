"""Object stores (S3, GCS, Azure) through obstore. The only module that imports obstore.

S3's ``If-None-Match: *`` and ``If-Match: <etag>`` (GCS generations, Azure ETags) give
create-if-absent and compare-and-swap; obstore exposes both as put modes. Every obstore
exception is translated here into parquetry's error tree.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import obstore
from obstore.exceptions import (
    AlreadyExistsError,
    InvalidPathError,
    NotFoundError,
    PermissionDeniedError,
    PreconditionError,
    UnauthenticatedError,
)
from obstore.store import AzureStore, GCSStore, S3Store

from parquetry.errors import (
    AlreadyExists,
    InvalidKey,
    NotFound,
    ParquetryError,
    PreconditionFailed,
    StoreUnavailable,
)
from parquetry.store.base import Capability, ListResult, ObjectMeta, PutMode, Store

__all__ = ["ObjectStore"]

#: Option names whose values are secrets: kept out of repr, url, errors and logs.
SECRET_OPTIONS = frozenset(
    {
        "access_key_id",
        "secret_access_key",
        "session_token",
        "token",
        "account_key",
        "client_secret",
        "sas_key",
        "service_account_key",
        "aws_access_key_id",
        "aws_secret_access_key",
        "aws_session_token",
    }
)
_CLIENT_OPTIONS = frozenset({"allow_http", "timeout", "connect_timeout", "pool_max_idle_per_host"})
_SCHEMES = {"s3": S3Store, "gs": GCSStore, "az": AzureStore}


class ObjectStore(Store):
    """A bucket (or container) on S3, GCS or Azure, optionally under a key prefix.

    Args:
        scheme: ``"s3"``, ``"gs"`` or ``"az"``.
        bucket: Bucket or container name.
        prefix: Key prefix inside the bucket that acts as this store's root.
        options: Backend configuration (``endpoint``, ``region``, credentials...) as obstore
            names them; anything missing comes from the environment (``AWS_*``...).
    """

    capabilities = frozenset(Capability)

    def __init__(
        self, scheme: str, bucket: str, prefix: str = "", options: Mapping[str, Any] | None = None
    ):
        if scheme not in _SCHEMES:
            raise ParquetryError(f"unsupported object store scheme {scheme!r}")
        self.scheme = scheme
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self._options = dict(options or {})
        self._client = self._connect()

    def _connect(self) -> Any:
        config = {k: v for k, v in self._options.items() if k not in _CLIENT_OPTIONS}
        client_options = {k: v for k, v in self._options.items() if k in _CLIENT_OPTIONS}
        endpoint = str(config.get("endpoint", ""))
        if endpoint.startswith("http://"):
            client_options.setdefault("allow_http", True)
        cls = _SCHEMES[self.scheme]
        try:
            return cls(
                self.bucket,
                prefix=self.prefix or None,
                config=config,
                client_options=client_options or None,
            )
        except Exception as exc:  # obstore raises config errors of several kinds
            raise StoreUnavailable(
                f"cannot configure {self.url}: {_scrub(str(exc), self._options)}"
            ) from None

    # --- identity ------------------------------------------------------------------------

    @property
    def url(self) -> str:
        base = f"{self.scheme}://{self.bucket}"
        return f"{base}/{self.prefix}" if self.prefix else base

    @property
    def options(self) -> dict[str, Any]:
        """The non-secret options (endpoint, region...)."""
        return {k: v for k, v in self._options.items() if k not in SECRET_OPTIONS}

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={v!r}" for k, v in sorted(self.options.items()))
        return f"ObjectStore({self.url!r}{', ' if shown else ''}{shown})"

    def __reduce__(self) -> tuple[type[ObjectStore], tuple[str, str, str, dict[str, Any]]]:
        return (ObjectStore, (self.scheme, self.bucket, self.prefix, self._options))

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, ObjectStore)
            and (other.scheme, other.bucket, other.prefix, other._options)
            == (self.scheme, self.bucket, self.prefix, self._options)
        )

    def __hash__(self) -> int:
        return hash((self.scheme, self.bucket, self.prefix))

    # --- primitives ----------------------------------------------------------------------

    def _get(self, key: str) -> bytes:
        with self._translate(key):
            return bytes(obstore.get(self._client, key).bytes())

    def _get_range(self, key: str, start: int, end: int) -> bytes:
        with self._translate(key):
            size = None
            try:
                return bytes(obstore.get_range(self._client, key, start=start, end=end))
            except Exception as exc:
                # A range past the end is an error for S3; cut it at the end like a file.
                if isinstance(exc, NotFoundError | FileNotFoundError):
                    raise
                size = self._head(key).size
            if start >= size:
                return b""
            return bytes(obstore.get_range(self._client, key, start=start, end=min(end, size)))

    def get_ranges(self, key: str, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        if not ranges:
            return []
        self.require(Capability.READ)
        starts = [s for s, _ in ranges]
        ends = [e for _, e in ranges]
        with self._translate(key):
            try:
                return [bytes(b) for b in obstore.get_ranges(self._client, key, starts=starts,
                                                             ends=ends)]
            except (NotFoundError, FileNotFoundError):
                raise
            except Exception:
                return super().get_ranges(key, ranges)

    def _head(self, key: str) -> ObjectMeta:
        with self._translate(key):
            return _meta(obstore.head(self._client, key))

    def _put(
        self, key: str, data: bytes | memoryview, mode: PutMode, expected_version: str | None
    ) -> ObjectMeta:
        obs_mode: Any
        if mode is PutMode.OVERWRITE:
            obs_mode = "overwrite"
        elif mode is PutMode.CREATE:
            obs_mode = "create"
        else:
            obs_mode = {"e_tag": expected_version}
        with self._translate(key, expected=expected_version):
            result = obstore.put(self._client, key, data, mode=obs_mode, use_multipart=False
                                 if len(data) < 64 * 1024 * 1024 else None)
        return ObjectMeta(key=key, size=len(data), version=result.get("e_tag"), modified=None)

    def _copy(self, src: str, dst: str) -> None:
        with self._translate(src):
            obstore.copy(self._client, src, dst, overwrite=True)

    def _delete(self, key: str, missing_ok: bool) -> None:
        if not missing_ok and not self._exists(key):
            raise NotFound(f"{key!r} not found in {self.url}", key=key, store=self.url)
        with self._translate(key):
            obstore.delete(self._client, key)

    def delete_many(self, keys: Iterable[str], *, missing_ok: bool = True) -> None:
        from parquetry.store.keys import validate_key

        self.require(Capability.DELETE)
        batch = [validate_key(k) for k in keys]
        if not missing_ok:
            for key in batch:
                if not self._exists(key):
                    raise NotFound(f"{key!r} not found in {self.url}", key=key, store=self.url)
        for i in range(0, len(batch), 1000):
            with self._translate(batch[i] if batch else ""):
                obstore.delete(self._client, batch[i : i + 1000])

    def _list(self, prefix: str) -> Iterator[ObjectMeta]:
        with self._translate(prefix):
            stream = obstore.list(self._client, prefix or None, chunk_size=1000)
            for chunk in stream:
                for item in chunk:
                    yield _meta(item)

    def _list_dir(self, prefix: str) -> ListResult:
        with self._translate(prefix):
            result = obstore.list_with_delimiter(self._client, prefix or None)
        objects = tuple(sorted((_meta(m) for m in result["objects"]), key=lambda m: m.key))
        prefixes = tuple(sorted(p.rstrip("/") for p in result["common_prefixes"]))
        return ListResult(objects=objects, prefixes=prefixes)

    def _translate(self, key: str, *, expected: str | None = None) -> _Translate:
        return _Translate(self, key, expected)


class _Translate:
    """Context manager turning obstore exceptions into parquetry errors, secrets scrubbed."""

    def __init__(self, store: ObjectStore, key: str, expected: str | None):
        self.store = store
        self.key = key
        self.expected = expected

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: object) -> None:
        if exc is None or isinstance(exc, ParquetryError):
            return
        key, url = self.key, self.store.url
        if isinstance(exc, NotFoundError | FileNotFoundError):
            raise NotFound(f"{key!r} not found in {url}", key=key, store=url) from None
        if isinstance(exc, AlreadyExistsError | FileExistsError):
            raise AlreadyExists(f"{key!r} already exists in {url}", key=key, store=url) from None
        if isinstance(exc, PreconditionError):
            raise PreconditionFailed(
                f"{key!r} changed: expected version {self.expected}",
                key=key, store=url, expected=self.expected,
            ) from None
        if isinstance(exc, InvalidPathError):
            raise InvalidKey(f"invalid key {key!r} for {url}", key=key, store=url) from None
        if isinstance(exc, PermissionDeniedError | UnauthenticatedError):
            raise StoreUnavailable(f"access to {key!r} in {url} denied", key=key,
                                   store=url) from None
        if isinstance(exc, Exception):
            msg = _scrub(str(exc), self.store._options).splitlines()[0][:300]
            raise StoreUnavailable(
                f"{url} failed on {key!r}: {type(exc).__name__}: {msg}", key=key, store=url
            ) from None


def _scrub(text: str, options: Mapping[str, Any]) -> str:
    for name, value in options.items():
        if name in SECRET_OPTIONS and value:
            text = text.replace(str(value), "***")
    return text


def _meta(item: Mapping[str, Any]) -> ObjectMeta:
    return ObjectMeta(
        key=str(item["path"]),
        size=int(item["size"]),
        version=item.get("e_tag") or item.get("version"),
        modified=item.get("last_modified"),
    )
