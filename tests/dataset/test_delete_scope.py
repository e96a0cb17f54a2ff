"""``update(delete_scope=...)`` selects exactly the partitions its dicts name, nulls included."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from parquetry.dataset import Dataset
from parquetry.errors import PredicateError
from parquetry.store import MemoryStore

SCHEMA = pa.schema([("p", pa.string()), ("r", pa.string()), ("v", pa.int64())])
P_VALUES = [None, "", "a", "b"]
R_VALUES = [None, "x"]


def _rows(table: pa.Table) -> list[tuple[Any, ...]]:
    return sorted((tuple(r.values()) for r in table.to_pylist()), key=repr)


def test_none_in_delete_scope_selects_the_null_partition() -> None:
    """Regression: ``{"p": None}`` raised PredicateError ("use 'is null'") instead of
    selecting ``p=__HIVE_DEFAULT_PARTITION__``."""
    store = MemoryStore()
    table = pa.table({"p": ["a", None, "", None], "v": [1, 2, 3, 4]})
    ds = Dataset.create(store, "ds", table, partition_on=["p"], secondary_indices=["v"])
    new = pa.table({"p": pa.array([None], pa.string()), "v": [9]})
    ds = ds.update(new, delete_scope=[{"p": None}])
    assert _rows(ds.read()) == _rows(pa.table({"p": ["a", "", None], "v": [1, 3, 9]}))
    assert ds.read(predicates=[[("v", "==", 2)]]).num_rows == 0  # the index followed
    assert ds.read(predicates=[[("v", "==", 9)]]).num_rows == 1
    # The empty string is a value of its own, not the null partition.
    ds = ds.update(delete_scope=[{"p": ""}])
    assert _rows(ds.read()) == _rows(pa.table({"p": ["a", None], "v": [1, 9]}))


def test_none_on_an_indexed_column_is_a_clear_error() -> None:
    """An index holds no nulls: a null cannot say which partitions to delete."""
    store = MemoryStore()
    table = pa.table({"p": ["a", "b"], "c": pa.array([None, 1], pa.int64())})
    ds = Dataset.create(store, "ds", table, partition_on=["p"], secondary_indices=["c"])
    with pytest.raises(PredicateError, match="'c'") as info:
        ds.update(delete_scope=[{"c": None}])
    assert info.value.column == "c"
    assert Dataset.open(store, "ds").version == 0


_row = st.fixed_dictionaries(
    {"p": st.sampled_from(P_VALUES), "r": st.sampled_from(R_VALUES), "v": st.integers(0, 9)}
)
_scope = st.lists(
    st.one_of(
        st.fixed_dictionaries({"p": st.sampled_from(P_VALUES)}),
        st.fixed_dictionaries({"r": st.sampled_from(R_VALUES)}),
        st.fixed_dictionaries({"p": st.sampled_from(P_VALUES), "r": st.sampled_from(R_VALUES)}),
    ),
    min_size=1,
    max_size=3,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_row, min_size=1, max_size=12), _scope)
def test_delete_scope_removes_what_a_row_filter_says(
    rows: list[dict[str, Any]], scope: list[dict[str, Any]]
) -> None:
    """Oracle: a row goes iff some scope dict matches it on every named column (None
    matching a null); partitions are whole (p, r) combinations, so rows tell exactly."""
    store = MemoryStore()
    ds = Dataset.create(
        store, "ds", pa.Table.from_pylist(rows, schema=SCHEMA), partition_on=["p", "r"]
    )
    kept = [r for r in rows if not any(all(r[c] == v for c, v in s.items()) for s in scope)]
    after = ds.update(delete_scope=scope)
    assert _rows(after.read()) == _rows(pa.Table.from_pylist(kept, schema=SCHEMA))
    assert _rows(Dataset.open(store, "ds").read()) == _rows(after.read())
