"""``moto_server`` whose writes are atomic, as S3's are: run as a script by
:func:`parquetry.testing.moto.start_moto_server`.

moto checks a conditional PUT (``If-None-Match: *``, ``If-Match``) and then stores the
object in two steps, on a threaded server: two writers racing for one key can both pass the
check and both be told they won, so a commit is lost. S3 makes the check and the write one
step. Here every request that changes something (any method but GET, HEAD and OPTIONS)
runs under one lock; reads stay concurrent.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterable
from typing import Any

_READS = frozenset({"GET", "HEAD", "OPTIONS"})


def _serialized_writes(app: Callable[..., Iterable[bytes]]) -> Callable[..., Iterable[bytes]]:
    lock = threading.Lock()

    def wrapped(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("REQUEST_METHOD", "GET") in _READS:
            return app(environ, start_response)
        with lock:
            return list(app(environ, start_response))  # the whole request inside the lock

    return wrapped


def main(argv: list[str] | None = None) -> None:
    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from werkzeug.serving import run_simple

    parser = argparse.ArgumentParser()
    parser.add_argument("-H", "--host", default="127.0.0.1")
    parser.add_argument("-p", "--port", type=int, required=True)
    args = parser.parse_args(argv)
    os.environ.setdefault("MOTO_PORT", str(args.port))
    signal.signal(signal.SIGTERM, lambda _signum, _frame: sys.exit(0))
    app = DomainDispatcherApplication(create_backend_app)
    run_simple(
        args.host,
        args.port,
        _serialized_writes(app),
        threaded=True,
        request_handler=MotoRequestHandler,
    )


if __name__ == "__main__":
    main()
