"""Counting distinct values for ``dictionary="auto"`` (which columns to dictionary-encode).

``pyarrow.compute.count_distinct`` hashes every value: about 70 ns per value of a chunked
int64 column, 0.07 s per million rows, paid for every low-cardinality integer column of
every row group a compaction or a write encodes. For integers whose range is small (at most
:data:`RANGE_PER_VALUE` times the number of values) a bitmap over the range gives the
same count about ten times faster; everything else is counted by pyarrow.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["count_distinct"]

#: A bitmap is used when the value range is at most this many times the values counted
#: (then it costs about as much memory as the values themselves).
RANGE_PER_VALUE = 8


def count_distinct(column: pa.Array | pa.ChunkedArray) -> int:
    """Distinct non-null values of ``column``: ``pc.count_distinct(column)``."""
    if pa.types.is_integer(column.type):
        present = len(column) - column.null_count
        if present == 0:
            return 0
        bounds = pc.min_max(column)
        lo, hi = bounds["min"].as_py(), bounds["max"].as_py()
        if hi - lo <= RANGE_PER_VALUE * present:
            values = column.drop_null()
            if isinstance(values, pa.ChunkedArray):
                values = values.combine_chunks()
            # In 64 bits (a narrower type's own width would wrap: int8 100 - -100 = -56),
            # and exact there: every value minus lo lies in [0, hi - lo], which fits.
            array = values.to_numpy(zero_copy_only=False)
            wide = np.uint64 if array.dtype == np.uint64 else np.int64
            offsets = array.astype(wide, copy=False) - wide(lo)
            seen = np.zeros(hi - lo + 1, np.bool_)
            seen[offsets] = True
            return int(np.count_nonzero(seen))
    return int(pc.count_distinct(column).as_py())
