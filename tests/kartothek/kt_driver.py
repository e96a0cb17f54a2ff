"""Drive kartothek 5.3.0 for parquetry's compatibility tests (runs in .venv-kartothek, Python 3.8).

Protocol: a JSON request on stdin, a JSON response on stdout (stderr is free for warnings).

    {"store": "/abs/dir", "ops": [{"op": "write", ...}, {"op": "read", ...}, ...]}
    -> {"results": [<one result per op>]}   or   {"error": "...", "op_index": N, "traceback": "..."}

All ops of a request run in one process, because each process start costs seconds (imports).

Typed values (rows, predicate values, delete_scope values) are JSON scalars or tagged objects:
``{"$date": "2021-01-01"}``, ``{"$ts": "2021-01-01T12:00:00.123456"}`` (naive; with an offset for
tz-aware), ``{"$bytes": "<base64>"}``.
Frames are ``{"schema": [[name, type], ...], "rows": [[...]]}`` with types int64, int32,
float64, bool, string, bytes, date, timestamp (naive), timestamp_utc, category, and the
null-free int8, int16, uint16, uint64, float32; a column holding nulls is built as an object
column so pyarrow infers its type as kartothek's own users would get it.
An optional ``"index"`` list gives the frame a non-RangeIndex (stored as ``__index_level_0__``).

Ops:
- write: uuid, frames (list; each becomes one or more partitions), partition_on, secondary_indices,
  metadata, metadata_format ("json" | "msgpack" | "msgpack.zstd").
- update: uuid, frames, delete_scope (list of {col: value}), partition_on, secondary_indices,
  metadata.
- read: uuid, predicates, columns -> {"columns", "dtypes", "rows", "planned_partitions"}.
- gc: uuid.  build_index: uuid, columns.  delete: uuid.
- inspect: uuid -> metadata as kartothek loads it (partitions, partition_keys, indices as
  {column: {"dtype", "values": [[value, [labels]], ...]}}, schema, metadata, metadata_version).
- keys: prefix -> sorted keys of the store under the prefix.
"""

from __future__ import annotations

import base64
import datetime
import json
import math
import os
import sys
import traceback
import warnings
from typing import Any

warnings.simplefilter("ignore")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from kartothek.core.dataset import DatasetMetadata  # noqa: E402
from kartothek.core.factory import DatasetFactory  # noqa: E402
from kartothek.io.eager import (  # noqa: E402
    build_dataset_indices,
    delete_dataset,
    garbage_collect_dataset,
    read_table,
    store_dataframes_as_dataset,
    update_dataset_from_dataframes,
)
from kartothek.io_components.read import dispatch_metapartitions_from_factory  # noqa: E402
from storefact import get_store_from_url  # noqa: E402


def decode_value(value: Any) -> Any:
    """Tagged JSON -> Python/pandas scalar."""
    if isinstance(value, dict):
        if "$date" in value:
            return datetime.date.fromisoformat(value["$date"])
        if "$ts" in value:
            return pd.Timestamp(value["$ts"])
        if "$bytes" in value:
            return base64.b64decode(value["$bytes"])
        raise ValueError(f"unknown tagged value {value!r}")
    if isinstance(value, list):
        return [decode_value(v) for v in value]
    return value


def encode_value(value: Any) -> Any:
    """Python/numpy/pandas scalar -> tagged JSON (None for every kind of null)."""
    if value is None or value is pd.NaT:
        return None
    if isinstance(value, (float, np.floating)):
        return None if math.isnan(value) else float(value)
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray)):
        return {"$bytes": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, (pd.Timestamp, datetime.datetime, np.datetime64)):
        return {"$ts": pd.Timestamp(value).isoformat()}
    if isinstance(value, datetime.date):
        return {"$date": value.isoformat()}
    try:
        if pd.isna(value):
            return None
    except (TypeError, ValueError):
        pass
    raise TypeError(f"cannot encode {value!r} of type {type(value).__name__}")


_NUMPY_DTYPES = {"int64": "int64", "int32": "int32", "float64": "float64", "bool": "bool"}
# numpy-only types: no nulls allowed (pandas 1.3 has no null-capable plain numpy dtype for them)
_STRICT_DTYPES = {"int8": "int8", "int16": "int16", "uint16": "uint16", "uint64": "uint64",
                  "float32": "float32"}  # fmt: skip


def build_frame(spec: dict[str, Any]) -> pd.DataFrame:
    names = [name for name, _ in spec["schema"]]
    columns: dict[str, Any] = {}
    for position, (name, type_name) in enumerate(spec["schema"]):
        values = [decode_value(row[position]) for row in spec["rows"]]
        has_null = any(v is None for v in values)
        if type_name == "timestamp":
            columns[name] = pd.to_datetime(pd.Series(values, dtype="object"))
        elif type_name == "timestamp_utc":
            columns[name] = pd.to_datetime(pd.Series(values, dtype="object"), utc=True)
        elif type_name == "category":
            columns[name] = pd.Series(values, dtype="category")
        elif type_name in _STRICT_DTYPES:
            if has_null:
                raise ValueError(f"column {name!r} of type {type_name} cannot hold nulls here")
            columns[name] = pd.Series(values, dtype=_STRICT_DTYPES[type_name])
        elif type_name in _NUMPY_DTYPES and not has_null:
            columns[name] = pd.Series(values, dtype=_NUMPY_DTYPES[type_name])
        elif type_name in ("int64", "int32", "float64", "bool", "string", "bytes", "date"):
            columns[name] = pd.Series(values, dtype="object")
        else:
            raise ValueError(f"unknown column type {type_name!r} for {name!r}")
    df = pd.DataFrame(columns, columns=names)
    if spec.get("index") is not None:
        # a non-RangeIndex is stored by pyarrow as an extra __index_level_0__ column
        df.index = pd.Index([decode_value(v) for v in spec["index"]])
    return df


