"""Index maintenance of large rewrites runs in bounded memory (indexspill.py): an update
or upsert rewriting every file of a dataset indexed on a unique key re-adds every key, and
completes under an address-space limit several times smaller than those pairs (and the
dataset). Before, the commit sorted all re-added pairs in memory as one delta piece and
failed under the same limit."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from parquetry.dataset import Dataset
from parquetry.store import LocalStore

from .ops_memory import INDEXED_ROW_BYTES, indexed_dataset, run_limited, uuid_dataset

FILES = 40
ROWS = 175_000  # per file; the index: 7M (value, label) pairs, ~360 MB as Arrow
HEADROOM = 300 << 20
#: Arrow bytes of one pair: an int64 and a label "part=<n>/<32 hex>.parquet"-like string.
PAIR_BYTES = 8 + 4 + 40


@pytest.mark.slow
def test_rewriting_every_file_of_an_indexed_dataset_fits_an_address_space_limit(
    tmp_path: Path,
) -> None:
    indexed_dataset(tmp_path, FILES, ROWS)
    assert FILES * ROWS * PAIR_BYTES > HEADROOM
    assert FILES * ROWS * INDEXED_ROW_BYTES > HEADROOM
    code = f"""
    out = ds.update_where([[("v", "==", 7)]], set={{"v": -7}})
    ids = pa.array([f * {ROWS} + 3 for f in range({FILES})], pa.int64())
    data = pa.table({{"part": pa.array(range({FILES}), pa.int64()), "id": ids,
                      "v": pa.repeat(pa.scalar(-3), {FILES}),
                      **{{f"pad{{n}}": pa.repeat(pa.scalar(0), {FILES}) for n in range(8)}}}})
    out = out.upsert(data, on=["id"])
    history = out.history(limit=2)
    report(version=out.version, metrics=[dict(h.metrics) for h in history])
    """
    got = run_limited(tmp_path, code, HEADROOM, timeout=300)
    assert "failed" not in got, got
    upsert, update = got["metrics"]
    assert update["files_rewritten"] == FILES
    assert upsert["files_rewritten"] == FILES
    assert got["peak_growth"] < HEADROOM
    # Exact: the index equals a rebuild from the files, and lookups find each key's file.
    ds = Dataset.open(LocalStore(tmp_path), "m")
    assert ds.version == 2
    assert _sorted(ds.index_pairs("id")).equals(_sorted(_rebuilt(ds)))
    for f in (0, FILES - 1):
        rows = ds.read(predicates=[[("id", "==", f * ROWS + 3)]])
        assert rows.column("v").to_pylist() == [-3]
    table = ds.read(columns=["v"])
    assert table.num_rows == FILES * ROWS
    assert pc.sum(pc.equal(table.column("v"), -7)).as_py() == FILES * ROWS // 1000


def _rebuilt(ds: Dataset) -> pa.Table:
    parts = []
    for planned in ds.plan(None).files:
        ids = pc.unique(ds.read_file(planned, ["id"]).column("id"))
        parts.append(pa.table({"value": ids, "label": pa.repeat(planned.label, len(ids))}))
    return pa.concat_tables(parts)


def _sorted(pairs: pa.Table, t: pa.DataType | None = None) -> pa.Table:
    t = pa.int64() if t is None else t
    pairs = pairs.select(["value", "label"]).cast(pa.schema([("value", t), ("label", pa.string())]))
    order = pc.sort_indices(pairs, sort_keys=[("value", "ascending"), ("label", "ascending")])
    return pairs.take(order).combine_chunks()


CHECKPOINT_FILES = 24
CHECKPOINT_ROWS = 100_000  # the index: 2.4M pairs, ~125 MB as Arrow, ~0.5 GB merged in memory
CHECKPOINT_HEADROOM = 100 << 20


@pytest.mark.slow
def test_checkpoint_writes_kartothek_index_file_within_an_address_space_limit(
    tmp_path: Path,
) -> None:
    """``Dataset.checkpoint()`` writes kartothek's merged index file (indexexport.py) one
    row group at a time from the sorted pieces; before, it merged every pair in memory
    and ran out of memory under this limit (7M keys failed under 300 MB)."""
    indexed_dataset(tmp_path, CHECKPOINT_FILES, CHECKPOINT_ROWS)
    pairs = CHECKPOINT_FILES * CHECKPOINT_ROWS
    assert pairs * PAIR_BYTES > CHECKPOINT_HEADROOM
    store = LocalStore(tmp_path)
    before = {m.key for m in store.list("m/indices/")}
    code = """
    out = ds.checkpoint()
    report(version=out.version)
    """
    got = run_limited(tmp_path, code, CHECKPOINT_HEADROOM, timeout=300)
    assert "failed" not in got, got
    assert got["peak_growth"] < CHECKPOINT_HEADROOM
    ds = Dataset.open(store, "m")
    assert ds.version == got["version"] == 0
    written = sorted({m.key for m in store.list("m/indices/")} - before)
    assert len(written) == 1
    pointer = json.loads(store.get("m.by-dataset-metadata.json"))
    assert pointer["indices"] == {"id": written[0]}
    # The file kartothek reads: every key once, ascending, with its one label.
    table = pq.read_table(tmp_path / written[0])
    assert table.num_rows == pairs
    ids = table.column("id")
    assert pc.all(pc.equal(ids, pa.array(range(pairs), pa.int64()))).as_py()
    assert pc.all(pc.equal(pc.list_value_length(table.column("partition")), 1)).as_py()
    assert _sorted(ds.index_pairs("id")).equals(_sorted(_rebuilt(ds)))


UUID_FILES = 24
UUID_ROWS = 100_000  # per file: 2.4M UUID texts, ~96 MB of index values as Arrow
UUID_HEADROOM = 150 << 20


@pytest.fixture(scope="module")
def uuid_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A dataset of UUID_FILES files indexed on a UUID text key (built once, read only)."""
    root = tmp_path_factory.mktemp("uuid")
    uuid_dataset(root, UUID_FILES, UUID_ROWS)
    return root


