"""File records a checkpoint carries from the index pieces it reads into those it writes
(:meth:`parquetry.dataset.indexstate.IndexState.checkpoint`; records: piecefiles.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from parquetry.dataset.indexfile import IndexFooter
from parquetry.dataset.indexpieces import iter_piece_tables, normalise_pairs, read_piece_table
from parquetry.dataset.indices import _from_table
from parquetry.dataset.piecefiles import piece_records
from parquetry.store import Store

if TYPE_CHECKING:  # indexstate imports this module
    from parquetry.dataset.indexstate import IndexState

__all__ = ["CarriedRecords"]


class CarriedRecords:
    """The file records a checkpoint carries into the pieces it writes: those of every
    piece it reads (merged or rewritten) and, when the tail becomes a piece, the tail
    labels' (``files``, computed only then)."""

    def __init__(
        self, state: IndexState, store: Store, files: Callable[[], pa.Table | None] | None
    ):
        self.state, self.store, self.files = state, store, files
        self.parts: list[pa.Table] = []

    def pairs(self, footer: IndexFooter, dead: frozenset[str]) -> pa.Table:
        """A piece's pairs (normalised), keeping the records of its live labels (a dead
        label re-added elsewhere has another file)."""
        table = read_piece_table(self.store, self.state.column, footer)
        got = piece_records(table)
        if got is not None and got.num_rows:
            self.parts.append(_without(got, dead))
        index = _from_table(self.state.column, table, footer.key, self.state.type)
        return normalise_pairs(index.pairs(), self.state.type)

    def stream(self, footer: IndexFooter, dead: frozenset[str]) -> Iterator[pa.Table]:
        """:meth:`pairs` one row group at a time (bounded memory whatever the piece's
        size); the records kept are one per label of each group."""
        for table in iter_piece_tables(self.store, self.state.column, footer):
            got = piece_records(table)
            if got is not None and got.num_rows:
                got = _without(_first_per_label(got), dead)
                if got.num_rows:
                    self.parts.append(got)
            index = _from_table(self.state.column, table, footer.key, self.state.type)
            yield normalise_pairs(index.pairs(), self.state.type)

    def table(self, with_tail: bool) -> pa.Table | None:
        parts = list(self.parts)
        if with_tail and self.files is not None and self.state.tail.num_rows:
            extra = self.files()
            if extra is not None and extra.num_rows:
                # First: the tail's labels are the newest (index_in takes the first match).
                parts.insert(0, extra.select(["label", "file"]))
        if not parts:
            return None
        return pa.concat_tables([p.cast(_RECORDS) for p in parts])


_RECORDS = pa.schema([("label", pa.string()), ("file", pa.string())])


def _first_per_label(records: pa.Table) -> pa.Table:
    """A row group repeats a label's record in each of its values' lists: keep one."""
    labels = records.column("label").combine_chunks()
    firsts = pc.index_in(pc.unique(labels), value_set=labels)
    return records.take(firsts)


def _without(pairs: pa.Table, dead: frozenset[str]) -> pa.Table:
    if not dead or pairs.num_rows == 0:
        return pairs
    return pairs.filter(pc.invert(pc.is_in(pairs.column("label"), pa.array(list(dead)))))
