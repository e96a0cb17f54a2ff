"""The corruption fuzzer's cases: datasets, object kinds, mutations and operations.

Used by ``test_corruption.py`` through a worker subprocess (``python -m
tests.adversarial.corruption_cases KIND [N_RANDOM]``): a corrupted footer can make pyarrow
abort the process, and that must fail one test, not kill the test run. The worker prints one
JSON line per operation: ``{"case", "op", "outcome", "detail"}`` where outcome is ``ok``,
``error`` (a ParquetryError subclass, or CLI exit 1 with one line on stderr) or ``bad``
(anything else: a raw exception, exit 70, a traceback).
"""

from __future__ import annotations

import functools
import io
import json
import math
import os
import random
import shutil
import sys
import tempfile
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgpack
import pyarrow as pa
import zstandard

UUID = "fz"
KINDS = (
    "pointer_json",
    "pointer_msgpack",
    "version",
    "old_version",
    "index",
    "common_metadata",
    "data",
)
#: Deterministic mutations every kind gets (JSON-only ones fall back to garbage bytes).
FIXED_MUTATIONS = (
    "empty",
    "truncate_1",
    "truncate_half",
    "truncate_tail",
    "bitflip",
    "deep_nesting",
    "deep_field",
    "wrong_types",
    "huge_numbers",
    "non_finite",
    "stats_garbage",
    "json_garbage",
)
DEEP = 100_000


# --- the dataset -------------------------------------------------------------------------


def _table(n: int, offset: int) -> pa.Table:
    ids = list(range(offset, offset + n))
    return pa.table(
        {
            "p": pa.array([i % 2 for i in ids], pa.int64()),
            "k": pa.array([f"k{i % 5}" for i in ids]),
            "v": pa.array([float(i) for i in ids]),
        }
    )


def build(root: Path, kind: str) -> Any:
    """A dataset with versions 0..2, a partition key and an index; returns the store."""
    from parquetry.dataset import Dataset
    from parquetry.store import LocalStore

    store = LocalStore(root)
    fmt = "msgpack.zstd" if kind == "pointer_msgpack" else "json"
    ds = Dataset.create(
        store,
        UUID,
        _table(20, 0),
        partition_on=["p"],
        secondary_indices=["k"],
        metadata={"owner": "fuzz"},
        metadata_format=fmt,
    )
    ds = ds.append(_table(10, 20))
    ds.append(_table(10, 30))
    return store


def target_key(store: Any, kind: str) -> str:
    from parquetry.dataset import Dataset
    from parquetry.dataset.naming import common_metadata_key, metadata_key, version_key

    ds = Dataset.open(store, UUID)
    doc = ds.document
    if kind == "pointer_json":
        return metadata_key(UUID, "json")
    if kind == "pointer_msgpack":
        return metadata_key(UUID, "msgpack.zstd")
    if kind == "version":
        return version_key(UUID, ds.version)
    if kind == "old_version":
        return version_key(UUID, 1)
    if kind == "index":
        # Format 2 keeps a small index inline in the head; the index *file* is the one the
        # kartothek pointer names (what kartothek, reconciles and format-1 readers read).
        import json

        return str(json.loads(store.get(metadata_key(UUID, "json")))["indices"]["k"])
    if kind == "common_metadata":
        return common_metadata_key(UUID)
    if kind == "data":
        label = sorted(doc.partitions)[0]
        return str(doc.partitions[label][doc.tables[0]])
    raise ValueError(kind)


# --- mutations ---------------------------------------------------------------------------


def _decode(kind: str, data: bytes) -> Any | None:
    """The document as Python values, for kinds that are JSON/msgpack documents."""
    if kind == "pointer_msgpack":
        return msgpack.unpackb(zstandard.ZstdDecompressor().decompress(data), raw=False)
    if kind in ("pointer_json", "version", "old_version"):
        return json.loads(data)
    return None


def _encode(kind: str, doc: Any) -> bytes:
    if kind == "pointer_msgpack":
        packed = msgpack.packb(doc, use_bin_type=True)
        return bytes(zstandard.ZstdCompressor().compress(packed))
    return json.dumps(doc).encode()


def _paths(doc: Any, prefix: tuple[Any, ...] = (), depth: int = 0) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if depth > 6:
        return
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _paths(v, (*prefix, k), depth + 1)
    elif isinstance(doc, list):
        for i, v in enumerate(doc[:3]):
            yield from _paths(v, (*prefix, i), depth + 1)


