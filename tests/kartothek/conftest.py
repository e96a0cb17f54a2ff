"""Fixtures for the kartothek 5.3.0 compatibility tests.

The tests run kartothek in its own Python 3.8 venv (built by ``scripts/kartothek-venv.sh``,
cached by a stamp file) through ``kt_driver.py``: JSON in on stdin, JSON out on stdout. Every
test batches its kartothek operations into as few driver calls as possible, because each call
costs about a second.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
VENV_SCRIPT = ROOT / "scripts" / "kartothek-venv.sh"
DRIVER = Path(__file__).with_name("kt_driver.py")
PY38 = Path(os.environ.get("KARTOTHEK_PYTHON", Path.home() / ".pyenv/versions/3.8.18/bin/python"))
VENV = Path(os.environ.get("KARTOTHEK_VENV", ROOT / ".venv-kartothek"))


class KartothekError(AssertionError):
    """kartothek raised inside the driver; carries its traceback."""


@dataclass(frozen=True, slots=True)
class Kartothek:
    """Runs batches of operations with real kartothek 5.3.0 against a local directory store."""

    python: Path

    def run(self, store_root: Path, ops: Sequence[dict[str, Any]]) -> list[Any]:
        """Run ``ops`` in one kartothek process; return one result per op.

        Raises:
            KartothekError: kartothek failed on an op (message names the op and the error).
        """
        request = json.dumps({"store": str(Path(store_root).resolve()), "ops": list(ops)})
        proc = subprocess.run(
            [str(self.python), str(DRIVER)],
            input=request,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        if proc.returncode != 0 or not proc.stdout.strip():
            raise KartothekError(
                f"kt_driver exited {proc.returncode}\nstderr:\n{proc.stderr[-4000:]}"
            )
        response = json.loads(proc.stdout)
        if "error" in response:
            raise KartothekError(
                f"kartothek failed on op #{response['op_index']} ({response['op']}): "
                f"{response['error']}\n{response['traceback']}"
            )
        return list(response["results"])

    def one(self, store_root: Path, op: dict[str, Any]) -> Any:
        return self.run(store_root, [op])[0]


@pytest.fixture(scope="session")
def kartothek() -> Kartothek:
    """kartothek 5.3.0 in its venv; builds the venv once (cached), skips without Python 3.8."""
    if not PY38.exists():
        pytest.skip(f"kartothek compatibility needs Python 3.8 at {PY38} (pyenv 3.8.18); absent")
    proc = subprocess.run(
        ["bash", str(VENV_SCRIPT)], capture_output=True, text=True, timeout=1200, check=False
    )
    if proc.returncode != 0:
        pytest.fail(f"scripts/kartothek-venv.sh failed:\n{proc.stderr[-4000:]}")
    python = VENV / "bin" / "python"
    assert python.exists(), f"{VENV_SCRIPT} succeeded but {python} is missing"
    return Kartothek(python=python)