def decode_predicates(predicates: Any) -> Any:
    if predicates is None:
        return None
    return [[(col, op, decode_value(value)) for col, op, value in conj] for conj in predicates]


def decode_scope(scope: Any) -> Any:
    if scope is None:
        return None
    return [{col: decode_value(value) for col, value in item.items()} for item in scope]


def frames_of(op: dict[str, Any]) -> list[pd.DataFrame]:
    return [build_frame(spec) for spec in op["frames"]]


def dataset_summary(dm: DatasetMetadata) -> dict[str, Any]:
    return {"partitions": sorted(dm.partitions), "partition_keys": list(dm.partition_keys)}


def op_write(store: Any, op: dict[str, Any]) -> Any:
    dm = store_dataframes_as_dataset(
        store=store,
        dataset_uuid=op["uuid"],
        dfs=frames_of(op),
        metadata=op.get("metadata"),
        partition_on=op.get("partition_on") or None,
        secondary_indices=op.get("secondary_indices") or None,
        # parquetry spells it "msgpack.zstd", kartothek "msgpack"
        metadata_storage_format=op.get("metadata_format", "json").replace(".zstd", ""),
    )
    return dataset_summary(dm)


def op_update(store: Any, op: dict[str, Any]) -> Any:
    dm = update_dataset_from_dataframes(
        frames_of(op),
        store=store,
        dataset_uuid=op["uuid"],
        delete_scope=decode_scope(op.get("delete_scope")),
        metadata=op.get("metadata"),
        partition_on=op.get("partition_on") or None,
        secondary_indices=op.get("secondary_indices") or None,
    )
    return dataset_summary(dm)


def op_read(store: Any, op: dict[str, Any]) -> Any:
    predicates = decode_predicates(op.get("predicates"))
    df = read_table(
        dataset_uuid=op["uuid"],
        store=store,
        columns=op.get("columns"),
        predicates=predicates,
        dates_as_object=True,
    )
    factory = DatasetFactory(op["uuid"], lambda: store)
    planned = sum(1 for _ in dispatch_metapartitions_from_factory(factory, predicates=predicates))
    return {
        "columns": [str(c) for c in df.columns],
        "dtypes": {str(c): str(t) for c, t in df.dtypes.items()},
        "rows": [[encode_value(v) for v in row] for row in df.itertuples(index=False, name=None)],
        "planned_partitions": planned,
    }


def op_inspect(store: Any, op: dict[str, Any]) -> Any:
    dm = DatasetMetadata.load_from_store(op["uuid"], store, load_all_indices=True)
    indices = {}
    for column, index in dm.indices.items():
        if column in dm.partition_keys:
            continue
        values = sorted(
            ([encode_value(v), sorted(labels)] for v, labels in index.index_dct.items()),
            key=lambda item: json.dumps(item[0], sort_keys=True),
        )
        indices[column] = {"dtype": str(index.dtype), "values": values}
    schema = dm.table_meta["table"]
    return {
        "metadata_version": dm.metadata_version,
        "partitions": {label: dict(p.files) for label, p in dm.partitions.items()},
        "partition_keys": list(dm.partition_keys),
        "indices": indices,
        "schema": [[f.name, str(f.type)] for f in schema],
        "schema_has_pandas": schema.pandas_metadata is not None,
        "metadata": dm.metadata,
    }


def op_gc(store: Any, op: dict[str, Any]) -> Any:
    garbage_collect_dataset(dataset_uuid=op["uuid"], store=store)
    return None


def op_build_index(store: Any, op: dict[str, Any]) -> Any:
    build_dataset_indices(store=store, dataset_uuid=op["uuid"], columns=op["columns"])
    return None


def op_delete(store: Any, op: dict[str, Any]) -> Any:
    delete_dataset(dataset_uuid=op["uuid"], store=store)
    return None


def op_keys(store: Any, op: dict[str, Any]) -> Any:
    return sorted(store.iter_keys(prefix=op.get("prefix", "")))


OPS = {
    "write": op_write,
    "update": op_update,
    "read": op_read,
    "inspect": op_inspect,
    "gc": op_gc,
    "build_index": op_build_index,
    "delete": op_delete,
    "keys": op_keys,
}


def main() -> int:
    request = json.load(sys.stdin)
    store = get_store_from_url("hfs://" + request["store"])
    results = []
    for position, op in enumerate(request["ops"]):
        try:
            results.append(OPS[op["op"]](store, op))
        except Exception as exc:  # reported to the test, which fails with the message
            json.dump(
                {
                    "error": f"{type(exc).__name__}: {exc}",
                    "op_index": position,
                    "op": op.get("op"),
                    "traceback": traceback.format_exc(),
                    "results": results,
                },
                sys.stdout,
            )
            return 0
    json.dump({"results": results}, sys.stdout)
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # No interpreter finalization: pyarrow may abort a process there, after all its work
    # (apache/arrow#34314), which the test would read as kartothek failing.
    os._exit(code)
