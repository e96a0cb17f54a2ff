"""Where a harness run stores its datasets: a description a child process can open.

A :class:`StoreTarget` is plain JSON (a local root, or an S3 URL with its endpoint and
explicit credentials), so a spawned child opens the same store without inheriting objects,
and no client ever probes a cloud metadata endpoint for credentials.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from parquetry.store import LocalStore, Store, open_store
from parquetry.testing.moto import CREDENTIALS, MotoServer

__all__ = ["StoreTarget", "TargetFactory", "local_target", "s3_target"]


@dataclass(frozen=True)
class StoreTarget:
    """A store a child process can open: ``kind`` is ``local`` or ``s3``."""

    kind: str
    url: str
    options: dict[str, Any] = field(default_factory=dict)

    def open(self) -> Store:
        if self.kind == "local":
            return LocalStore(self.url)
        return open_store(self.url, **self.options)

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> StoreTarget:
        return cls(**json.loads(text))

    def cli_args(self) -> list[str]:
        """The store arguments of a ``parquetry`` command: URL (and endpoint)."""
        if self.kind == "local":
            return [self.url]
        return [self.url, "--endpoint", self.options["endpoint"]]

    def cli_env(self) -> dict[str, str]:
        """Credentials for the CLI, which takes them from the environment only."""
        if self.kind == "local":
            return {}
        return {
            "AWS_ACCESS_KEY_ID": self.options["access_key_id"],
            "AWS_SECRET_ACCESS_KEY": self.options["secret_access_key"],
            "AWS_REGION": self.options["region"],
            "AWS_EC2_METADATA_DISABLED": "true",
        }


def local_target(root: Path) -> StoreTarget:
    root.mkdir(parents=True, exist_ok=True)
    return StoreTarget(kind="local", url=str(root))


def s3_target(server: MotoServer) -> StoreTarget:
    """A fresh bucket on the moto server, with explicit credentials."""
    return StoreTarget(kind="s3", url=server.url(), options={**server.options(), **CREDENTIALS})


@dataclass(frozen=True)
class TargetFactory:
    """A fresh store of one kind per call: a new root under ``base``, or a new bucket."""

    kind: str
    base: Path
    server: MotoServer | None = None

    def __call__(self) -> StoreTarget:
        if self.kind == "local":
            return local_target(self.base / "stores" / uuid.uuid4().hex[:8])
        if self.server is None:
            raise ValueError("an S3 target needs the moto server")
        return s3_target(self.server)
