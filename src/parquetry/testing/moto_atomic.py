"""``moto_server`` with atomic conditional writes: ``python -m parquetry.testing.moto_atomic``.

moto 5.2 checks ``If-None-Match`` / ``If-Match`` and then stores the object without a lock,
and its server is threaded: two concurrent create-if-absent PUTs of one key can both succeed
(measured: 1 round in 100 of 16 racing creates had two winners). Real S3 makes the check and
the write one step. parquetry's commit point is exactly that primitive, so tests against an
unpatched moto can lose an acknowledged row through moto's race, not ours. This launcher
takes one lock around every S3 write that carries a condition (put, complete multipart
upload, delete) and otherwise runs moto's own server unchanged.
"""

from __future__ import annotations

import functools
import sys
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["main", "patch_moto"]

_LOCK = threading.Lock()
_METHODS = ("put_object", "_key_response_post", "delete_object")


def _locked(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with _LOCK:
            return method(*args, **kwargs)

    return wrapper


def patch_moto() -> None:
    """Serialise moto's S3 writes that check a condition before storing."""
    from moto.s3.responses import S3Response

    for name in _METHODS:
        method = getattr(S3Response, name, None)
        if method is not None and not getattr(method, "_parquetry_locked", False):
            wrapped = _locked(method)
            wrapped._parquetry_locked = True  # type: ignore[attr-defined]
            setattr(S3Response, name, wrapped)


def main(argv: list[str] | None = None) -> None:
    patch_moto()
    from moto.server import main as moto_main

    moto_main(argv if argv is not None else sys.argv[1:])


if __name__ == "__main__":
    main()
