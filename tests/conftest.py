"""Fixtures shared by every test package: stores on every backend, the moto server."""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from parquetry.store import LocalStore, MemoryStore, Store, open_store
from parquetry.testing.moto import NO_METADATA_ENV, MotoServer, start_moto_server

# No test may reach a cloud metadata endpoint, in this process or any it starts (spawned
# workers, the CLI in a subprocess, Spark's Python workers): set before any client exists.
os.environ.update(NO_METADATA_ENV)

# CI (CI=true) replays the same examples on every run, so a landing never depends on the luck
# of a draw; local runs explore new examples each time (and keep failures in .hypothesis/).
# Both profiles: no per-example deadline and no "data generation too slow" health check. Both
# measure wall-clock time, which a loaded CI machine stretches; tests that set these
# themselves (most do) keep their own values.
_UNTIMED = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow]}
settings.register_profile("ci", derandomize=True, print_blob=True, **_UNTIMED)
settings.register_profile("dev", print_blob=True, **_UNTIMED)
settings.load_profile("ci" if os.environ.get("CI") else "dev")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """End the pytest process, once everything is reported, without interpreter
    finalization: an Arrow worker thread that frees a Python-owned buffer after
    finalization began aborts the process (apache/arrow#34314), which would turn a green
    run into exit code -6 (what the ``parquetry`` program and the test subprocesses avoid
    with ``os._exit`` too). The exit handler runs after pytest has written its summary and
    restored the output streams, and before finalization starts; it keeps pytest's status.
    """
    atexit.register(_exit_now, session)


def _exit_now(session: pytest.Session) -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(int(session.exitstatus))


@pytest.fixture(scope="session")
def moto_server() -> Iterator[MotoServer]:
    """A real moto S3 server process on 127.0.0.1, stopped by its PID at the end."""
    server = start_moto_server()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def s3_store(moto_server: MotoServer) -> Store:
    """A store on a fresh bucket of the moto server."""
    return open_store(moto_server.url(), **moto_server.options())


@pytest.fixture
def local_store(tmp_path: Path) -> LocalStore:
    return LocalStore(tmp_path / "store")


@pytest.fixture
def memory_store() -> MemoryStore:
    return MemoryStore(f"test-{uuid.uuid4().hex}")


@pytest.fixture(params=["memory", "local", "s3"])
def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    """The same test on every backend (S3 through moto)."""
    kind = request.param
    if kind == "memory":
        return MemoryStore(f"test-{uuid.uuid4().hex}")
    if kind == "local":
        return LocalStore(tmp_path / "store")
    server: MotoServer = request.getfixturevalue("moto_server")
    return open_store(server.url(), **server.options())


@pytest.fixture
def store_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[str], Store]:
    """Make a fresh store of a given kind: ``store_factory("s3")``."""

    def make(kind: str) -> Store:
        if kind == "memory":
            return MemoryStore(f"test-{uuid.uuid4().hex}")
        if kind == "local":
            return LocalStore(tmp_path / f"store-{uuid.uuid4().hex[:8]}")
        server: MotoServer = request.getfixturevalue("moto_server")
        return open_store(server.url(), **server.options())

    return make


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """The one local[2,2] SparkSession of the run (2 attempts per task, for retry tests).

    Spark keeps one context per process and ``getOrCreate`` returns it whatever the settings
    asked for, so every test package shares this one (its workers run this interpreter).
    """
    pytest.importorskip("pyspark")
    from parquetry.spark import local_session

    session = local_session("local[2,2]", app_name="parquetry-tests")
    try:
        yield session
    finally:
        session.stop()
