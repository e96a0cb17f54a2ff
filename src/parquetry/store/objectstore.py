"""Object stores (S3, GCS, Azure) through obstore. The only module that imports obstore.

S3's ``If-None-Match: *`` and ``If-Match: <etag>`` (GCS generations, Azure ETags) give
create-if-absent and compare-and-swap; obstore exposes both as put modes. Every obstore
exception is translated here into parquetry's error tree, with secrets scrubbed.
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import timedelta
from typing import Any
from urllib.parse import quote, urlsplit

import obstore
from obstore.exceptions import (
    AlreadyExistsError,
    GenericError,
    InvalidPathError,
    NotFoundError,
    PermissionDeniedError,
    PreconditionError,
    UnauthenticatedError,
    UnknownConfigurationKeyError,
)
from obstore.store import AzureStore, GCSStore, S3Store

from parquetry.errors import (
    AlreadyExists,
    InvalidArgument,
    InvalidKey,
    NotFound,
    ParquetryError,
    PreconditionFailed,
    StoreUnavailable,
)
from parquetry.store.base import Capability, ListResult, ObjectMeta, PutMode, Store
from parquetry.store.keys import MAX_KEY_BYTES, validate_key
from parquetry.store.secrets import is_secret_option, redact_url, url_has_userinfo

__all__ = ["DEFAULT_CLIENT_OPTIONS", "DEFAULT_RETRY", "ObjectStore", "is_secret_option"]

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
_URL_CHARS = re.compile(r"[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=%]+")
_HOST = re.compile(r"[A-Za-z0-9_]([A-Za-z0-9._-]{0,252})?")
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


def check_endpoint(name: str, value: Any) -> None:
    """Refuse an endpoint URL the backend's HTTP client would panic on, without echoing any
    credentials it may hold.

    Raises:
        InvalidArgument: naming the option and what is wrong.
    """
    shown = redact_url(value) if isinstance(value, str) else value
    problem = _endpoint_problem(value)
    if problem:
        raise InvalidArgument(f"invalid {name} {shown!r}: {problem}")


def _endpoint_problem(value: Any) -> str:
    if not isinstance(value, str) or not value:
        return "expected a URL such as http://127.0.0.1:9000"
    if url_has_userinfo(value):
        return "credentials belong in options or the environment, never in the URL"
    if not _URL_CHARS.fullmatch(value):
        return "it contains spaces or characters a URL cannot hold"
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError as exc:  # bad IPv6 brackets, port not a number or out of range
        return str(exc)
    if parts.scheme.lower() not in ("http", "https"):
        return "the scheme must be http:// or https://"
    host = parts.hostname or ""
    if not host:
        return "it has no host"
    if ":" in host:
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            return f"host {host!r} is not a valid IPv6 address"
    elif not _HOST.fullmatch(host):
        return f"host {host!r} is not a valid host name"
    if port == 0:
        return "port 0 is not a valid port"
    return ""


def _scrub(text: str, options: Mapping[str, Any]) -> str:
    for name, value in options.items():
        if is_secret_option(name) and isinstance(value, str) and value:
            for form in {value, quote(value, safe="")}:
                # Real secrets are long; a short one is masked only where it stands alone, so a
                # test secret like "a" does not garble every word of the message.
                pattern = re.escape(form) if len(form) >= 8 else rf"(?<!\w){re.escape(form)}(?!\w)"
                text = re.sub(pattern, "***", text)
    return text


def _meta(item: Mapping[str, Any]) -> ObjectMeta:
    return ObjectMeta(
        key=item["path"],
        size=item["size"],
        version=item.get("e_tag") or item.get("version"),
        modified=item.get("last_modified"),
    )
