"""kartothek 5.3.0 writes (JSON and msgpack metadata, indices, updates) -> parquetry reads and
appends -> kartothek reads again."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from kt_checks import check_kartothek_reads, check_parquetry_reads, read_ops
from kt_harness import Kartothek
from kt_sample_data import (
    COLUMNS,
    INDEXED,
    PARTITION_ON,
    SCHEMA,
    SPECIAL,
    queries,
    sample_table,
)
from kt_support import (
    canonical_records,
    check_index,
    frame,
    oracle,
    rows_of_kartothek,
    to_driver_scope,
)

from parquetry import Dataset
from parquetry.store import LocalStore

pytestmark = pytest.mark.kartothek

COUNTRIES = ("DE", "FR", SPECIAL)


def test_kartothek_driver_round_trip(kartothek: Kartothek, tmp_path: Path) -> None:
    """The harness itself: kartothek writes, updates, GCs and reads back what the oracle says."""
    first = sample_table(48, seed=1, countries=COUNTRIES)
    added = sample_table(12, seed=2, countries=("DE", "NL"), first_id=1000)
    results = kartothek.run(
        tmp_path,
        [
            {
                "op": "write",
                "uuid": "kt",
                "frames": [frame(first)],
                "partition_on": PARTITION_ON,
                "secondary_indices": INDEXED,
                "metadata": {"owner": "tests"},
            },
            {"op": "inspect", "uuid": "kt"},
            *read_ops("kt", SPECIAL),
            {
                "op": "update",
                "uuid": "kt",
                "frames": [frame(added)],
                "delete_scope": to_driver_scope([{"country": "FR"}]),
                "partition_on": PARTITION_ON,
            },
            {"op": "gc", "uuid": "kt"},
            {"op": "inspect", "uuid": "kt"},
            {"op": "read", "uuid": "kt"},
            {"op": "keys", "prefix": "kt"},
        ],
    )
    inspected = results[1]
    assert inspected["partition_keys"] == PARTITION_ON
    check_index(inspected, canonical_records(first), SCHEMA, INDEXED)
    assert len(inspected["partitions"]) == 6
    records = canonical_records(first)
    check_kartothek_reads(
        results[2 : 2 + len(queries(SPECIAL))], records, SPECIAL, inspected["partitions"]
    )

    after = results[-3]
    assert len(after["partitions"]) == 4 + 4
    expected = oracle(
        [r for r in records if r["country"] != "FR"] + canonical_records(added),
        None,
        COLUMNS,
        SCHEMA,
    )
    assert rows_of_kartothek(results[-2], COLUMNS, SCHEMA) == expected
    keys = results[-1]
    data_keys = [k for k in keys if k.endswith(".parquet") and "/indices/" not in k]
    assert sorted(k.split("/", 2)[2][: -len(".parquet")] for k in data_keys) == sorted(
        after["partitions"]
    ), "kartothek GC left unreferenced data files"


def test_parquetry_reads_and_appends_kartothek_datasets(
    kartothek: Kartothek, tmp_path: Path
) -> None:
    root = tmp_path / "store"
    base = sample_table(48, seed=31, countries=COUNTRIES)
    second = sample_table(12, seed=32, countries=("DE", "NL"), first_id=100)
    flat_frames = [
        sample_table(10, seed=33 + i, countries=COUNTRIES, first_id=200 + 10 * i) for i in range(3)
    ]
    write = {"op": "write", "partition_on": PARTITION_ON, "secondary_indices": INDEXED}
    kartothek.run(
        root,
        [
            {**write, "uuid": "kt_json", "frames": [frame(base)], "metadata": {"k": "v"}},
            {**write, "uuid": "kt_msgpack", "frames": [frame(base)], "metadata_format": "msgpack"},
            {
                "op": "write",
                "uuid": "kt_flat",
                "frames": [
                    # a non-RangeIndex: the payload carries __index_level_0__
                    {**frame(t), "index": [f"row{i}" for i in range(t.num_rows)]}
                    for t in flat_frames
                ],
                "secondary_indices": ["country"],
            },
            {**write, "uuid": "kt_updated", "frames": [frame(base)]},
            {
                "op": "update",
                "uuid": "kt_updated",
                "frames": [frame(second)],
                "delete_scope": to_driver_scope(
                    [{"country": "FR"}, {"country": SPECIAL, "year": 2021}]
                ),
                "partition_on": PARTITION_ON,
            },
            {"op": "gc", "uuid": "kt_updated"},
            {
                "op": "write",
                "uuid": "kt_late",
                "frames": [frame(base)],
                "partition_on": PARTITION_ON,
            },
            {"op": "build_index", "uuid": "kt_late", "columns": INDEXED},
        ],
    )
    store = LocalStore(root)
    records = canonical_records(base)
    updated = [
        r
        for r in records
        if r["country"] != "FR" and not (r["country"] == SPECIAL and r["year"] == 2021)
    ] + canonical_records(second)
    flat = [r for t in flat_frames for r in canonical_records(t)]
    expected = {
        "kt_json": records,
        "kt_msgpack": records,
        "kt_flat": flat,
        "kt_updated": updated,
        "kt_late": records,
    }
    for uuid, rows in expected.items():
        ds = Dataset.open(store, uuid)
        assert list(ds.partition_keys) == ([] if uuid == "kt_flat" else PARTITION_ON), uuid
        check_parquetry_reads(ds, rows, SPECIAL, uuid)
    assert Dataset.open(store, "kt_json").metadata["k"] == "v"

    # parquetry appends; kartothek reads everything with its indices, then updates again
    more = sample_table(16, seed=40, countries=("DE", SPECIAL), years=(2021, 2022), first_id=5000)
    for uuid in ("kt_json", "kt_msgpack", "kt_flat", "kt_late"):
        Dataset.open(store, uuid).append(more)
        expected[uuid] = expected[uuid] + canonical_records(more)
    last = sample_table(8, seed=41, countries=("NL",), first_id=6000)
    ops: list[dict[str, Any]] = []
    for uuid in ("kt_json", "kt_msgpack", "kt_flat", "kt_late"):
        ops += [
            {"op": "inspect", "uuid": uuid},
            {"op": "read", "uuid": uuid},
            *read_ops(uuid, SPECIAL),
        ]
    ops += [
        {
            "op": "update",
            "uuid": "kt_msgpack",
            "frames": [frame(last)],
            "delete_scope": to_driver_scope([{"country": "DE", "year": 2021}]),
            "partition_on": PARTITION_ON,
        },
        {"op": "gc", "uuid": "kt_msgpack"},
        {"op": "read", "uuid": "kt_msgpack"},
    ]
    results = kartothek.run(root, ops)
    step = 2 + len(queries(SPECIAL))
    for position, uuid in enumerate(("kt_json", "kt_msgpack", "kt_flat", "kt_late")):
        inspected, everything, *answers = results[position * step : (position + 1) * step]
        rows = expected[uuid]
        assert rows_of_kartothek(everything, COLUMNS, SCHEMA) == oracle(
            rows, None, COLUMNS, SCHEMA
        ), uuid
        partitions = None if uuid == "kt_flat" else inspected["partitions"]
        check_kartothek_reads(answers, rows, SPECIAL, partitions)
    final = [
        r for r in expected["kt_msgpack"] if not (r["country"] == "DE" and r["year"] == 2021)
    ] + canonical_records(last)
    assert rows_of_kartothek(results[-1], COLUMNS, SCHEMA) == oracle(final, None, COLUMNS, SCHEMA)
    # kartothek left a JSON pointer beside the msgpack one; parquetry must read the newer state
    check_parquetry_reads(
        Dataset.open(store, "kt_msgpack"), final, SPECIAL, "kt_msgpack after kartothek"
    )


def make_legacy(root: Path, uuid: str) -> None:
    """Rewrite a kartothek 5.3.0 dataset into the older forms kartothek still reads: implicit
    partitions (no ``partitions``/``partition_keys``: readers list the store), an embedded
    ``name`` index (``{value: [labels]}`` inside the metadata) and the ``customer`` index under
    its legacy key ``<uuid>.<column>.by-dataset-index.parquet`` (kartothek 5.3.0 cannot list
    implicit partitions when index files live under ``<uuid>/indices/``)."""
    pointer = root / f"{uuid}.by-dataset-metadata.json"
    doc = json.loads(pointer.read_bytes())
    index_file = root / doc["indices"]["name"]
    index = pq.read_table(index_file).to_pylist()
    doc["indices"]["name"] = {row["name"]: sorted(row["partition"]) for row in index}
    index_file.unlink()
    legacy_key = f"{uuid}.customer.by-dataset-index.parquet"
    (root / doc["indices"]["customer"]).rename(root / legacy_key)
    doc["indices"]["customer"] = legacy_key
    del doc["partitions"], doc["partition_keys"]
    pointer.write_bytes(json.dumps(doc).encode())


def test_legacy_kartothek_metadata_forms(kartothek: Kartothek, tmp_path: Path) -> None:
    root = tmp_path / "store"
    base = sample_table(40, seed=51, countries=COUNTRIES)
    kartothek.one(
        root,
        {
            "op": "write",
            "uuid": "legacy",
            "frames": [frame(base)],
            "partition_on": PARTITION_ON,
            "secondary_indices": INDEXED,
        },
    )
    make_legacy(root, "legacy")
    records = canonical_records(base)
    # the rewritten forms are valid: kartothek itself reads them, pruning by the embedded index
    results = kartothek.run(
        root, [{"op": "inspect", "uuid": "legacy"}, *read_ops("legacy", SPECIAL)]
    )
    assert "partitions" not in json.loads((root / "legacy.by-dataset-metadata.json").read_bytes())
    check_index(results[0], records, SCHEMA, INDEXED)
    check_kartothek_reads(results[1:], records, SPECIAL, results[0]["partitions"])
    store = LocalStore(root)
    ds = Dataset.open(store, "legacy")
    assert list(ds.partition_keys) == PARTITION_ON
    check_parquetry_reads(ds, records, SPECIAL, "legacy")

    more = sample_table(12, seed=52, countries=("DE", "NL"), first_id=3000)
    Dataset.open(store, "legacy").append(more)
    final = records + canonical_records(more)
    check_parquetry_reads(Dataset.open(store, "legacy"), final, SPECIAL, "legacy after append")
    results = kartothek.run(
        root,
        [
            {"op": "inspect", "uuid": "legacy"},
            {"op": "read", "uuid": "legacy"},
            *read_ops("legacy", SPECIAL),
        ],
    )
    check_index(results[0], final, SCHEMA, INDEXED)
    assert rows_of_kartothek(results[1], COLUMNS, SCHEMA) == oracle(final, None, COLUMNS, SCHEMA)
    check_kartothek_reads(results[2:], final, SPECIAL, results[0]["partitions"])
