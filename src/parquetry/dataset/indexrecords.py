"""File records a checkpoint carries from the index pieces it reads into those it writes
(:meth:`parquetry.dataset.indexstate.IndexState.checkpoint`; records: piecefiles.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from parquetry.dataset.indexfile import IndexFooter
from parquetry.dataset.indexpieces import normalise_pairs, read_piece_table
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


def _without(pairs: pa.Table, dead: frozenset[str]) -> pa.Table:
    if not dead or pairs.num_rows == 0:
        return pairs
    return pairs.filter(pc.invert(pc.is_in(pairs.column("label"), pa.array(list(dead)))))
