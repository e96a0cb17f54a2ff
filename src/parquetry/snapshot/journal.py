"""The switch journal ``{key}/_parquetry_switch.json``: document and strict parser.

The journal is two things at once: the decided outcome of a write (which staged parts
become which final parts, and the new manifest), and the lock that makes one actor at a
time the only one touching a snapshot's committed objects (see :mod:`.lock`).

Format version 1, as earlier parquetry versions wrote it, plus optional fields they ignore:
``owner`` (token of the actor holding the lock; the writer's ``write_id`` by default),
``released`` (the holder failed and gave the lock up), ``overwrite`` (false: the write
must not replace an existing dataset) and ``kind`` (``"switch"``, or
``"maintenance"`` for a lock held by cleanup, ``delete_dataset`` or garbage collection).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

from parquetry.errors import ManifestCorrupted, ParquetryError
from parquetry.snapshot.layout import check_name
from parquetry.snapshot.manifest import DatasetManifest

__all__ = ["MAINTENANCE", "SWITCH", "PartMove", "SwitchJournal"]

_FORMAT = 1
SWITCH = "switch"
MAINTENANCE = "maintenance"


@dataclass(frozen=True, slots=True, kw_only=True)
class PartMove:
    """One staged part and the final name it gets."""

    staged: str
    final: str
    size: int


@dataclass(frozen=True, slots=True, kw_only=True)
class SwitchJournal:
    """A switch decided (``kind="switch"``) or a maintenance lock, held by ``owner``."""

    write_id: str
    manifest_json: str = ""
    moves: tuple[PartMove, ...] = ()
    owner: str = ""
    released: bool = False
    kind: str = SWITCH
    #: False for a write that must not replace an existing dataset (checked under the lock).
    overwrite: bool = True
    format_version: int = _FORMAT

    @property
    def holder(self) -> str:
        return self.owner or self.write_id

    @property
    def manifest(self) -> DatasetManifest:
        return DatasetManifest.from_json(self.manifest_json)

    def replace(self, **changes: Any) -> SwitchJournal:
        return dataclasses.replace(self, **changes)

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "format_version": self.format_version,
                "write_id": self.write_id,
                "manifest": self.manifest_json,
                "moves": [[m.staged, m.final, m.size] for m in self.moves],
                "owner": self.holder,
                "released": self.released,
                "kind": self.kind,
                "overwrite": self.overwrite,
            },
            sort_keys=True,
            indent=2,
        ).encode("utf-8")

    @classmethod
    def from_json(cls, raw: bytes, *, key: str) -> SwitchJournal:
        """Parse and validate completely; every defect is :class:`ManifestCorrupted`."""
        try:
            return _parse(raw)
        except (ValueError, TypeError, RecursionError, ParquetryError) as exc:
            reason = exc.message if isinstance(exc, ParquetryError) else str(exc)
            raise ManifestCorrupted(
                f"switch journal {key!r} is corrupt ({reason[:200]}); repair() discards it "
                f"once it is older than the switch lease",
                reason=f"corrupt switch journal: {reason[:200]}",
                key=key,
            ) from None


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _parse(raw: bytes) -> SwitchJournal:
    data = json.loads(raw.decode("utf-8"), parse_constant=_reject_constant)
    if not isinstance(data, dict):
        raise ValueError(f"expected a JSON object, got {type(data).__name__}")
    version = data.get("format_version")
    if type(version) is not int or version != _FORMAT:
        raise ValueError(f"unknown format_version {version!r}")
    kind = data.get("kind", SWITCH)
    if kind not in (SWITCH, MAINTENANCE):
        raise ValueError(f"unknown kind {kind!r}")
    write_id = check_name("write_id", data.get("write_id"))
    owner = data.get("owner", write_id)
    if not isinstance(owner, str):
        raise ValueError("owner must be a string")
    released = data.get("released", False)
    overwrite = data.get("overwrite", True)
    if not isinstance(released, bool) or not isinstance(overwrite, bool):
        raise ValueError("released and overwrite must be booleans")
    raw_moves = data.get("moves", [])
    if not isinstance(raw_moves, list):
        raise ValueError("moves must be a list")
    moves = tuple(_move(m) for m in raw_moves)
    manifest_json = data.get("manifest", "")
    if not isinstance(manifest_json, str):
        raise ValueError("manifest must be a string")
    journal = SwitchJournal(
        write_id=write_id,
        manifest_json=manifest_json,
        moves=moves,
        owner=owner,
        released=released,
        kind=kind,
        overwrite=overwrite,
    )
    if kind == SWITCH:
        if not moves:
            raise ValueError("a switch moves at least one part")
        manifest = journal.manifest  # ManifestCorrupted if the embedded manifest is bad
        if manifest.parts != [m.final for m in moves]:
            raise ValueError("the manifest's parts differ from the moves' targets")
        if len({m.staged for m in moves}) != len(moves):
            raise ValueError("a staged part is moved twice")
    return journal


def _move(item: object) -> PartMove:
    if not isinstance(item, list) or len(item) != 3:
        raise ValueError("each move must be [staged, final, size]")
    staged, final, size = item
    if type(size) is not int or size < 0:
        raise ValueError(f"move size must be a non-negative integer, got {size!r}")
    return PartMove(
        staged=check_name("staged part name", staged),
        final=check_name("final part name", final),
        size=size,
    )
