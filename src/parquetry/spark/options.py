"""The ``parquetry`` data source's options, parsed once (Spark lower-cases option keys)."""

from __future__ import annotations

import datetime
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Literal

from parquetry.errors import InvalidArgument
from parquetry.spark.option_names import (
    SPARK_KEYS,
    check_known,
    field_option_names,
    known_names,
    parse_timestamp,
    split_path,
)
from parquetry.spark.stream_options import STREAM_KEYS
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
_OVERWRITE_MODES = ("static", "dynamic")
# What a write does when the dataset exists: Spark refuses modes other than append and
# overwrite for Python sources, so "error" and "ignore" travel as this option (the helpers
# set it; commit then creates the dataset or fails / does nothing).
_SAVE_MODES = ("error", "errorifexists", "ignore")


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


def _bool(options: Mapping[str, str], name: str) -> bool:
    """The true/false option of field ``name`` (under any of its spellings)."""
    raw = _one(options, name)
    if raw is None or raw == "":
        return False
    value = raw.strip().lower()
    if value not in ("true", "false"):
        raise InvalidArgument(f"option {name!r} must be true or false, got {raw!r}")
    return value == "true"


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
    raw = _one(options, name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise InvalidArgument(f"option {name!r} must be an integer, got {raw!r}") from None


@dataclass(frozen=True, slots=True, kw_only=True)
class SourceOptions:
    """Everything a read or write of the ``parquetry`` format is told through options."""

    # metadata "options": the keys that set a field when they are not its name and camelCase
    # spelling (option_names.field_option_names); every field's keys are known options.
    store_url: str = field(metadata={"options": ("store",)})
    store_options: dict[str, Any] = field(
        default_factory=dict, metadata={"options": STORE_OPTION_KEYS}
    )
    layout: Literal["dataset", "snapshot"] = "dataset"
    dataset: str | None = field(default=None, metadata={"options": ("dataset", "uuid")})
    key: str | None = None
    partition_on: tuple[str, ...] = ()
    secondary_indices: tuple[str, ...] = ()
    version: int | None = field(default=None, metadata={"options": ("version", "versionAsOf")})
    #: Read the newest version committed at or before this instant (UTC).
    timestamp_as_of: datetime.datetime | None = field(
        default=None, metadata={"options": ("timestampAsOf",)}
    )
    predicates: Predicates | None = None
    run_id: str | None = None
    pushdown: Literal["auto", "true", "false"] = "auto"
    task_bytes: int = 128 * 1024 * 1024
    max_tasks: int | None = None
    rows_per_file: int = 4_000_000
    compression: str = "zstd"
    trace_reads: str | None = None
    #: Spark option ``mergeSchema``: a write may add nullable columns/fields and widen types.
    merge_schema: bool = False
    #: Spark option ``overwriteSchema``: ``mode("overwrite")`` replaces schema and layout.
    overwrite_schema: bool = False
    # Write with mode("overwrite"): replace only the rows matching this Spark SQL condition
    # (option "replaceWhere"; checked for syntax here, typed against the schema by the writer).
    replace_where: str | None = None
    # "dynamic": mode("overwrite") replaces only the partitions the DataFrame has (option
    # "partitionOverwriteMode"); None = static, the whole dataset.
    partition_overwrite_mode: Literal["static", "dynamic"] | None = None
    # "error"/"errorifexists"/"ignore" when the dataset exists (option "save_mode").
    save_mode: Literal["error", "ignore"] | None = None
    columns: tuple[str, ...] | None = None
    #: The user's entries for the commit's parameters (option ``parameters``, JSON object).
    parameters: tuple[tuple[str, str], ...] = ()
    #: Idempotent writes (Delta's options ``txnAppId``/``txnVersion``, both or neither): the
    #: commit records the pair; a write whose version is already recorded commits nothing.
    txn_app_id: str | None = field(default=None, metadata={"options": ("txnAppId",)})
    txn_version: int | None = field(default=None, metadata={"options": ("txnVersion",)})
    #: Streaming sink: compact the partitions the stream touched after every N commits.
    auto_compact: int | None = None
    #: Set by Spark for a streaming write (``checkpointLocation`` / ``queryName``).
    checkpoint_location: str | None = field(
        default=None, metadata={"options": ("checkpointLocation",)}
    )
    query_name: str | None = field(default=None, metadata={"options": ("queryName",)})

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SourceOptions:
        """Validate Spark's options.

        Raises:
            InvalidArgument: a required option is missing or a value is malformed (the message
                names the option).
        """
        opts = {str(k).lower(): str(v) for k, v in options.items() if v is not None}
        check_known(opts, known_names(cls, SPARK_KEYS + STREAM_KEYS), prefixes=("store.",))
        if "paths" in opts:
            raise InvalidArgument(
                f"format parquetry reads one dataset: load() got several paths {opts['paths']}"
            )
        layout = (_one(opts, "layout") or "dataset").lower()
        if layout not in _LAYOUTS:
            raise InvalidArgument(f"option 'layout' must be one of {_LAYOUTS}, got {layout!r}")
        pushdown = (_one(opts, "pushdown") or "auto").lower()
        if pushdown not in _PUSHDOWN:
            raise InvalidArgument(f"option 'pushdown' must be one of {_PUSHDOWN}, got {pushdown!r}")
        store_options: dict[str, Any] = {k: opts[k] for k in STORE_OPTION_KEYS if k in opts}
        if "fsync" in store_options:
            store_options["fsync"] = store_options["fsync"].lower() in ("1", "true", "yes")
        store_options.update({k[6:]: v for k, v in opts.items() if k.startswith("store.")})
        dataset = _one(opts, "dataset")
        key = _one(opts, "key") or None
        store_url = _one(opts, "store_url")
        if opts.get("path"):
            if layout == "snapshot":
                store_url, key = split_path(opts["path"], key, store_url, "key")
            else:
                store_url, dataset = split_path(opts["path"], dataset, store_url, "dataset")
        if not store_url:
            raise InvalidArgument(
                "option 'store' (a store URL such as file:///lake) or a path "
                "'<store URL>/<dataset>' (load(path), save(path)) is required"
            )
        if layout == "dataset" and not dataset:
            raise InvalidArgument("option 'dataset' (the dataset UUID) is required")
        if layout == "snapshot" and not key:
            raise InvalidArgument("option 'key' (the snapshot key) is required for layout=snapshot")
        if layout == "snapshot" and _one(opts, "predicates"):
            raise InvalidArgument("option 'predicates' needs layout=dataset (snapshots have none)")
        version = _version(opts)
        raw_timestamp = _one(opts, "timestamp_as_of")
        timestamp = parse_timestamp(raw_timestamp) if raw_timestamp else None
        if timestamp is not None and version is not None:
            raise InvalidArgument(
                "options 'versionAsOf'/'version' and 'timestampAsOf' exclude each other: "
                "give one of them"
            )
        if layout == "snapshot" and (timestamp is not None or version is not None):
            raise InvalidArgument(
                "options 'version'/'versionAsOf'/'timestampAsOf' need layout=dataset "
                "(a snapshot keeps no versions)"
            )
        task_bytes = _int(opts, "task_bytes", 128 * 1024 * 1024)
        replace_where = _one(opts, "replace_where") or None
        if replace_where is not None:
            from parquetry.spark.condition import parse_condition

            parse_condition(replace_where)  # refuse a malformed condition before any task
        overwrite_mode = _one(opts, "partition_overwrite_mode") or None
        if overwrite_mode is not None and overwrite_mode.lower() not in _OVERWRITE_MODES:
            raise InvalidArgument(
                f"option 'partitionOverwriteMode' must be one of {_OVERWRITE_MODES}, "
                f"got {overwrite_mode!r}"
            )
        save_mode = (_one(opts, "save_mode") or "").lower() or None
        if save_mode is not None and save_mode not in _SAVE_MODES:
            raise InvalidArgument(
                f"option 'save_mode' must be one of {_SAVE_MODES}, got {save_mode!r}"
            )
        if replace_where is not None and overwrite_mode and overwrite_mode.lower() == "dynamic":
            raise InvalidArgument(
                "options 'replaceWhere' and partitionOverwriteMode=dynamic exclude each other"
            )
        rows_per_file = _int(opts, "rows_per_file", 4_000_000)
        txn_app_id = _one(opts, "txn_app_id") or None
        txn_version = _int(opts, "txn_version", None)
        if (txn_app_id is None) != (txn_version is None) or (txn_version or 0) < 0:
            raise InvalidArgument(
                "options 'txnAppId' and 'txnVersion' (an integer >= 0) go together, got "
                f"txnAppId={txn_app_id!r}, txnVersion={txn_version!r}"
            )
        auto_compact = _int(opts, "auto_compact", None)
        if auto_compact is not None and auto_compact < 1:
            raise InvalidArgument(f"option 'autoCompact' must be 1 or more, got {auto_compact}")
        return cls(
            store_url=store_url,
            store_options=store_options,
            layout="snapshot" if layout == "snapshot" else "dataset",
            dataset=dataset,
            key=key,
            partition_on=_names(_one(opts, "partition_on")),
            secondary_indices=_names(_one(opts, "secondary_indices")),
            version=version,
            timestamp_as_of=timestamp,
            predicates=_predicates(_one(opts, "predicates")),
            run_id=_one(opts, "run_id") or None,
            pushdown="true" if pushdown == "true" else "false" if pushdown == "false" else "auto",
            task_bytes=task_bytes or 128 * 1024 * 1024,
            max_tasks=_int(opts, "max_tasks", None),
            rows_per_file=rows_per_file or 4_000_000,
            compression=_one(opts, "compression") or "zstd",
            trace_reads=_one(opts, "trace_reads") or None,
            merge_schema=_bool(opts, "merge_schema"),
            overwrite_schema=_bool(opts, "overwrite_schema"),
            replace_where=replace_where,
            partition_overwrite_mode="dynamic"
            if overwrite_mode and overwrite_mode.lower() == "dynamic"
            else "static"
            if overwrite_mode
            else None,
            save_mode=None if save_mode is None else "ignore" if save_mode == "ignore" else "error",
            columns=_names(_one(opts, "columns")) or None,
            parameters=_parameters(_one(opts, "parameters")),
            txn_app_id=txn_app_id,
            txn_version=txn_version,
            auto_compact=auto_compact,
            checkpoint_location=_one(opts, "checkpoint_location") or None,
            query_name=_one(opts, "query_name") or None,
        )

    @property
    def txn(self) -> tuple[str, int] | None:
        """(txnAppId, txnVersion) when given."""
        if self.txn_app_id is None or self.txn_version is None:
            return None
        return self.txn_app_id, self.txn_version

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
            "timestampAsOf": None
            if self.timestamp_as_of is None
            else self.timestamp_as_of.isoformat(),
            "predicates": None if self.predicates is None else _predicates_json(self.predicates),
            "run_id": self.run_id,
            "max_tasks": None if self.max_tasks is None else str(self.max_tasks),
            "trace_reads": self.trace_reads,
            "replaceWhere": self.replace_where,
            "partitionOverwriteMode": self.partition_overwrite_mode,
            "save_mode": self.save_mode,
            "columns": None if self.columns is None else ",".join(self.columns),
            "parameters": json.dumps(dict(self.parameters)) if self.parameters else None,
            "txnAppId": self.txn_app_id,
            "txnVersion": None if self.txn_version is None else str(self.txn_version),
            "autoCompact": None if self.auto_compact is None else str(self.auto_compact),
            "checkpointLocation": self.checkpoint_location,
            "queryName": self.query_name,
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
        if self.merge_schema:
            out["mergeSchema"] = "true"
        if self.overwrite_schema:
            out["overwriteSchema"] = "true"
        return out


def _one(opts: Mapping[str, str], name: str) -> str | None:
    """The value of the field ``name``'s option, given under any of its keys (at most one
    value: ``dataset`` and ``uuid`` naming two datasets is an error)."""
    f = next(f for f in fields(SourceOptions) if f.name == name)
    given = {k: opts[k] for k in (n.lower() for n in field_option_names(f)) if opts.get(k)}
    if len(set(given.values())) > 1:
        raise InvalidArgument(f"options {sorted(given)} disagree: {given}")
    return next(iter(given.values()), None)


def _version(opts: Mapping[str, str]) -> int | None:
    raw = _one(opts, "version")
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise InvalidArgument(f"option 'version' must be an integer, got {raw!r}") from None
    if value < 0:
        raise InvalidArgument(f"option 'version' must be 0 or more, got {value}")
    return value


def _predicates_json(predicates: Predicates) -> str:
    from parquetry.dataset.predicates import dnf_to_json

    return json.dumps(dnf_to_json(predicates))
