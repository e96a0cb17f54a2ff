"""Reading what kartothek 5.3.0 wrote (reference datasets) and every variant it can write.

The reference datasets are written at test time by kartothek 5.3.0 in its venv (the
session fixture ``reference``); the per-pyarrow-version files are vendored under
``tests/data/kartothek-arrow-compat`` (they need one pyarrow each).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import msgpack
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard
from kt_harness import Kartothek

from parquetry.dataset import Dataset
from parquetry.dataset.schema import common_metadata_bytes
from parquetry.store import LocalStore
from parquetry.testing import CountingStore

pytestmark = pytest.mark.kartothek

ARROW_COMPAT = Path(__file__).resolve().parents[1] / "data" / "kartothek-arrow-compat"

ALL_ROWS = {  # demo_json as kartothek wrote it: label -> product_id, value
    "a": (1, 10.5, "DE"),
    "b": (2, 20.0, "DE"),
    "c": (1, 5.25, "FR"),
    "d": (3, 7.0, "FR"),
    "e": (4, 1.0, "NL"),
    "f": (3, 30.0, "DE"),
    "g": (5, 2.5, "NL"),
    "h": (1, 3.5, "NL"),
}
DAYS = dict(zip("abcdefgh", ["01", "02", "01", "03", "02", "04", "04", "05"], strict=True))

# query, partitions kept, planning GETs kartothek needs, labels of the result
QUERIES = [
    ([[("country", "==", "DE")]], 2, 2, "abf"),
    ([[("product_id", "==", 1)]], 3, 3, "ach"),
    ([[("product_id", "in", [3, 4])], [("country", "==", "FR")]], 3, 3, "cdef"),
    ([[("country", ">=", "NL"), ("value", ">", 2.0)]], 2, 2, "gh"),
    ([[("value", ">", 20.0)]], 5, 2, "f"),
]


def _frame(labels: str) -> dict[str, object]:
    """Rows ``labels`` of ALL_ROWS as a kt_driver frame (product_id an int32 column)."""
    return {
        "schema": [
            ["country", "string"],
            ["product_id", "int32"],
            ["value", "float64"],
            ["day", "timestamp"],
            ["label", "string"],
        ],
        "rows": [
            [ALL_ROWS[x][2], ALL_ROWS[x][0], ALL_ROWS[x][1], {"$ts": f"2021-01-{DAYS[x]}"}, x]
            for x in labels
        ],
    }


@pytest.fixture(scope="session")
def reference(kartothek: Kartothek, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """demo_json (partitioned by country, index on product_id) and demo_unpartitioned
    (index on country), each written by kartothek from two frames, in one driver call."""
    root = tmp_path_factory.mktemp("kartothek-reference")
    frames = [_frame("abcde"), _frame("fgh")]
    kartothek.run(
        root,
        [
            {
                "op": "write",
                "uuid": "demo_json",
                "frames": frames,
                "partition_on": ["country"],
                "secondary_indices": ["product_id"],
                "metadata": {"owner": "research", "purpose": "format reference"},
            },
            {
                "op": "write",
                "uuid": "demo_unpartitioned",
                "frames": frames,
                "secondary_indices": ["country"],
            },
        ],
    )
    return root


@pytest.fixture
def ref_store(reference: Path, tmp_path: Path) -> LocalStore:
    shutil.copytree(reference, tmp_path / "ref")
    return LocalStore(tmp_path / "ref")


def _labels(table: pa.Table) -> str:
    return "".join(sorted(table["label"].to_pylist()))


def test_reads_demo_json_typed(ref_store: LocalStore) -> None:
    ds = Dataset.open(ref_store, "demo_json")
    assert ds.partition_keys == ("country",)
    assert ds.schema.field("product_id").type == pa.int64()  # int32 payload under int64
    assert ds.schema.field("day").type == pa.timestamp("us")
    table = ds.read()
    assert "__index_level_0__" not in table.column_names
    assert {
        r["label"]: (r["product_id"], r["value"], r["country"]) for r in table.to_pylist()
    } == ALL_ROWS
    assert ds.metadata["owner"] == "research"


@pytest.mark.parametrize(("query", "kept", "gets", "labels"), QUERIES)
def test_queries_match_kartothek(
    ref_store: LocalStore, query: list, kept: int, gets: int, labels: str
) -> None:
    store = CountingStore(ref_store)
    ds = Dataset.open(store, "demo_json")
    plan = ds.plan(query)
    assert len(plan.files) == kept
    # a kartothek-written pointer: the head's GET (a miss) + metadata + _common_metadata
    # (+ index), no version probe, and one LIST telling a pure kartothek dataset from a
    # parquetry one that kartothek updated (parquetry.dataset.kartothek_sync.foreign_state)
    assert store.counts["get"] == gets + 1
    assert store.counts["list"] == 1
    assert plan.requests == gets + 2
    assert _labels(ds.read(predicates=query)) == labels


def test_unpartitioned_with_index(ref_store: LocalStore) -> None:
    ds = Dataset.open(ref_store, "demo_unpartitioned")
    assert ds.partition_keys == ()
    got = ds.read(predicates=[[("country", "==", "FR")]])
    assert _labels(got) == "cd"
    assert len(ds.plan([[("country", "==", "FR")]]).files) == 1


def _rewrite(store: LocalStore, change: object) -> None:
    key = "demo_json.by-dataset-metadata.json"
    doc = json.loads(store.get(key))
    change(doc)  # type: ignore[operator]
    store.put(key, json.dumps(doc).encode())


def test_msgpack_metadata(ref_store: LocalStore) -> None:
    doc = json.loads(ref_store.get("demo_json.by-dataset-metadata.json"))
    packed = zstandard.ZstdCompressor(write_content_size=True).compress(
        msgpack.packb(doc, use_bin_type=True)
    )
    ref_store.put("demo_json.by-dataset-metadata.msgpack.zstd", packed)
    ref_store.delete("demo_json.by-dataset-metadata.json")
    ds = Dataset.open(ref_store, "demo_json")
    assert _labels(ds.read(predicates=QUERIES[1][0])) == "ach"


def test_implicit_partitions_without_keys(ref_store: LocalStore) -> None:
    _rewrite(ref_store, lambda d: (d.pop("partitions"), d.pop("partition_keys")))
    ds = Dataset.open(ref_store, "demo_json")
    assert ds.partition_keys == ("country",)
    assert len(ds.document.partitions) == 5
    for query, _, _, labels in QUERIES:
        assert _labels(ds.read(predicates=query)) == labels


def _index_table(store: LocalStore) -> tuple[str, pa.Table]:
    key = json.loads(store.get("demo_json.by-dataset-metadata.json"))["indices"]["product_id"]
    return key, pq.read_table(pa.BufferReader(store.get(key)))


def test_embedded_index(ref_store: LocalStore) -> None:
    _, idx = _index_table(ref_store)
    embedded = {str(r["product_id"]): r["partition"] for r in idx.to_pylist()}
    _rewrite(ref_store, lambda d: d["indices"].update(product_id=embedded))
    ds = Dataset.open(ref_store, "demo_json")
    for query, kept, _, labels in QUERIES:
        assert len(ds.plan(query).files) == kept
        assert _labels(ds.read(predicates=query)) == labels


@pytest.mark.parametrize("list_name", ["item", "element"])
def test_legacy_index_key_and_list_naming(ref_store: LocalStore, list_name: str) -> None:
    _, idx = _index_table(ref_store)
    t = pa.list_(pa.field(list_name, pa.string()))
    idx = idx.set_column(1, "partition", idx["partition"].cast(t))
    sink = pa.BufferOutputStream()
    pq.write_table(idx, sink, use_compliant_nested_type=list_name == "element")
    legacy = "demo_json.product_id.by-dataset-index.parquet"
    ref_store.put(legacy, sink.getvalue().to_pybytes())
    _rewrite(ref_store, lambda d: d["indices"].update(product_id=legacy))
    ds = Dataset.open(ref_store, "demo_json")
    assert _labels(ds.read(predicates=QUERIES[2][0])) == "cdef"


def test_arrow_compat_files_all_types(tmp_path: Path) -> None:
    """Every pyarrow version's file (incl. isAdjustedToUTC timestamps) reads the same row."""
    store = LocalStore(tmp_path / "compat")
    files = sorted(ARROW_COMPAT.glob("*.parquet"))
    schema = pq.read_schema(ARROW_COMPAT / "6.0.1.parquet")
    schema = pa.schema([f for f in schema if f.name != "__index_level_0__"])
    store.put("compat/table/_common_metadata", common_metadata_bytes(schema, []))
    parts = {}
    for i, f in enumerate(files):
        label = f"{i:032x}"
        key = f"compat/table/{label}.parquet"
        store.put(key, f.read_bytes())
        parts[label] = {"files": {"table": key}}
    doc = {
        "dataset_metadata_version": 4,
        "dataset_uuid": "compat",
        "metadata": {},
        "partitions": parts,
        "partition_keys": [],
    }
    store.put("compat.by-dataset-metadata.json", json.dumps(doc).encode())
    ds = Dataset.open(store, "compat")
    assert ds.schema.field("int8").type == pa.int64()
    assert ds.schema.field("array_float32").type == pa.list_(pa.float64())
    rows = ds.read().to_pylist()
    assert len(rows) == len(files) == 13
    assert all(r == rows[0] for r in rows)
    assert rows[0]["datetime64"].isoformat() == "2018-01-01T00:00:00"
    assert ds.read(predicates=[[("uint64", "==", 1), ("bool", "==", True)]]).num_rows == 13


