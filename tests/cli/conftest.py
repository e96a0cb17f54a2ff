"""Fixtures of the CLI tests: lakes on local disk and S3 (moto)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_helpers import Lake, local_lake, s3_lake


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def lake(request: pytest.FixtureRequest, tmp_path: Path) -> Lake:
    """``orders`` and ``daily/summary`` on each backend."""
    if request.param == "local":
        return local_lake(tmp_path)
    return s3_lake(request.getfixturevalue("moto_server"))


@pytest.fixture
def local(tmp_path: Path) -> Lake:
    return local_lake(tmp_path)


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A loopback port with nothing listening: bound but not listening for the whole test,
    so connections are refused and no other process can take the port meanwhile."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield int(s.getsockname()[1])
