"""Object stores (S3, GCS, Azure) through obstore.

With :mod:`parquetry.store._objectstore_errors` (which translates obstore's exceptions) and
:mod:`parquetry.store._objectupload` (streamed writes), the only modules that import obstore.

S3's ``If-None-Match: *`` and ``If-Match: <etag>`` (GCS generations, Azure ETags) give
create-if-absent and compare-and-swap; obstore exposes both as put modes. Every obstore
call runs inside ``_Translate``, which turns its exceptions into parquetry's error tree, with
secrets scrubbed.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import timedelta
from typing import Any

import obstore
from obstore.exceptions import GenericError
from obstore.store import AzureStore, GCSStore, S3Store

from parquetry.errors import (
    InvalidArgument,
    InvalidKey,
    NotFound,
    PreconditionFailed,
)
from parquetry.store._endpoints import check_endpoint
from parquetry.store._objectstore_errors import _scrub, _Translate, is_panic
from parquetry.store._objectupload import ObjectUpload
from parquetry.store.base import Capability, ListResult, ObjectMeta, PutMode, Store
from parquetry.store.keys import MAX_KEY_BYTES, validate_key
from parquetry.store.secrets import is_secret_option
from parquetry.store.writer import Upload

__all__ = [
    "DEFAULT_CLIENT_OPTIONS",
    "DEFAULT_RETRY",
    "ObjectStore",
    "check_endpoint",
    "is_panic",
    "is_secret_option",
]

_CLIENT_OPTIONS = frozenset(
    {
        "allow_http",
        "allow_invalid_certificates",
        "connect_timeout",
        "default_content_type",
        "default_headers",
        "http1_only",
        "http2_only",
        "pool_idle_timeout",
        "pool_max_idle_per_host",
        "proxy_url",
        "proxy_ca_certificate",
        "proxy_excludes",
        "randomize_addresses",
        "read_timeout",
        "timeout",
        "user_agent",
    }
)
#: Fail in seconds, not minutes, when the endpoint is unreachable (obstore's own defaults
#: retry for up to three minutes). Override with the ``retry_config`` option.
DEFAULT_RETRY: dict[str, Any] = {
    "max_retries": 3,
    "retry_timeout": timedelta(seconds=20),
    "backoff": {"init_backoff": timedelta(milliseconds=100), "max_backoff": timedelta(seconds=2)},
}
DEFAULT_CLIENT_OPTIONS: dict[str, Any] = {"connect_timeout": "3s"}
#: Environment variables the backends read an endpoint from (checked when no option is set).
_ENDPOINT_ENV = {
    "s3": ("AWS_ENDPOINT_URL", "AWS_ENDPOINT"),
    "az": ("AZURE_STORAGE_ENDPOINT", "AZURE_ENDPOINT"),
}
#: Bucket and container names on S3, GCS and Azure (a superset of each one's rule).
_BUCKET = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,221}")
_SCHEMES = {"s3": S3Store, "gs": GCSStore, "az": AzureStore}
_MULTIPART_THRESHOLD = 64 * 1024 * 1024


class ObjectStore(Store):
    """A bucket (or container) on S3, GCS or Azure, optionally under a key prefix.

    Args:
        scheme: ``"s3"``, ``"gs"`` or ``"az"``.
        bucket: Bucket or container name.
        prefix: Key prefix inside the bucket that acts as this store's root.
        options: Backend configuration (``endpoint``, ``region``, credentials...) as obstore
            names them, plus HTTP client options (``timeout``, ``connect_timeout``...) and
            ``retry_config``; anything missing comes from the environment (``AWS_*``...).

    Raises:
        InvalidArgument: unknown scheme, missing bucket or an option the backend rejects.
    """

    capabilities = frozenset(Capability)

    def __init__(
        self, scheme: str, bucket: str, prefix: str = "", options: Mapping[str, Any] | None = None
    ):
        if scheme not in _SCHEMES:
            raise InvalidArgument(f"unsupported object store scheme {scheme!r} (s3, gs or az)")
        if not bucket:
            raise InvalidArgument(f"{scheme}:// store needs a bucket name")
        if not isinstance(bucket, str) or not _BUCKET.fullmatch(bucket):
            # Not echoed: a malformed "bucket" is often credentials pasted into the URL.
            raise InvalidArgument(
                f"invalid bucket name in {scheme}://***: use letters, digits, '.', '-' and '_' "
                "(credentials belong in options or the environment, never in the URL)"
            )
        self.scheme = scheme
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self._options = {str(k).lower(): v for k, v in (options or {}).items()}
        for name, value in self._endpoints():
            check_endpoint(name, value)
        self._client = self._connect()

    def _endpoints(self) -> Iterator[tuple[str, Any]]:
        """Every URL the backend will parse (options, then the environment it reads)."""
        names = [k for k in self._options if "endpoint" in k or k == "proxy_url"]
        yield from ((name, self._options[name]) for name in names)
        if not names:
            for name in _ENDPOINT_ENV.get(self.scheme, ()):
                if os.environ.get(name):
                    yield f"${name}", os.environ[name]

    def _connect(self) -> Any:
        config = {
            k: v
            for k, v in self._options.items()
            if k not in _CLIENT_OPTIONS and k not in ("retry_config", "client_options")
        }
        client_options = {**DEFAULT_CLIENT_OPTIONS, **self._options.get("client_options", {})}
        client_options.update((k, v) for k, v in self._options.items() if k in _CLIENT_OPTIONS)
        # An http:// endpoint (an option or AWS_ENDPOINT_URL, which the backend reads itself)
        # needs allow_http, or every request fails with "builder error".
        endpoints = [v for name, v in self._endpoints() if "endpoint" in name.lower()]
        if any(str(value).startswith("http://") for value in endpoints):
            client_options.setdefault("allow_http", True)
        retry = self._options.get("retry_config", DEFAULT_RETRY)
        try:
            return _SCHEMES[self.scheme](
                self.bucket,
                prefix=self.prefix or None,
                config=config,
                client_options=client_options,
                retry_config=retry,
            )
        except BaseException as exc:  # obstore raises config errors of several kinds
            if not isinstance(exc, Exception) and not is_panic(exc):
                raise  # KeyboardInterrupt, SystemExit
            msg = _scrub(str(exc), self._options).splitlines()[0][:300] if str(exc) else ""
            raise InvalidArgument(f"cannot configure {self.url}: {msg}") from None

    # --- identity ------------------------------------------------------------------------

    @property
    def url(self) -> str:
        base = f"{self.scheme}://{self.bucket}"
        return f"{base}/{self.prefix}" if self.prefix else base

    @property
    def options(self) -> dict[str, Any]:
        """The non-secret options (endpoint, region...)."""
        return {k: v for k, v in self._options.items() if not is_secret_option(k)}

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={v!r}" for k, v in sorted(self.options.items()))
        return f"ObjectStore({self.url!r}{', ' if shown else ''}{shown})"

    def __reduce__(self) -> tuple[type[ObjectStore], tuple[str, str, str, dict[str, Any]]]:
        return (ObjectStore, (self.scheme, self.bucket, self.prefix, self._options))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ObjectStore):
            return False
        mine = (self.scheme, self.bucket, self.prefix, self._options)
        return mine == (other.scheme, other.bucket, other.prefix, other._options)

    def __hash__(self) -> int:
        return hash((self.scheme, self.bucket, self.prefix))

    def check_full_key(self, key: str) -> None:
        """Refuse ``key`` if, under this store's prefix, it exceeds the object key limit
        (1,024 bytes on S3): the key rule checks the key alone."""
        if not self.prefix:
            return
        size = len(self.prefix.encode("utf-8")) + 1 + len(key.encode("utf-8"))
        if size > MAX_KEY_BYTES:
            raise InvalidKey(
                f"store key {key!r} is too long for {self.url}: {size} bytes of UTF-8 with the "
                f"store's prefix, at most {MAX_KEY_BYTES}",
                key=key,
                store=self.url,
            )

    # --- primitives ----------------------------------------------------------------------

    def _get(self, key: str) -> bytes:
        with _Translate(self, key):
            return bytes(obstore.get(self._client, key).bytes())

    def _get_range(self, key: str, start: int, end: int) -> bytes:
        with _Translate(self, key):
            try:
                return bytes(obstore.get_range(self._client, key, start=start, end=end))
            except GenericError as exc:
                if "416" not in str(exc):
                    raise
            # A range starting at or past the end is 416 for S3; a file read gives b"".
            self._head(key)
            return b""

    def _get_ranges(self, key: str, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        # obstore coalesces the ranges into few requests but panics on a range past the
        # end, so cut them at the size first (one head request).
        size = self._head(key).size
        clipped = [(min(s, size), min(e, size)) for s, e in ranges]
        wanted = [(s, e) for s, e in clipped if e > s]
        if not wanted:
            return [b"" for _ in ranges]
        with _Translate(self, key):
            fetched = obstore.get_ranges(
                self._client, key, starts=[s for s, _ in wanted], ends=[e for _, e in wanted]
            )
        parts = iter(fetched)
        return [bytes(next(parts)) if e > s else b"" for s, e in clipped]

    def _head(self, key: str) -> ObjectMeta:
        with _Translate(self, key):
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
        # Conditional writes stay single PUTs: the condition must apply to one request.
        multipart = (
            None if mode is PutMode.OVERWRITE and len(data) >= _MULTIPART_THRESHOLD else False
        )
        try:
            with _Translate(self, key, expected=expected_version):
                result = obstore.put(
                    self._client, key, data, mode=obs_mode, use_multipart=multipart
                )
        except PreconditionFailed:
            # S3 answers a conditional PUT on a missing key with 404, obstore with the same
            # PreconditionError as a stale ETag: tell the two apart.
            if not self._exists(key):
                raise NotFound(
                    f"{key!r} not found in {self.url}", key=key, store=self.url
                ) from None
            raise
        return ObjectMeta(key=key, size=len(data), version=result.get("e_tag"), modified=None)

    def _open_upload(self, key: str, mode: PutMode, expected_version: str | None) -> Upload:
        self.check_full_key(key)
        return ObjectUpload(self, key, mode, expected_version)

    def _copy(self, src: str, dst: str) -> None:
        self.check_full_key(dst)
        with _Translate(self, src):
            obstore.copy(self._client, src, dst, overwrite=True)

    def _move(self, src: str, dst: str) -> None:
        if src == dst:
            self._head(src)
            return
        self._copy(src, dst)
        with _Translate(self, src):
            obstore.delete(self._client, src)

    def _delete(self, key: str, missing_ok: bool) -> None:
        if not missing_ok and not self._exists(key):
            raise NotFound(f"{key!r} not found in {self.url}", key=key, store=self.url)
        with _Translate(self, key):
            obstore.delete(self._client, key)

    def delete_many(self, keys: Iterable[str], *, missing_ok: bool = True) -> None:
        self.require(Capability.DELETE)
        batch = [validate_key(k) for k in keys]
        for key in batch:
            self.check_full_key(key)
        if not missing_ok:
            for key in batch:
                if not self._exists(key):
                    raise NotFound(f"{key!r} not found in {self.url}", key=key, store=self.url)
        for i in range(0, len(batch), 1000):
            with _Translate(self, batch[i]):
                obstore.delete(self._client, batch[i : i + 1000])

    def _list(self, prefix: str) -> Iterator[ObjectMeta]:
        with _Translate(self, prefix):
            stream = obstore.list(self._client, prefix or None, chunk_size=1000)
            for chunk in stream:
                for item in chunk:
                    yield _meta(item)

    def _list_dir(self, prefix: str) -> ListResult:
        with _Translate(self, prefix):
            result = obstore.list_with_delimiter(self._client, prefix or None)
        objects = tuple(sorted((_meta(m) for m in result["objects"]), key=lambda m: m.key))
        prefixes = tuple(sorted(p.rstrip("/") for p in result["common_prefixes"]))
        return ListResult(objects=objects, prefixes=prefixes)


def _meta(item: Mapping[str, Any]) -> ObjectMeta:
    return ObjectMeta(
        key=item["path"],
        size=item["size"],
        version=item.get("e_tag") or item.get("version"),
        modified=item.get("last_modified"),
    )
