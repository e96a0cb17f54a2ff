"""What a Spark write records in the dataset's history: its operation and parameters.

Parameters follow Delta's ``operationParameters``: ``mode`` (``Append``/``Overwrite``),
``partitionBy`` (a JSON list), and every write option that differs from its default, named
in Delta's camelCase after its :class:`SourceOptions` field (``rowsPerFile``, and
``replaceWhere``, ``mergeSchema``, ``partitionOverwriteMode``... as the data source learns
them), and the user's own entries (option ``parameters``, a JSON object). Store URLs and
store options never appear (they may hold credentials); nor do
read-only options.

The Spark application id is recorded when the process running ``commit()`` can know it. That
process is a Python worker the driver JVM starts: it has no SparkContext (the user's
SparkSession lives in another process) and Spark passes it no application id, so it comes
from the environment of cluster managers that set one: ``SPARK_APPLICATION_ID`` (Kubernetes
driver and executor pods) or YARN's ``CONTAINER_ID`` (the id is derived from it). In
``local`` and standalone mode there is none; the table handle's own commits
(:class:`parquetry.spark.ParquetryTable`) record it from the user's session.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import MISSING, fields
from typing import Any

from parquetry.spark.options import SourceOptions

__all__ = ["spark_app_id_from_env", "write_operation", "write_parameters"]

# Where the data lives or how it is read: not a parameter of the write (and store settings
# may carry secrets).
_NOT_RECORDED = frozenset(
    {
        "store_url",
        "store_options",
        "layout",
        "dataset",
        "key",
        "version",
        "predicates",
        "pushdown",
        "task_bytes",
        "max_tasks",
        "trace_reads",
        "parameters",  # the user's own entries, recorded under their own names
    }
)
_RENAMED = {"partition_on": "partitionBy", "secondary_indices": "secondaryIndices"}
_YARN_CONTAINER = re.compile(r"^container_(?:e\d+_)?(\d+)_(\d+)_\d+_\d+$")


def spark_app_id_from_env(env: Mapping[str, str] | None = None) -> str | None:
    """The Spark application id a cluster manager put in the environment, or None."""
    env = os.environ if env is None else env
    app = env.get("SPARK_APPLICATION_ID")
    if app:
        return app
    match = _YARN_CONTAINER.match(env.get("CONTAINER_ID", ""))
    if match:
        return f"application_{match.group(1)}_{match.group(2)}"
    return None


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, tuple):
        value = list(value)
    return json.dumps(value, sort_keys=True, default=str)


def write_operation(overwrite: bool) -> str:
    """The operation a Spark write commits as (``mode("overwrite")`` or an append)."""
    return "overwrite" if overwrite else "append"


def write_parameters(
    options: SourceOptions, overwrite: bool, *, app_id: str | None = None
) -> dict[str, str]:
    """The parameters a Spark write records (see the module docstring)."""
    # The user's entries first: a name of ours (mode, partitionBy...) wins over them.
    out = dict(options.parameters)
    out.update({"engine": "spark", "mode": "Overwrite" if overwrite else "Append"})
    out["partitionBy"] = _text(list(options.partition_on))
    for f in fields(options):
        if f.name in _NOT_RECORDED or f.name == "partition_on":
            continue
        value = getattr(options, f.name)
        default: Any = f.default
        if default is MISSING:
            factory: Any = f.default_factory
            default = factory() if factory is not MISSING else None
        if value is None or value == () or value == default:
            continue
        out[_RENAMED.get(f.name, _camel(f.name))] = _text(value)
    app_id = app_id or spark_app_id_from_env()
    if app_id:
        out["sparkAppId"] = app_id
    return out
