"""Fixtures for the kartothek 5.3.0 compatibility tests.

The tests run kartothek in its own Python 3.8 venv (built by ``scripts/kartothek-venv.sh``,
cached by a stamp file) through ``kt_driver.py``: JSON in on stdin, JSON out on stdout. Every
test batches its kartothek operations into as few driver calls as possible, because each call
costs about a second.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from kt_harness import Kartothek

ROOT = Path(__file__).resolve().parents[2]
VENV_SCRIPT = ROOT / "scripts" / "kartothek-venv.sh"
PY38 = Path(os.environ.get("KARTOTHEK_PYTHON", Path.home() / ".pyenv/versions/3.8.18/bin/python"))
VENV = Path(os.environ.get("KARTOTHEK_VENV", ROOT / ".venv-kartothek"))


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
