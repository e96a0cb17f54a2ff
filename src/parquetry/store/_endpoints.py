"""Endpoint URL checks of the object store backend: refuse what its HTTP client would panic
on, before any client exists (no obstore import here)."""

from __future__ import annotations

import ipaddress
import re
from typing import Any
from urllib.parse import urlsplit

from parquetry.errors import InvalidArgument
from parquetry.store.secrets import redact_url, url_has_userinfo

__all__ = ["check_endpoint"]

_URL_CHARS = re.compile(r"[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=%]+")
_HOST = re.compile(r"[A-Za-z0-9_]([A-Za-z0-9._-]{0,252})?")


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
