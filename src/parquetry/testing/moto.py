"""Run a real moto S3 server process on 127.0.0.1 for tests and benchmarks."""

from __future__ import annotations

import http.client
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["CREDENTIALS", "NO_METADATA_ENV", "MotoServer", "start_moto_server"]

#: Explicit credentials and region for every client of the test server: with them no client
#: ever walks the credential chain to a cloud metadata endpoint (169.254.169.254).
CREDENTIALS = {
    "access_key_id": "testing",
    "secret_access_key": "testing",
    "region": "us-east-1",
}
#: Environment that keeps SDKs off the cloud metadata endpoints: botocore honours
#: AWS_EC2_METADATA_DISABLED, obstore (object_store) reads AWS_METADATA_ENDPOINT, pointed
#: here at a closed loopback port so a probe fails at once and locally.
NO_METADATA_ENV = {
    "AWS_EC2_METADATA_DISABLED": "true",
    "AWS_METADATA_ENDPOINT": "http://127.0.0.1:9",
}


@dataclass
class MotoServer:
    """A running ``moto_server`` process; ``stop()`` ends it by PID."""

    endpoint: str
    pid: int
    process: subprocess.Popen[bytes] = field(repr=False)

    def options(self) -> dict[str, Any]:
        """Store options for :func:`parquetry.open_store` on this server."""
        return {"endpoint": self.endpoint, **CREDENTIALS}

    def env(self) -> dict[str, str]:
        """Environment for a subprocess (the CLI...) using this server: credentials, region
        and endpoint explicit, metadata endpoints off."""
        return {
            **NO_METADATA_ENV,
            "AWS_ACCESS_KEY_ID": CREDENTIALS["access_key_id"],
            "AWS_SECRET_ACCESS_KEY": CREDENTIALS["secret_access_key"],
            "AWS_REGION": CREDENTIALS["region"],
            "AWS_DEFAULT_REGION": CREDENTIALS["region"],
            "AWS_ENDPOINT_URL": self.endpoint,
        }

    def create_bucket(self, name: str | None = None) -> str:
        """Create a bucket (a fresh random name by default) and return its name."""
        name = name or f"b-{uuid.uuid4().hex[:16]}"
        req = urllib.request.Request(f"{self.endpoint}/{name}", method="PUT")
        with urllib.request.urlopen(req, timeout=60) as resp:
            resp.read()
        return name

    def url(self, bucket: str | None = None, prefix: str = "") -> str:
        bucket = bucket or self.create_bucket()
        return f"s3://{bucket}/{prefix}".rstrip("/")

    def stop(self) -> None:
        if self.process.poll() is None:
            os.kill(self.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.kill(self.pid, signal.SIGKILL)
                self.process.wait(timeout=10)


_MAIN = Path(__file__).with_name("_moto_main.py")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_moto_server(timeout: float = 120.0, attempts: int = 3) -> MotoServer:
    """Start a moto S3 server on a free loopback port and wait until it answers.

    The generous ``timeout`` is for a loaded CI machine, where importing moto alone can take
    many seconds. The port is free when chosen but another process may take it before the
    server binds; a server that exits before answering is started again on a new port.
    """
    env = {**os.environ, **NO_METADATA_ENV}
    deadline = time.monotonic() + timeout
    exits: list[int] = []
    for _attempt in range(attempts):
        port = _free_port()
        # moto's server with atomic conditional writes (see _moto_main), run by its path so
        # that it needs nothing but moto; -P keeps this directory (and its moto.py) off the
        # import path.
        cmd = [sys.executable, "-P", str(_MAIN), "-H", "127.0.0.1", "-p", str(port)]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        server = MotoServer(endpoint=f"http://127.0.0.1:{port}", pid=proc.pid, process=proc)
        if _wait_until_up(server, deadline):
            return server
        if proc.poll() is None:  # still starting at the deadline
            proc.kill()
            proc.wait()
            raise RuntimeError(f"moto_server did not start on {server.endpoint} within {timeout}s")
        exits.append(proc.returncode)
    raise RuntimeError(f"moto_server exited before answering, {attempts} times: {exits}")


def _wait_until_up(server: MotoServer, deadline: float) -> bool:
    """Whether ``server`` answers before ``deadline``; False as soon as its process exits."""
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            return False
        try:
            with urllib.request.urlopen(f"{server.endpoint}/moto-api/", timeout=5):
                return True
        except urllib.error.HTTPError:
            return True  # it answered
        except (OSError, http.client.HTTPException):
            # Refused, reset, timed out or a half-written answer: not up yet.
            time.sleep(0.1)
    return False