def test_our_update_of_kartothek_dataset(ref_store: LocalStore) -> None:
    created = json.loads(ref_store.get("demo_json.by-dataset-metadata.json"))["metadata"]
    ds = Dataset.open(ref_store, "demo_json")
    new = pa.table(
        {
            "country": ["FR"],
            "day": pa.array([None], pa.timestamp("us")),
            "label": ["z"],
            "product_id": [1],
            "value": [0.5],
        }
    )
    ds2 = ds.update(new, delete_scope=[{"country": "DE"}])
    assert _labels(ds2.read(predicates=[[("product_id", "==", 1)]])) == "chz"
    raw = json.loads(ref_store.get("demo_json.by-dataset-metadata.json"))
    assert raw["metadata"]["owner"] == "research"
    assert raw["metadata"]["creation_time"] == created["creation_time"]
    assert raw["metadata"]["purpose"] == "format reference"
    idx = pq.read_table(pa.BufferReader(ref_store.get(raw["indices"]["product_id"])))
    labels = {lbl for lst in idx["partition"].to_pylist() for lbl in lst}
    assert labels == set(raw["partitions"])
    assert Dataset.open(ref_store, "demo_json").version == 1


def test_stale_msgpack_pointer_removed_on_commit(ref_store: LocalStore) -> None:
    """kartothek leaves the old .msgpack.zstd beside its new .json; our commit cleans up."""
    doc = json.loads(ref_store.get("demo_json.by-dataset-metadata.json"))
    packed = zstandard.ZstdCompressor().compress(msgpack.packb(doc))
    ref_store.put("demo_json.by-dataset-metadata.msgpack.zstd", packed)
    ds = Dataset.open(ref_store, "demo_json")
    ds.append(ds.read(predicates=[[("country", "==", "FR")]]))
    assert not ref_store.exists("demo_json.by-dataset-metadata.msgpack.zstd")
    assert Dataset.open(ref_store, "demo_json").read().num_rows == 10
