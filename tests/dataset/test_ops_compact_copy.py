"""Dataset.compact(binary_copy=...): row groups copied without decoding where the schemas
match, re-encoded otherwise, in one output; rows, statistics and indices exact."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from parquetry.dataset import Dataset
from parquetry.dataset.stats import compute_stats
from parquetry.dataset.write import FileDescription
from parquetry.errors import InvalidArgument
from parquetry.parquet import WriteOptions
from parquetry.parquet.footer import footer_from_bytes
from parquetry.parquet.footer_check import pyarrow_hazard
from parquetry.store import LocalStore, MemoryStore, Store

SCHEMA = pa.schema(
    [
        ("p", pa.int64()),
        ("id", pa.int64()),
        ("tag", pa.string()),
        ("v", pa.float64()),
        ("ts", pa.timestamp("us")),
        ("d", pa.decimal128(10, 2)),
    ]
)


def _chunk(start: int, n: int) -> pa.Table:
    ids = range(start, start + n)
    return pa.Table.from_pylist(
        [
            {
                "p": i % 2,
                "id": i,
                "tag": None if i % 5 == 0 else f"t{i % 11}",
                "v": None if i % 7 == 0 else i / 4,
                "ts": dt.datetime(2024, 1, 1) + dt.timedelta(minutes=i),
                "d": Decimal(i) / 100,
            }
            for i in ids
        ],
        schema=SCHEMA,
    )


def _dataset(store: Store) -> Dataset:
    """Small files of two partitions: dictionary-encoded ones (the default options),
    dictionary-free ones (mergeable pages), snappy ones, in an interleaved order."""
    ds = Dataset.create(store, "c", _chunk(0, 30), partition_on=["p"], secondary_indices=["tag"])
    plain = WriteOptions(dictionary=False)
    dictionary = WriteOptions(dictionary=True)
    snappy = WriteOptions(dictionary=False, compression="snappy")
    for i, opts in enumerate([plain, dictionary, plain, snappy, plain, dictionary, snappy]):
        ds = ds.append(_chunk((i + 1) * 30, 30), write_options=opts)
    return ds


def _payload_files(ds: Dataset) -> dict[str, bytes]:
    return {f.label: ds.store.get(f.key) for f in ds.plan().files}


def _check_outputs(ds: Dataset, before: pa.Table) -> list[dict[int, Any]]:
    """Rows, document statistics (against pyarrow-computed ones), index and footers."""
    assert ds.read().sort_by("id").equals(before)
    metas = []
    for f in ds.plan().files:
        data = ds.store.get(f.key)
        raw = footer_from_bytes(data, f.key)
        assert pyarrow_hazard(raw) is None
        assert raw.metadata is not None
        metas.append(raw.metadata)
        table = pq.read_table(pa.BufferReader(data))
        info = ds.document.files[f.label]
        assert info.rows == table.num_rows
        want = compute_stats(table)
        assert {k: v for k, v in info.stats.items() if k in want} == want, f.label
        # The Parquet footer's own statistics agree with the rows.
        md = pq.read_metadata(pa.BufferReader(data))
        for g in range(md.num_row_groups):
            st_ = md.row_group(g).column(0).statistics  # "id"
            ids = pq.ParquetFile(pa.BufferReader(data)).read_row_group(g).column("id")
            assert (st_.min, st_.max) == (min(ids.to_pylist()), max(ids.to_pylist()))
    if "tag" not in ds.secondary_indices:
        return metas
    pairs = ds.index_pairs("tag")
    values, labels = pairs.column("value").to_pylist(), pairs.column("label").to_pylist()
    got = set(zip(values, labels, strict=True))
    want_pairs = {
        (v, f.label)
        for f in ds.plan().files
        for v in ds.read_file(f, columns=["tag"]).column("tag").drop_null().to_pylist()
    }
    assert got == want_pairs
    return metas


@pytest.mark.parametrize("mode", [True, "auto", False])
def test_binary_copy_modes_keep_rows_statistics_and_indices_exact(mode: Any) -> None:
    ds = _dataset(MemoryStore())
    before = ds.read().sort_by("id")
    out = ds.compact(target_file_size=1 << 20, binary_copy=mode)
    assert len(out.plan().files) == 2
    metas = _check_outputs(out, before)
    created = {m.get(6, b"").decode() for m in metas}
    if mode is False:
        assert all("binary-copy" not in c for c in created)
        return
    assert all("binary-copy" in c for c in created)
    groups = [len(m[4]) for m in metas]
    if mode is True:
        # Per partition: the 2 dictionary-encoded files copied whole, the dictionary-free
        # ones merged by page concatenation into one row group per codec (zstd, snappy).
        assert all(3 <= g <= 5 for g in groups), groups
    else:
        # "auto": the small dictionary row groups re-encoded together into one row group.
        assert all(2 <= g <= 3 for g in groups), groups
    # Reading the compacted dataset with a predicate uses the merged statistics.
    assert out.read(predicates=[[("id", "<", 45)]]).sort_by("id").equals(before.slice(0, 45))


def test_other_parquet_schemas_and_kartothek_files_are_re_encoded_into_the_same_output(
    tmp_path: Path,
) -> None:
    store = LocalStore(tmp_path)
    ds = Dataset.create(store, "c", _chunk(0, 20), partition_on=["p"])
    ds = ds.append(_chunk(20, 20), write_options=WriteOptions(dictionary=False))
    # A foreign file of partition p=0: int32 ids (another physical type), no statistics.
    foreign = _chunk(40, 20).filter(pa.compute.equal(_chunk(40, 20).column("p"), 0))
    foreign = foreign.drop_columns(["p"]).cast(
        pa.schema([("id", pa.int32()), *[f for f in SCHEMA if f.name not in ("p", "id")]])
    )
    key = "c/table/p=0/foreign.parquet"
    sink = pa.BufferOutputStream()
    pq.write_table(foreign, sink)
    store.put(key, sink.getvalue().to_pybytes())
    ds = Dataset.commit_files(
        store,
        "c",
        [
            FileDescription(
                table="table",
                key=key,
                label="p=0/foreign",
                partition=(("p", 0),),
                rows=10,
                size=len(sink.getvalue()),
                stats={},
            )
        ],
        mode="append",
    )
    before = ds.read().sort_by("id")
    out = ds.compact(target_file_size=1 << 20, binary_copy=True)
    metas = _check_outputs(out, before)
    assert all("binary-copy" in m[6].decode() for m in metas)
    assert sum(m[3] for m in metas) == before.num_rows


def test_binary_copy_argument_is_checked() -> None:
    ds = _dataset(MemoryStore())
    with pytest.raises(InvalidArgument, match="binary_copy"):
        ds.compact(target_file_size=1 << 20, binary_copy="yes")  # type: ignore[arg-type]
