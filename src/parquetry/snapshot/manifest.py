"""The metadata documents of a snapshot dataset: the manifest and a staged part's receipt."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa

from parquetry.errors import ManifestCorrupted

__all__ = ["DatasetManifest", "StagedPart", "schema_hash"]

_REQUIRED = ("dataset_key", "parts", "row_count", "schema_hash", "compression", "created_at_utc")


def schema_hash(schema: pa.Schema) -> str:
    """First 16 hex characters of SHA-256 of ``schema.to_string()`` (remote-store's rule)."""
    return hashlib.sha256(schema.to_string().encode("utf-8")).hexdigest()[:16]


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_str_list(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(p, str) for p in value)


def _is_str_dict(value: object) -> bool:
    return isinstance(value, dict) and all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    )


# field -> (check, what the field must be); in the order remote-store checks them.
_CHECKS: dict[str, tuple[Callable[[object], bool], str]] = {
    "dataset_key": (lambda v: isinstance(v, str), "a string"),
    "parts": (_is_str_list, "a list of strings"),
    "row_count": (_is_int, "an integer"),
    "schema_hash": (lambda v: isinstance(v, str), "a string"),
    "compression": (lambda v: isinstance(v, str), "a string"),
    "created_at_utc": (lambda v: isinstance(v, str), "a string"),
    "run_id": (lambda v: v is None or isinstance(v, str), "a string or null"),
    "metadata": (lambda v: v is None or _is_str_dict(v), "a dict[str, str] or null"),
    "txns": (
        lambda v: (
            v is None
            or (
                isinstance(v, dict) and all(isinstance(k, str) and _is_int(x) for k, x in v.items())
            )
        ),
        "a dict[str, int] or null",
    ),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class DatasetManifest:
    """What a committed snapshot dataset holds (``{key}/manifest.json``).

    The JSON form is byte-compatible with remote-store 0.33.0: sorted keys, 2-space indent,
    ``None`` fields left out, no trailing newline.

    Attributes:
        dataset_key: The dataset's key as given to ``write_dataset``.
        parts: Part file names relative to the dataset directory, in row order.
        row_count: Rows over all parts.
        schema_hash: :func:`schema_hash` of the written table's Arrow schema.
        compression: The codec name as configured (``"none"`` stays ``"none"``).
        created_at_utc: ISO 8601 time of the write (``+00:00``, microseconds).
        run_id: Caller's pipeline run id, if any.
        metadata: Caller's string key-value pairs, if any.
        txns: Transactions, application id -> last version committed (a streaming
            sink's query id -> batch id; see :mod:`parquetry.dataset.txns`); parquetry's
            own field, left out when None (remote-store readers ignore unknown fields).
    """

    dataset_key: str
    parts: list[str]
    row_count: int
    schema_hash: str
    compression: str
    created_at_utc: str
    run_id: str | None = None
    metadata: dict[str, str] | None = None
    txns: dict[str, int] | None = None

    @classmethod
    def for_parts(
        cls,
        key: str,
        names: list[str],
        parts: list[StagedPart],
        *,
        compression: str,
        run_id: str | None,
        metadata: dict[str, str] | None,
        txns: dict[str, int] | None = None,
    ) -> DatasetManifest:
        """The manifest of a write of ``parts`` (receipts, in order) named ``names``, now."""
        return cls(
            dataset_key=key,
            parts=list(names),
            row_count=sum(p.rows for p in parts),
            schema_hash=parts[0].schema_hash,
            compression=compression,
            created_at_utc=datetime.now(UTC).isoformat(),
            run_id=run_id,
            metadata=dict(metadata) if metadata is not None else None,
            txns=dict(txns) if txns else None,
        )

    def to_json(self) -> str:
        """The canonical JSON text (what ``manifest.json`` holds, UTF-8 encoded)."""
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        return json.dumps(
            {k: v for k, v in data.items() if v is not None}, sort_keys=True, indent=2
        )

    @classmethod
    def from_json(cls, text: str | bytes) -> DatasetManifest:
        """Parse and validate a manifest; unknown fields are ignored.

        Raises:
            ManifestCorrupted: invalid JSON or UTF-8, not an object, required fields
                missing, or fields of the wrong type; the message names every bad field.
        """
        try:
            data = json.loads(text)
        # JSONDecodeError and UnicodeDecodeError; RecursionError for deeply nested arrays.
        except (ValueError, TypeError, RecursionError) as exc:
            raise ManifestCorrupted(
                "Failed to parse manifest JSON", reason=f"Invalid JSON: {exc}"
            ) from None
        if not isinstance(data, dict):
            raise ManifestCorrupted(
                "Manifest must be a JSON object",
                reason=f"Expected object, got {type(data).__name__}",
            )
        missing = [f for f in _REQUIRED if f not in data]
        if missing:
            raise ManifestCorrupted(
                f"Manifest missing required fields: {', '.join(missing)}",
                reason=f"Missing fields: {', '.join(missing)}",
            )
        problems = [
            f"Field {name!r} must be {what}, got {type(data.get(name)).__name__}"
            for name, (check, what) in _CHECKS.items()
            if not check(data.get(name))
        ]
        if problems:
            raise ManifestCorrupted("; ".join(problems), reason="; ".join(problems))
        return cls(
            dataset_key=data["dataset_key"],
            parts=data["parts"],
            row_count=data["row_count"],
            schema_hash=data["schema_hash"],
            compression=data["compression"],
            created_at_utc=data["created_at_utc"],
            run_id=data.get("run_id"),
            metadata=data.get("metadata"),
            txns=data.get("txns"),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class StagedPart:
    """Receipt for one part staged by :meth:`ParquetDatasetStore.write_part`.

    Picklable and JSON-able: Spark executors return it to the driver, which passes the
    receipts to :meth:`ParquetDatasetStore.commit_write`.

    Attributes:
        name: The staged file's name inside the write's staging directory.
        rows: Rows in the part.
        size: Bytes of the encoded Parquet file.
        schema_hash: :func:`schema_hash` of the part's Arrow schema.
    """

    name: str
    rows: int
    size: int
    schema_hash: str

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str | bytes) -> StagedPart:
        try:
            data: Any = json.loads(text)
        except (ValueError, TypeError, RecursionError) as exc:
            raise ManifestCorrupted(f"staged part receipt is not JSON: {exc}") from None
        if not isinstance(data, dict):
            raise ManifestCorrupted("staged part receipt must be a JSON object")
        bad = [
            name
            for name, check in (("name", str), ("rows", int), ("size", int), ("schema_hash", str))
            if not isinstance(data.get(name), check) or isinstance(data.get(name), bool)
        ]
        if bad:
            raise ManifestCorrupted(
                f"staged part receipt has missing or bad fields: {', '.join(bad)}",
                reason=f"bad fields: {', '.join(bad)}",
            )
        return cls(
            name=data["name"], rows=data["rows"], size=data["size"], schema_hash=data["schema_hash"]
        )
