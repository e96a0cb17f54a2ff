"""kartothek's index file written streaming from an IndexState (indexexport.py) holds
exactly the live pairs: a dict oracle over random histories of pairs, delta pieces,
removals, checkpoints and adopted (unsorted, kartothek-like) index files, with tiny row
groups and spill thresholds so that every path (value-disjoint pieces, overlapping pieces
merged, spilled runs) runs."""

from __future__ import annotations

import random
from typing import Any
from unittest import mock

import hypothesis.strategies as st
import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import HealthCheck, settings
from hypothesis.stateful import invariant, rule

from parquetry.dataset import indexpieces
from parquetry.dataset.indexexport import write_kartothek_index
from parquetry.dataset.indexstate import IndexState
from parquetry.dataset.indices import load_index

from .test_indexstate_props import IndexModel, StringIndexModel

ROW_GROUP = 3
RUN_PAIRS = 4


class ExportModel(IndexModel):
    """IndexModel's histories; the exported file must equal the oracle after each step."""

    values = st.integers(-3, 40)

    def __init__(self) -> None:
        super().__init__()
        # Pieces of a few pairs per row group: merges read several groups per piece.
        self._patch = mock.patch.object(indexpieces, "PIECE_ROW_GROUP", 2)
        self._patch.start()
        self.rng = random.Random(0)

    def teardown(self) -> None:
        self._patch.stop()

    @rule(data=st.data())
    def many_pairs(self, data: st.DataObject) -> None:
        """A wider value range than the base rules, so checkpoints write disjoint pieces."""
        values = data.draw(st.lists(self.values, min_size=5, max_size=20))
        pairs = [(v, f"p={v % 3}/{v:032x}") for v in values]
        self.state = self.state.with_pairs(self._table(pairs, self.type))
        self._add(pairs)

    @rule()
    def adopt_kartothek_file(self) -> None:
        """A format-1 / kartothek index file (rows and lists in any order) as the state."""
        items = [(v, sorted(s)) for v, s in self.oracle.items() if s]
        self.rng.shuffle(items)
        for _, labels in items:
            self.rng.shuffle(labels)
        table = pa.table(
            {
                "c": pa.array([v for v, _ in items], self.type),
                "partition": pa.array([lbls for _, lbls in items], pa.list_(pa.string())),
            }
        )
        key = f"u/indices/c/{self.rng.getrandbits(64):x}.by-dataset-index.parquet"
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink, row_group_size=2)
        self.store.put(key, sink.getvalue().to_pybytes())
        self.state = IndexState.legacy(self.store, "c", key, None, self.type)

    @invariant()
    def export_agrees(self) -> None:
        footer = write_kartothek_index(
            self.store, "u", self.state, row_group=ROW_GROUP, run_pairs=RUN_PAIRS
        )
        data = self.store.get(footer.key)
        assert footer.size == len(data)
        assert data.endswith(footer.tail)
        pf = pq.ParquetFile(pa.BufferReader(data))
        table = pf.read()
        assert table.schema.names == ["c", "partition"]
        assert table.schema.field("c").type == self.type
        assert pa.types.is_list(table.schema.field("partition").type)
        values = table.column("c").to_pylist()
        assert values == sorted(values)
        assert len(set(values)) == len(values)
        lists = table.column("partition").to_pylist()
        assert all(lbls and len(set(lbls)) == len(lbls) for lbls in lists)
        groups = [pf.metadata.row_group(i).num_rows for i in range(pf.metadata.num_row_groups)]
        if values:
            assert all(n == ROW_GROUP for n in groups[:-1])
            assert 0 < groups[-1] <= ROW_GROUP
        else:
            assert groups in ([], [0])
        got = {v: set(lbls) for v, lbls in zip(values, lists, strict=True)}
        assert got == {v: s for v, s in self.oracle.items() if s}
        # What kartothek (and parquetry's format-1 reader) load from it.
        loaded = load_index(self.store, "c", footer.key, self.type)
        assert loaded.values.to_pylist() == values


class StringExportModel(ExportModel):
    type = StringIndexModel.type
    values = st.sampled_from(["", "a", "ab", "b", "bb", "c", "é", "zz", "zzz"])

    def draw_values(self) -> list[Any]:
        return StringIndexModel.draw_values(self)  # type: ignore[arg-type]

    @rule(data=st.data())
    def many_pairs(self, data: st.DataObject) -> None:
        values = data.draw(st.lists(self.values, min_size=5, max_size=20))
        pairs = [(v, f"p={len(v)}/{v.encode().hex():0>32}") for v in values]
        self.state = self.state.with_pairs(self._table(pairs, self.type))
        self._add(pairs)


class FloatExportModel(ExportModel):
    """Floats have no usable value ranges (NaN): every piece merges as one stream."""

    type = pa.float64()
    values = st.sampled_from([-2.5, -1.0, 0.0, 0.5, 3.25, 1e300])

    def draw_values(self) -> list[Any]:
        return [-1.0, 0.5, 7.0]

    @rule(data=st.data())
    def many_pairs(self, data: st.DataObject) -> None:
        values = data.draw(st.lists(self.values, min_size=5, max_size=20))
        pairs = [(v, f"p={int(v) % 3}/{abs(hash(v)):032x}") for v in values]
        self.state = self.state.with_pairs(self._table(pairs, self.type))
        self._add(pairs)


_SETTINGS = settings(
    max_examples=8,
    stateful_step_count=10,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestExportModel = ExportModel.TestCase
TestExportModel.settings = _SETTINGS
TestStringExportModel = StringExportModel.TestCase
TestStringExportModel.settings = _SETTINGS
TestFloatExportModel = FloatExportModel.TestCase
TestFloatExportModel.settings = _SETTINGS
