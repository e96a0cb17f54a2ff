"""Which option names hold secrets, and how secrets are kept out of reprs, URLs and errors.

Light on purpose (no backend SDK): the Spark options, the CLI and the object-store backend
all mask with these rules.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["MASK", "is_secret_option", "mask_options", "redact_url", "url_has_userinfo"]

MASK = "***"

#: Parts of option names whose values are secrets (credentials, tokens, keys, SAS).
_SECRET_MARKERS = (
    "secret",
    "token",
    "password",
    "passwd",
    "access_key",
    "account_key",
    "private_key",
    "api_key",
    "apikey",
    "credential",
    "sas",
)
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://)(.*)$", re.DOTALL)


def is_secret_option(name: str) -> bool:
    """Whether the option ``name`` holds a secret (credentials, tokens, keys)."""
    lowered = str(name).lower()
    return any(marker in lowered for marker in _SECRET_MARKERS)


def mask_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` with every secret value replaced by ``***`` (for reprs and messages)."""
    return {k: (MASK if is_secret_option(k) else v) for k, v in options.items()}


def url_has_userinfo(url: str) -> bool:
    """Whether ``url`` carries ``user:password@`` (or anything else before an ``@`` that
    could be credentials) in front of its host."""
    match = _SCHEME.match(url)
    return match is not None and "@" in match.group(2)


def redact_url(url: str) -> str:
    """``url`` with any userinfo masked: ``s3://KEY:SECRET@bucket/p`` -> ``s3://***@bucket/p``.

    Everything up to the *last* ``@`` is masked: secret keys may themselves contain ``/``
    (AWS secret keys often do), which hides where the host really starts.
    """
    match = _SCHEME.match(url)
    if match is None or "@" not in match.group(2):
        return url
    return f"{match.group(1)}{MASK}@{match.group(2).rpartition('@')[2]}"
