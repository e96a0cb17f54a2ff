"""Running out of memory or threads is reported as ``ResourceExhausted``, never as a corrupt
file (a user who believes "not a readable Parquet file" may delete good data) and never as a
raw ``RuntimeError``; the dataset stays readable once the pressure is gone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from parquetry.errors import InvalidFormat, ParquetryError, ResourceExhausted, resource_failure

from .ops_memory import big_dataset, run_limited

_READ = """
try:
    t = ds.read()
    report(rows=t.num_rows)
except BaseException as exc:
    report(error=type(exc).__name__, mro=[c.__name__ for c in type(exc).__mro__],
           message=str(exc), key=getattr(exc, "key", None))
"""


@pytest.fixture(scope="module")
def dataset_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("exhausted")
    big_dataset(root, files=2, rows_per_file=2_000_000)
    return root


@pytest.mark.parametrize("headroom_mib", [20, 60])
def test_a_read_out_of_memory_or_threads_says_so(dataset_root: Path, headroom_mib: int) -> None:
    # 20 MiB: the read pool cannot start its threads; 60 MiB: a 16 MB malloc fails in pyarrow.
    result = run_limited(dataset_root, _READ, headroom_mib << 20)
    assert result.get("failed") != 1, result.get("stderr")
    assert "rows" not in result, "the limit was meant to be too small for this read"
    assert result["error"] == "ResourceExhausted", result
    assert "MemoryError" in result["mro"]
    assert "ParquetryError" in result["mro"]
    assert "not a readable Parquet file" not in result["message"]
    if "out of memory" in result["message"]:
        assert result["key"]
        assert result["key"].endswith(".parquet")
        assert result["key"] in result["message"]
    else:
        assert "cannot start a thread" in result["message"]
    # Nothing was harmed: with room, the same dataset reads whole.
    ok = run_limited(dataset_root, _READ, 400 << 20)
    assert ok.get("rows") == 4_000_000, json.dumps(ok)[:2000]


def test_resource_failure_classifies_only_resource_errors() -> None:
    import pyarrow as pa

    assert isinstance(resource_failure(MemoryError(), "x"), ResourceExhausted)
    assert isinstance(
        resource_failure(pa.ArrowMemoryError("malloc of size 8 failed"), "x"), ResourceExhausted
    )
    assert isinstance(
        resource_failure(RuntimeError("can't start new thread"), "x"), ResourceExhausted
    )
    assert resource_failure(RuntimeError("something else"), "x") is None
    assert resource_failure(pa.ArrowInvalid("bad footer"), "x") is None
    assert resource_failure(InvalidFormat("f: bad"), "x") is None
    err = resource_failure(
        MemoryError("malloc of size 16 failed"), "reading a/b.parquet", key="a/b.parquet"
    )
    assert isinstance(err, ParquetryError)
    assert err.key == "a/b.parquet"
    assert "a/b.parquet" in str(err)
    assert "malloc of size 16 failed" in str(err)


def test_index_and_snapshot_reads_never_blame_the_bytes_for_a_failed_allocation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failed allocation inside pyarrow (injected: RLIMIT_AS cannot aim at one read) while
    reading an index piece, a schema file or a snapshot part is ResourceExhausted, not
    MetadataCorrupted/InvalidFormat, and nothing is changed."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from parquetry.dataset import Dataset
    from parquetry.snapshot import ParquetDatasetStore
    from parquetry.store import LocalStore

    store = LocalStore(tmp_path)
    table = pa.table({"p": [1, 1, 2], "k": ["a", "b", "c"], "v": [1, 2, 3]})
    Dataset.create(store, "d", table, partition_on=["p"], secondary_indices=["k"])
    snaps = ParquetDatasetStore(store)
    snaps.write_dataset(table, "snaps/s")

    def failing(*args: object, **kwargs: object) -> None:
        raise pa.ArrowMemoryError("malloc of size 4096 failed")

    with monkeypatch.context() as m:
        m.setattr(pq.ParquetFile, "read", failing)
        m.setattr(pq.ParquetFile, "read_row_group", failing)
        m.setattr(pq.ParquetFile, "read_row_groups", failing)
        m.setattr(pq, "read_schema", failing)
        with pytest.raises(ResourceExhausted, match="malloc of size 4096 failed"):
            Dataset.open(store, "d").read(predicates=[[("k", "==", "b")]])
        with pytest.raises(ResourceExhausted, match="malloc of size 4096 failed"):
            snaps.read_dataset("snaps/s")
    assert Dataset.open(store, "d").read(predicates=[[("k", "==", "b")]]).num_rows == 1
    assert snaps.read_dataset("snaps/s").num_rows == 3
