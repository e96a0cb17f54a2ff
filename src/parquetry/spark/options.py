"""The ``parquetry`` data source's options, parsed once (Spark lower-cases option keys)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Literal

from parquetry.errors import InvalidArgument
from parquetry.store import Store, open_store
from parquetry.store.secrets import mask_options, redact_url

__all__ = ["STORE_OPTION_KEYS", "SourceOptions"]

# Options handed to open_store as they are; any other "store.<name>" option also reaches it.
STORE_OPTION_KEYS = (
    "endpoint",
    "region",
    "access_key_id",
    "secret_access_key",
    "session_token",
    "fsync",
)
_LAYOUTS = ("dataset", "snapshot")
_PUSHDOWN = ("auto", "true", "false")


def _names(value: str | None) -> tuple[str, ...]:
    if not value:
        return ()
    return tuple(name.strip() for name in value.split(",") if name.strip())


Predicates = tuple[tuple[tuple[str, str, Any], ...], ...]


def _predicates(raw: str | None) -> Predicates | None:
    """Option ``predicates``: kartothek DNF as JSON (``dnf_to_json``), checked for shape here
    and against the dataset schema when the read is planned."""
    if raw is None or raw.strip() == "":
        return None
    from parquetry.dataset.predicates import dnf_from_json

    try:
        doc = json.loads(raw)
    except ValueError as exc:
        raise InvalidArgument(f"option 'predicates' is not JSON ({exc}): {raw!r}") from None
    if not isinstance(doc, list) or not doc or not all(isinstance(c, list) and c for c in doc):
        raise InvalidArgument(
            f"option 'predicates' must be a non-empty JSON list of non-empty lists, got {raw!r}"
        )
    try:
        dnf = dnf_from_json(doc)
    except ValueError as exc:
        raise InvalidArgument(f"option 'predicates': {exc}") from None
    return tuple(
        tuple((col, op, tuple(v) if isinstance(v, list) else v) for col, op, v in conj)
        for conj in dnf
    )


def _parameters(raw: str | None) -> tuple[tuple[str, str], ...]:
    """Option ``parameters``: a JSON object recorded with the write's commit (the user's own
    entries of the dataset's history; JSON keeps their case, which Spark's option keys lose)."""
    if raw is None or raw.strip() == "":
        return ()
    try:
        doc = json.loads(raw)
    except ValueError as exc:
        raise InvalidArgument(f"option 'parameters' is not JSON ({exc}): {raw!r}") from None
    if not isinstance(doc, dict):
        raise InvalidArgument(f"option 'parameters' must be a JSON object, got {raw!r}")
    return tuple(
        sorted((str(k), v if isinstance(v, str) else json.dumps(v)) for k, v in doc.items())
    )


def _int(options: Mapping[str, str], name: str, default: int | None) -> int | None:
    raw = options.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise InvalidArgument(f"option {name!r} must be an integer, got {raw!r}") from None


@dataclass(frozen=True, slots=True, kw_only=True)
class SourceOptions:
    """Everything a read or write of the ``parquetry`` format is told through options."""

    store_url: str
    store_options: dict[str, Any] = field(default_factory=dict)
    layout: Literal["dataset", "snapshot"] = "dataset"
    dataset: str | None = None
    key: str | None = None
    partition_on: tuple[str, ...] = ()
    secondary_indices: tuple[str, ...] = ()
    version: int | None = None
    predicates: Predicates | None = None
    run_id: str | None = None
    pushdown: Literal["auto", "true", "false"] = "auto"
    task_bytes: int = 128 * 1024 * 1024
    max_tasks: int | None = None
    rows_per_file: int = 4_000_000
    compression: str = "zstd"
    trace_reads: str | None = None
    #: The user's entries for the commit's parameters (option ``parameters``, JSON object).
    parameters: tuple[tuple[str, str], ...] = ()

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SourceOptions:
        """Validate Spark's options.

        Raises:
            InvalidArgument: a required option is missing or a value is malformed (the message
                names the option).
        """
        opts = {str(k).lower(): str(v) for k, v in options.items() if v is not None}
        store_url = opts.get("store") or opts.get("path")
        if not store_url:
            raise InvalidArgument("option 'store' (a store URL such as file:///lake) is required")
        layout = opts.get("layout", "dataset").lower()
        if layout not in _LAYOUTS:
            raise InvalidArgument(f"option 'layout' must be one of {_LAYOUTS}, got {layout!r}")
        pushdown = opts.get("pushdown", "auto").lower()
        if pushdown not in _PUSHDOWN:
            raise InvalidArgument(f"option 'pushdown' must be one of {_PUSHDOWN}, got {pushdown!r}")
        store_options: dict[str, Any] = {k: opts[k] for k in STORE_OPTION_KEYS if k in opts}
        if "fsync" in store_options:
            store_options["fsync"] = store_options["fsync"].lower() in ("1", "true", "yes")
        store_options.update({k[6:]: v for k, v in opts.items() if k.startswith("store.")})
        dataset = opts.get("dataset") or opts.get("uuid")
        key = opts.get("key")
        if layout == "dataset" and not dataset:
            raise InvalidArgument("option 'dataset' (the dataset UUID) is required")
        if layout == "snapshot" and not key:
            raise InvalidArgument("option 'key' (the snapshot key) is required for layout=snapshot")
        if layout == "snapshot" and opts.get("predicates"):
            raise InvalidArgument("option 'predicates' needs layout=dataset (snapshots have none)")
        task_bytes = _int(opts, "task_bytes", 128 * 1024 * 1024)
        rows_per_file = _int(opts, "rows_per_file", 4_000_000)
        return cls(
            store_url=store_url,
            store_options=store_options,
            layout="snapshot" if layout == "snapshot" else "dataset",
            dataset=dataset,
            key=key,
            partition_on=_names(opts.get("partition_on")),
            secondary_indices=_names(opts.get("secondary_indices")),
            version=_int(opts, "version", None),
            predicates=_predicates(opts.get("predicates")),
            run_id=opts.get("run_id") or None,
            pushdown="true" if pushdown == "true" else "false" if pushdown == "false" else "auto",
            task_bytes=task_bytes or 128 * 1024 * 1024,
            max_tasks=_int(opts, "max_tasks", None),
            rows_per_file=rows_per_file or 4_000_000,
            compression=opts.get("compression", "zstd"),
            trace_reads=opts.get("trace_reads") or None,
            parameters=_parameters(opts.get("parameters")),
        )

    def __repr__(self) -> str:
        # Options travel into Spark plans, logs and error reports: secrets never print.
        shown = []
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "store_url":
                value = redact_url(value)
            elif f.name == "store_options":
                value = mask_options(value)
            shown.append(f"{f.name}={value!r}")
        return f"SourceOptions({', '.join(shown)})"

    def open_store(self) -> Store:
        """The store these options name (opened anew in each Spark worker)."""
        return open_store(self.store_url, **self.store_options)

    def to_spark(self) -> dict[str, str]:
        """Options that :meth:`parse` turns back into an equal value."""
        out: dict[str, str] = {"store": self.store_url, "layout": self.layout}
        for name in STORE_OPTION_KEYS:
            if name in self.store_options:
                out[name] = (
                    str(self.store_options[name]).lower()
                    if name == "fsync"
                    else str(self.store_options[name])
                )
        out.update({f"store.{k}": str(v) for k, v in self.store_options.items() if k not in out})
        optional = {
            "dataset": self.dataset,
            "key": self.key,
            "partition_on": ",".join(self.partition_on),
            "secondary_indices": ",".join(self.secondary_indices),
            "version": None if self.version is None else str(self.version),
            "predicates": None if self.predicates is None else _predicates_json(self.predicates),
            "run_id": self.run_id,
            "max_tasks": None if self.max_tasks is None else str(self.max_tasks),
            "trace_reads": self.trace_reads,
            "parameters": json.dumps(dict(self.parameters)) if self.parameters else None,
        }
        out.update({k: v for k, v in optional.items() if v})
        out.update(
            {
                "pushdown": self.pushdown,
                "task_bytes": str(self.task_bytes),
                "rows_per_file": str(self.rows_per_file),
                "compression": self.compression,
            }
        )
        return out


def _predicates_json(predicates: Predicates) -> str:
    from parquetry.dataset.predicates import dnf_to_json

    return json.dumps(dnf_to_json(predicates))
