"""Helpers of the CLI tests: a lake with datasets of both kinds, running the command."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
from typer.testing import CliRunner, Result

from parquetry import Dataset, ParquetDatasetStore
from parquetry.cli.app import app
from parquetry.store import LocalStore, Store, open_store
from parquetry.testing.moto import CREDENTIALS, MotoServer

ORDERS = pa.table(
    {
        "country": ["DE", "DE", "FR", "US"],
        "product_id": pa.array([1, 2, 3, 1], pa.int64()),
        "day": [dt.date(2021, 1, 1), dt.date(2021, 1, 2), dt.date(2021, 1, 2), dt.date(2021, 1, 3)],
        "amount": [1.5, 2.0, None, 4.0],
    }
)


@dataclass
class Lake:
    """A store holding ``orders`` (kartothek format, 2 versions) and ``daily/summary``."""

    url: str
    store: Store
    args: list[str] = field(default_factory=list)  # store flags for every command
    env: dict[str, str] = field(default_factory=dict)

    def run(self, *argv: str) -> Result:
        """``parquetry CMD URL ARGS... [store flags]``."""
        command, *rest = argv
        return CliRunner().invoke(app, [command, self.url, *rest, *self.args], env=self.env)

    def run_raw(self, *argv: str) -> Result:
        """``parquetry ARGS... [store flags]`` (no URL inserted)."""
        return CliRunner().invoke(app, [*argv, *self.args], env=self.env)


def fill(store: Store) -> None:
    ds = Dataset.create(
        store, "orders", ORDERS, partition_on=["country"], secondary_indices=["product_id"]
    )
    ds.append(ORDERS)
    ParquetDatasetStore(store).write_dataset(ORDERS, "daily/summary", run_id="run-1")


def local_lake(tmp_path: Path) -> Lake:
    store = LocalStore(tmp_path / "lake")
    fill(store)
    return Lake(url=str(tmp_path / "lake"), store=store)


def s3_lake(server: MotoServer) -> Lake:
    url = server.url()
    store = open_store(url, **server.options())
    fill(store)
    env = {
        "AWS_ACCESS_KEY_ID": CREDENTIALS["access_key_id"],
        "AWS_SECRET_ACCESS_KEY": CREDENTIALS["secret_access_key"],
        "AWS_REGION": CREDENTIALS["region"],
    }
    return Lake(url=url, store=store, args=["--endpoint", server.endpoint], env=env)


def invoke(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(app, list(args), env=env)


def one_error_line(result: Result) -> str:
    """The single ``error:`` line of a failed command (and no traceback anywhere)."""
    assert "Traceback" not in result.output + result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: "), lines[0]
    return lines[0]
