"""``open_store``: the one place where a store URL is parsed."""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote, urlsplit

from parquetry.errors import InvalidArgument
from parquetry.store.base import Store
from parquetry.store.secrets import redact_url, url_has_userinfo

__all__ = ["open_store"]

_OPTION_ALIASES = {
    "endpoint_url": "endpoint",
    "aws_endpoint_url": "endpoint",
    "aws_region": "region",
    "aws_access_key_id": "access_key_id",
    "aws_secret_access_key": "secret_access_key",
    "aws_session_token": "session_token",
}


def open_store(url: str, **options: Any) -> Store:
    """Open a store from a URL.

    - ``file:///abs/path`` or a plain path: :class:`LocalStore` (``fsync=`` option).
    - ``memory://name``: :class:`MemoryStore` shared by name within the process.
    - ``s3://bucket/prefix``, ``gs://bucket/prefix``, ``az://container/prefix``:
      :class:`ObjectStore`; ``endpoint``, ``region`` and credentials come from ``options``
      (``None`` values are ignored) or the environment (``AWS_ENDPOINT_URL``,
      ``AWS_REGION``, ``AWS_ACCESS_KEY_ID``...).

    Raises:
        InvalidArgument: the URL's scheme is unknown or it lacks a bucket.
    """
    if not isinstance(url, str) or not url:
        raise InvalidArgument(f"store URL must be a non-empty string, got {url!r}")
    if _carries_userinfo(url):
        # Never echo it: what stands before '@' is most likely a key and a secret.
        raise InvalidArgument(
            f"store URL {redact_url(url)!r} carries credentials before '@'; pass them as "
            "options (access_key_id=..., secret_access_key=...) or in the environment"
        )
    opts = {_OPTION_ALIASES.get(k, k): v for k, v in options.items() if v is not None}
    try:
        parts = urlsplit(url)
    except ValueError as exc:  # unbalanced IPv6 brackets
        raise InvalidArgument(f"malformed store URL {url!r}: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme in ("", "file") or (len(scheme) == 1 and url[1:3] == ":\\"):
        from parquetry.store.local import LocalStore

        path = unquote(parts.path) if scheme == "file" else url
        if scheme == "file" and parts.netloc not in ("", "localhost"):
            raise InvalidArgument(f"file URL {redact_url(url)!r} must be local (file:///path)")
        fsync = _flag(url, "fsync", opts.pop("fsync", True))
        _no_extra(url, opts)
        return LocalStore(path, fsync=fsync)
    if scheme == "memory":
        from parquetry.store.memory import MemoryStore

        _no_extra(url, opts)
        return MemoryStore((parts.netloc + parts.path).strip("/") or "default")
    if scheme in ("s3", "gs", "az", "gcs", "abfs"):
        from parquetry.store.objectstore import ObjectStore

        if not parts.netloc:
            raise InvalidArgument(f"store URL {url!r} lacks a bucket name")
        canonical = {"gcs": "gs", "abfs": "az"}.get(scheme, scheme)
        return ObjectStore(canonical, parts.netloc, unquote(parts.path).strip("/"), opts)
    raise InvalidArgument(
        f"unsupported store URL scheme {scheme!r} in {url!r} (use file://, memory://, s3://, "
        "gs:// or az://)"
    )


def _carries_userinfo(url: str) -> bool:
    """Whether ``url`` has ``user:secret@`` before its host. Object store URLs are checked
    whole (a secret key may contain '/', hiding where the host starts); a ``file://`` URL
    only in its authority, since a directory name may hold '@'."""
    if url[:7].lower() == "file://":
        return "@" in url[7:].partition("/")[0]
    return url_has_userinfo(url)


def _no_extra(url: str, opts: dict[str, Any]) -> None:
    if opts:
        raise InvalidArgument(f"options {sorted(opts)} do not apply to {url!r}")


def _flag(url: str, name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise InvalidArgument(f"option {name}={value!r} for {url!r} must be a boolean")