@pytest.mark.slow
def test_a_rewrite_spills_the_index_values_of_the_files_it_writes(
    uuid_root: Path, tmp_path: Path
) -> None:
    """A rewrite of every file of a dataset indexed on a UUID text key hands each written
    file's distinct keys to the commit's spilling sinks (indexsinks.py) as the file is
    written. Before, each file's description held them until the commit: 2.4M keys needed
    ~210 MB above the process's size after opening (it failed under this limit), now
    ~110 MB, whatever the number of keys."""
    shutil.copytree(uuid_root, tmp_path, dirs_exist_ok=True)
    keys = UUID_FILES * UUID_ROWS
    assert keys * (36 + 4) > UUID_HEADROOM * 0.6
    code = """
    out = ds.update_where([[("v", "==", 7)]], set={"v": -7})
    report(version=out.version, metrics=dict(out.history(limit=1)[0].metrics))
    """
    got = run_limited(tmp_path, code, UUID_HEADROOM, timeout=300)
    assert "failed" not in got, got
    assert got["metrics"]["files_rewritten"] == UUID_FILES
    assert got["metrics"]["rows_updated"] == keys // 1000
    ds = Dataset.open(LocalStore(tmp_path), "m")
    assert ds.version == 1
    # Exact: the index equals one rebuilt from the files written, and finds their keys.
    assert _sorted(ds.index_pairs("id"), pa.string()).equals(_sorted(_rebuilt(ds), pa.string()))
    planned = ds.plan().files[-1]
    key = ds.read_file(planned, ["id"]).column("id")[5].as_py()
    assert [f.label for f in ds.plan([[("id", "==", key)]]).files] == [planned.label]


SCAN_HEADROOM = 150 << 20


@pytest.mark.slow
def test_scanning_lookups_fit_an_address_space_limit(uuid_root: Path) -> None:
    """``!=`` and ``is not null`` read every index piece (their statistics exclude no row
    group): one row group at a time now (indexscan.py), keeping only the labels found.
    Before, each piece was read and decoded whole, 16 at a time: ~890 MB of peak RSS for
    2M UUID keys; it failed under this limit."""
    code = """
    probe = ds.read_file(ds.plan().files[0], ["id"]).column("id")[0].as_py()
    ne = ds.plan([[("id", "!=", probe)]])
    nn = ds.plan([[("id", "is not null")]])
    rng = ds.plan([[("id", ">=", "0")]])
    pieces = [k for k in ne.request_keys if "/_indices/" in k]
    report(ne=len(ne.files), nn=len(nn.files), rng=len(rng.files), piece_gets=len(pieces))
    """
    got = run_limited(uuid_root, code, SCAN_HEADROOM, timeout=300)
    assert "failed" not in got, got
    # Every file holds other keys than the probe and keys at all.
    assert got["ne"] == got["nn"] == got["rng"] == UUID_FILES
    assert got["piece_gets"] >= 10  # the index's 10 pieces were read (in ranged GETs)
    assert got["vm_peak_growth"] < SCAN_HEADROOM
