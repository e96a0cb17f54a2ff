"""The test S3 server makes a conditional write's check and write one step, as S3 does."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from parquetry.testing._conformance_races import race
from parquetry.testing._moto_main import _serialized_writes


def _check_then_write_app() -> Callable[..., Iterable[bytes]]:
    """A WSGI app that, like moto's PUT with If-None-Match, checks and then writes: a
    thread switch in between lets two writers both win."""
    objects: dict[str, bytes] = {}

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        key = environ["PATH_INFO"]
        if environ["REQUEST_METHOD"] == "GET" or key in objects:
            start_response("412 Precondition Failed", [])
            return [b"412"]
        time.sleep(0.02)  # the window between the check and the write
        objects[key] = b"x"
        start_response("200 OK", [])
        return [b"200"]

    return app


def _create_race(app: Callable[..., Iterable[bytes]]) -> list[bytes]:
    def put(_i: int) -> bytes:
        return b"".join(app({"REQUEST_METHOD": "PUT", "PATH_INFO": "/k"}, lambda *a: None))

    return race(8, put)


def test_conditional_writes_race_without_the_lock_and_not_with_it() -> None:
    """Regression: moto's threaded server let several creates of one key win (a lost
    commit in a 16-thread append test on S3 under load)."""
    assert _create_race(_check_then_write_app()).count(b"200") > 1  # the race is real
    assert _create_race(_serialized_writes(_check_then_write_app())).count(b"200") == 1


def test_reads_are_not_serialized() -> None:
    inside = threading.Barrier(2, timeout=30)

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        inside.wait()  # both reads must be inside at once
        start_response("200 OK", [])
        return [b"ok"]

    wrapped = _serialized_writes(app)
    results = race(2, lambda _i: list(wrapped({"REQUEST_METHOD": "GET"}, lambda *a: None)))
    assert results == [[b"ok"], [b"ok"]]