def _set(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    parent = doc
    for p in path[:-1]:
        if not isinstance(parent, dict | list):
            return doc  # an earlier change replaced an ancestor: nothing left to change here
        parent = parent[p]
    if isinstance(parent, dict | list):
        parent[path[-1]] = value
    return doc


def _get(doc: Any, path: tuple[Any, ...]) -> Any:
    for p in path:
        doc = doc[p]
    return doc


WRONG = (None, "x", -1, 3.5, True, [], {}, [1, "a"], {"a": None}, "", 2**63)


def _wrong_types(doc: Any, rng: random.Random, count: int) -> Any:
    paths = [p for p in _paths(doc) if p]
    for path in rng.sample(paths, min(count, len(paths))):
        doc = _set(doc, path, rng.choice(WRONG))
    return doc


def _map_numbers(doc: Any, number: Callable[[Any], Any]) -> Any:
    if isinstance(doc, bool):
        return doc
    if isinstance(doc, int | float):
        return number(doc)
    if isinstance(doc, dict):
        return {k: _map_numbers(v, number) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_map_numbers(v, number) for v in doc]
    if isinstance(doc, str) and doc.startswith("["):
        # Per-file statistics are JSON text inside the document.
        try:
            inner = json.loads(doc)
        except ValueError:
            return doc
        return json.dumps(_map_numbers(inner, number))
    return doc


def _deep(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


def mutate(kind: str, name: str, data: bytes, rng: random.Random) -> bytes:
    """``data`` (the object's bytes) changed by mutation ``name``."""
    if name == "empty":
        return b""
    if name == "truncate_1":
        return data[:1]
    if name == "truncate_half":
        return data[: len(data) // 2]
    if name == "truncate_tail":
        return data[:-3]
    if name.startswith("bitflip"):
        out = bytearray(data)
        for _ in range(rng.randint(1, 8)):
            i = rng.randrange(len(out) * 8)
            out[i // 8] ^= 1 << (i % 8)
        return bytes(out)
    if name == "deep_nesting":
        if kind == "pointer_msgpack":  # fixarray(1) inside fixarray(1) ...
            return bytes(zstandard.ZstdCompressor().compress(b"\x91" * DEEP + b"\x01"))
        return b"[" * DEEP + b"]" * DEEP
    if name == "json_garbage":
        return b'{"dataset_metadata_version": 4, "partitions": [1, 2]}'
    doc = _decode(kind, data)
    if doc is None:  # a Parquet object: structured mutations become garbage of that kind
        return json.dumps({"x": _deep(50)}).encode() if name == "deep_field" else data[::-1]
    if name == "deep_field":
        # msgpack's packer stops at 512 levels; JSON goes deeper than the decoder's limit.
        doc["metadata"] = {"deep": _deep(500 if kind == "pointer_msgpack" else 5_000)}
        if kind != "pointer_msgpack":
            sys.setrecursionlimit(max(sys.getrecursionlimit(), 20_000))
        return _encode(kind, doc)
    if name == "wrong_types" or name.startswith("random_types"):
        return _encode(kind, _wrong_types(doc, rng, rng.randint(1, 4)))
    if name == "huge_numbers":
        if kind == "pointer_msgpack":
            return _encode(kind, _map_numbers(doc, lambda n: 1.0e308 * 10 if n else -(2**63)))
        text = json.dumps(_map_numbers(doc, lambda n: 10**400 * (1 if n >= 0 else -1)))
        return text.encode()
    if name == "non_finite":
        return _encode(
            kind, _map_numbers(doc, lambda n: rng.choice([math.inf, -math.inf, math.nan]))
        )
    if name == "stats_garbage":
        ext = doc.get("parquetry") if isinstance(doc, dict) else None
        if isinstance(ext, dict) and isinstance(ext.get("files"), dict):
            choices = [
                "[",
                "[1]",
                '[1, 2, {"v": [1]}]',
                '[1, 2, {"v": ["a", 1, "x"]}]',
                "7",
                '[-5, 1e999, {"k": [1, 2, 3]}]',
                '[1, 2, {"p": [null, null, -1]}]',
                '[1, 2, {"v": [1.0, "NaN", 0]}]',
                "[1, 2, []]",
            ]
            for label in ext["files"]:
                ext["files"][label] = rng.choice(choices)
        return _encode(kind, doc)
    raise ValueError(name)


def mutation_names(n_random: int) -> list[str]:
    return [
        *FIXED_MUTATIONS,
        *(f"random_types_{i}" for i in range(n_random)),
        *(f"bitflip_{i}" for i in range(n_random)),
    ]


# --- operations --------------------------------------------------------------------------


def _open_version(n: int, store: Any) -> None:
    from parquetry.dataset import Dataset

    Dataset.open(store, UUID, version=n).read()


def api_operations() -> list[tuple[str, Callable[[Any], Any]]]:
    from parquetry.dataset import Dataset

    def scan(store: Any) -> None:
        for _ in Dataset.open(store, UUID).scan():
            pass

    return [
        ("open", lambda s: Dataset.open(s, UUID)),
        *((f"open_v{n}", functools.partial(_open_version, n)) for n in range(3)),
        ("read", lambda s: Dataset.open(s, UUID).read()),
        ("scan", scan),
        ("plan", lambda s: Dataset.open(s, UUID).plan([[("k", "==", "k1"), ("v", ">", 3.0)]])),
        ("read_where", lambda s: Dataset.open(s, UUID).read(predicates=[[("k", "==", "k2")]])),
        ("to_pyarrow_dataset", lambda s: Dataset.open(s, UUID).to_pyarrow_dataset()),
        ("index_pairs", lambda s: Dataset.open(s, UUID).index_pairs("k")),
        ("versions", lambda s: Dataset.open(s, UUID).versions()),
        ("build_index", lambda s: Dataset.open(s, UUID).build_index("v")),
        ("append", lambda s: Dataset.open(s, UUID).append(_table(4, 100))),
        ("update", lambda s: Dataset.open(s, UUID).update(_table(2, 200), delete_scope=[{"p": 0}])),
        ("repair", lambda s: Dataset.repair(s, UUID)),
        ("garbage_collect", lambda s: Dataset.open(s, UUID).garbage_collect(retention=0)),
        ("read_after", lambda s: Dataset.open(s, UUID).read()),
    ]


CLI_COMMANDS = (
    ("cli_ls", ["ls", "{url}"]),
    ("cli_show", ["show", "{url}", UUID]),
    ("cli_history", ["history", "{url}", UUID]),
    ("cli_scan", ["scan", "{url}", UUID, "--where", "k == 'k1'", "--format", "json"]),
    ("cli_validate", ["validate", "{url}", UUID]),
    ("cli_report", ["report", "{url}", UUID, "--json"]),
    ("cli_gc", ["gc", "{url}", UUID, "--dry-run"]),
    ("cli_repair", ["repair", "{url}", UUID]),
)


def run_api(op: Callable[[Any], Any], store: Any) -> tuple[str, str]:
    from parquetry.errors import ParquetryError

    try:
        op(store)
    except ParquetryError as exc:
        return "error", f"{type(exc).__name__}: {str(exc)[:300]}"
    except BaseException as exc:
        tb = traceback.format_exception(exc)
        return "bad", f"{type(exc).__name__}: {str(exc)[:300]}\n{''.join(tb[-6:])[-2000:]}"
    return "ok", ""


def run_cli(argv: list[str]) -> tuple[str, str]:
    from typer.testing import CliRunner

    from parquetry.cli.app import app

    result = CliRunner().invoke(app, argv)
    err = result.stderr if hasattr(result, "stderr") else ""
    # A "warning:" line (a corrupt pointer worked around) may come before the one error line.
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith("warning: ")]
    detail = f"exit {result.exit_code}: {err.strip()[:500]}"
    if "Traceback" in err or "Traceback" in result.stdout:
        return "bad", detail
    if result.exit_code == 0:
        return "ok", ""
    if result.exit_code == 1 and len(lines) == 1:
        return "error", detail
    return "bad", detail


# --- the worker --------------------------------------------------------------------------


def _emit(**fields: Any) -> None:
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()


def main(argv: list[str]) -> None:
    kind = argv[0]
    names = argv[1:] or mutation_names(0)
    with tempfile.TemporaryDirectory() as tmp:
        template = Path(tmp) / "template"
        key = target_key(build(template, kind), kind)
        for name in names:
            _emit(case=name, op="-", outcome="begin", detail="")
            run_case(kind, name, template, key)


def run_case(kind: str, mutation: str, template: Path, key: str) -> None:
    """Mutate a fresh copy of the dataset; run the CLI on one copy and the API on another."""
    from parquetry.store import LocalStore

    for phase in ("cli", "api"):
        rng = random.Random(f"{kind}/{mutation}")
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp) / "store"
            shutil.copytree(template, root)
            path = root / key
            path.write_bytes(mutate(kind, mutation, path.read_bytes(), rng))
            if phase == "cli":
                for name, args in CLI_COMMANDS:
                    _emit(case=mutation, op=name, outcome="started", detail="")
                    outcome, detail = run_cli([a.replace("{url}", str(root)) for a in args])
                    _emit(case=mutation, op=name, outcome=outcome, detail=detail)
            else:
                store = LocalStore(root)
                for name, op in api_operations():
                    _emit(case=mutation, op=name, outcome="started", detail="")
                    outcome, detail = run_api(op, store)
                    _emit(case=mutation, op=name, outcome=outcome, detail=detail)


if __name__ == "__main__":
    sys.stderr = io.TextIOWrapper(sys.stderr.buffer, errors="replace")
    main(sys.argv[1:])
    # Skip finalization: an Arrow worker freeing a Python buffer then aborts (apache/arrow#34314).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
