"""No write brings in a column name that differs from another only in case (Spark resolves
names case-insensitively and cannot read a dataset with both)."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parquetry.dataset import Dataset
from parquetry.dataset.write import write_files
from parquetry.errors import SchemaMismatch
from parquetry.store import MemoryStore


def test_merge_schema_refuses_a_column_differing_only_in_case() -> None:
    """Regression: ``Id`` in the dataset, ``id`` in the data: merge_schema added a second
    column ``id``."""
    store = MemoryStore()
    ds = Dataset.create(store, "ds", pa.table({"Id": [1], "v": ["a"]}))
    with pytest.raises(SchemaMismatch, match="'Id' and 'id' differ only in case") as info:
        ds.append(pa.table({"id": [2], "v": ["b"]}), merge_schema=True)
    assert str(info.value).startswith("A schema mismatch detected when writing to dataset 'ds'")
    with pytest.raises(SchemaMismatch, match="'Id' and 'id'"):
        ds.update(pa.table({"id": [2], "v": ["b"]}), merge_schema=True)
    table = pa.table({"Id": [3], "v": ["c"], "V": ["d"]})
    files = write_files(store, "ds", table)
    with pytest.raises(SchemaMismatch, match="'v' and 'V'"):
        Dataset.commit_files(store, "ds", files, schema=table.schema, merge_schema=True)
    same = Dataset.open(store, "ds")
    assert (same.version, same.schema.names) == (0, ["Id", "v"])
    assert same.read().to_pylist() == [{"Id": 1, "v": "a"}]


def test_case_clashes_in_struct_fields_and_within_the_data() -> None:
    store = MemoryStore()
    s = pa.array([{"a": 1}])
    ds = Dataset.create(store, "ds", pa.table({"k": [1], "s": s}))
    with pytest.raises(SchemaMismatch, match=r"'s\.a' and 's\.A'"):
        ds.append(pa.table({"k": [2], "s": pa.array([{"a": 2, "A": 3}])}), merge_schema=True)
    with pytest.raises(SchemaMismatch, match="'x' and 'X'"):
        ds.append(pa.table({"k": [2], "s": s, "x": [1], "X": [2]}), merge_schema=True)
    # The exact spelling is fine, new names too.
    more = pa.table({"k": [2], "s": pa.array([{"a": 2, "b": 3}]), "x": [1]})
    ds = ds.append(more, merge_schema=True)
    assert ds.schema.names == ["k", "s", "x"]
    assert [f.name for f in ds.schema.field("s").type] == ["a", "b"]


_NAMES = ["a", "A", "b", "B", "ab", "aB", "Ab"]


@settings(max_examples=60, deadline=None)
@given(st.sets(st.sampled_from(_NAMES), min_size=1, max_size=4), st.data())
def test_merge_accepted_iff_no_two_names_differ_only_in_case(
    dataset_names: set[str], data: st.DataObject
) -> None:
    """Oracle: the merged names, folded to lower case, are as many as the names."""
    lowered = {n.lower(): n for n in sorted(dataset_names)}
    ours = sorted(lowered.values())  # a dataset without clashes of its own
    extra = data.draw(st.lists(st.sampled_from(_NAMES), unique=True, max_size=3))
    theirs = ours + [n for n in extra if n not in ours]
    store = MemoryStore()
    ds = Dataset.create(store, "ds", pa.table({n: [1] for n in ours}))
    table = pa.table({n: [2] for n in theirs})
    if len({n.lower() for n in theirs}) == len(theirs):
        assert ds.append(table, merge_schema=True).schema.names == theirs
    else:
        with pytest.raises(SchemaMismatch, match="differ only in case"):
            ds.append(table, merge_schema=True)
        assert Dataset.open(store, "ds").version == 0
