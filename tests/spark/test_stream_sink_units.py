"""The sink's driver-side pieces without a Spark session: the query id, the idempotent
commit of the batch writer (what foreachBatch with txnAppId/txnVersion runs), refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql.types import LongType, StructField, StructType

from parquetry.dataset import Dataset, write_files
from parquetry.errors import InvalidArgument
from parquetry.spark.options import SourceOptions
from parquetry.spark.stream_sink import query_id, stream_writer
from parquetry.spark.writer import DatasetArrowWriter
from parquetry.store import open_store

SCHEMA = StructType([StructField("id", LongType()), StructField("k", LongType())])


def _opts(lake: Path, **extra: str) -> SourceOptions:
    return SourceOptions.parse({"store": lake.as_uri(), "dataset": "d", **extra})


def _rows(start: int) -> pa.Table:
    ids = list(range(start, start + 5))
    return pa.table({"id": ids, "k": [i % 2 for i in ids]})


def test_query_id_from_checkpoint_metadata(tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "metadata").write_text(json.dumps({"id": "q-1"}))
    lake = tmp_path / "lake"
    assert query_id(_opts(lake, checkpointLocation=str(ckpt))) == "q-1"
    assert query_id(_opts(lake, checkpointLocation=ckpt.as_uri())) == "q-1"
    # On a store: the checkpoint directory as a store URL.
    open_store("memory://ckpt-units").put("metadata", json.dumps({"id": "q-2"}).encode())
    assert query_id(_opts(lake, checkpointLocation="memory://ckpt-units/")) == "q-2"
    # txnAppId wins; without either the sink refuses, naming the options.
    assert query_id(_opts(lake, checkpointLocation=str(ckpt), txnAppId="a", txnVersion="0")) == "a"
    with pytest.raises(InvalidArgument, match="checkpointLocation"):
        query_id(_opts(lake))
    with pytest.raises(InvalidArgument, match="query id"):
        query_id(_opts(lake, checkpointLocation=str(tmp_path / "missing")))
    # Output modes the layouts do not support are refused before any task runs.
    with pytest.raises(InvalidArgument, match="append"):
        stream_writer(_opts(lake, checkpointLocation=str(ckpt)), SCHEMA, True)
    snap = SourceOptions.parse(
        {"store": lake.as_uri(), "layout": "snapshot", "key": "s", "checkpointLocation": str(ckpt)}
    )
    with pytest.raises(InvalidArgument, match="complete"):
        stream_writer(snap, SCHEMA, False)


def test_batch_writer_commit_with_txn_is_idempotent(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    store = open_store(lake.as_uri())
    opts = _opts(lake, partition_on="k", txnAppId="job", txnVersion="3")
    writer = DatasetArrowWriter(opts, SCHEMA, False)
    first = write_files(store, "d", _rows(0), partition_on=["k"])
    assert writer.commit_files(first, opts.txn) is True
    replay = write_files(store, "d", _rows(0), partition_on=["k"])
    assert writer.commit_files(replay, opts.txn) is False
    assert all(not store.exists(f.key) for f in replay)  # the replay's files are deleted
    ds = Dataset.open(store, "d")
    assert sorted(ds.read()["id"].to_pylist()) == list(range(5))
    assert ds.transactions == {"job": 3}
    assert writer.commit_files(write_files(store, "d", _rows(5), partition_on=["k"]), ("job", 4))
    assert Dataset.open(store, "d").read().num_rows == 10
    # Commits that would not record the transaction are refused up front.
    for extra in ({"replaceWhere": "k = 1"}, {"partitionOverwriteMode": "dynamic"}):
        with pytest.raises(InvalidArgument, match="txnAppId"):
            DatasetArrowWriter(_opts(lake, txnAppId="job", txnVersion="5", **extra), SCHEMA, True)
