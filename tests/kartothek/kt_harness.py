"""Runs kt_driver.py with kartothek 5.3.0's interpreter (kept out of conftest.py so test modules
can import it without clashing with other directories' conftest modules)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DRIVER = Path(__file__).with_name("kt_driver.py")


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
