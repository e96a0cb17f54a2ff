"""Attacks with real-world Parquet files (apache/parquet-testing): a file with a float16
column (``byte_stream_split_extended.gzip.parquet``, ``float16_*_and_nans.parquet``) could
not be written into a dataset: the statistics of the write asked pyarrow for a float16
``min_max`` kernel it does not have, and a raw ArrowNotImplementedError escaped
``Dataset.create``/``append``. Predicates on such a column failed the same way (no float16
comparison kernels). Oracle: the same rows stored as float32, which holds every float16
value exactly.

The other files of parquet-testing's ``data/`` and ``bad_data/`` were committed with
``commit_files`` and compacted (``binary_copy="auto"`` and True) without finding a defect:
each compaction read equal to its input or was refused with InvalidFormat.
"""

from __future__ import annotations

import math

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from parquetry.dataset import Dataset
from parquetry.store import MemoryStore

_VALUES = [1.5, -2.0, 0.25, None, 65504.0, -0.0, 0.0, float("nan"), float("inf"), -65504.0]


def _dataset(values: list[float | None], t: pa.DataType, batch: int = 3) -> Dataset:
    """One file per ``batch`` rows, so statistics prune files."""
    store = MemoryStore()
    ds = None
    for at in range(0, max(len(values), 1), batch):
        chunk = values[at : at + batch]
        table = pa.table(
            {
                "id": pa.array(range(at, at + len(chunk)), pa.int64()),
                "h": pa.array(chunk, pa.float64()).cast(t),
            }
        )
        ds = Dataset.create(store, "d", table) if ds is None else ds.append(table)
    assert ds is not None
    return ds


def _ids(ds: Dataset, predicates: object) -> list[int]:
    return sorted(ds.read(predicates=predicates).column("id").to_pylist())


def test_a_float16_column_is_written_read_filtered_and_compacted() -> None:
    half = _dataset(_VALUES, pa.float16())
    single = _dataset(_VALUES, pa.float32())
    assert half.schema.field("h").type == pa.float16()
    for pred in [
        [[("h", ">", 1.0)]],
        [[("h", "==", 0.0)]],
        [[("h", "<", 0.0)]],
        [[("h", "in", [0.25, -2.0])]],
        [[("h", "is null", None)]],
    ]:
        assert _ids(half, pred) == _ids(single, pred), pred
    compacted = half.compact(target_file_size=1 << 20, binary_copy="auto")
    # repr: NaN equals NaN, -0.0 differs from 0.0
    assert repr(compacted.read().sort_by("id").to_pylist()) == repr(
        half.read().sort_by("id").to_pylist()
    )
    deleted = compacted.delete_where([[("h", "<", 0.0)]])
    assert _ids(deleted, None) == _ids(single.delete_where([[("h", "<", 0.0)]]), None)


_float16 = st.one_of(
    st.none(),
    st.floats(width=16, allow_nan=True, allow_infinity=True),
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    values=st.lists(_float16, min_size=1, max_size=10),
    op=st.sampled_from(["==", "!=", "<", "<=", ">", ">="]),
    literal=st.one_of(st.floats(width=16), st.floats(allow_nan=False, allow_infinity=False)),
)
def test_float16_predicates_equal_float32_ones(
    values: list[float | None], op: str, literal: float
) -> None:
    if math.isinf(literal):
        literal = 1e300 if literal > 0 else -1e300
    half = _dataset(values, pa.float16())
    single = _dataset(values, pa.float32())
    pred = [[("h", op, literal)]]
    assert _ids(half, pred) == _ids(single, pred)
