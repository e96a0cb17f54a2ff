"""Fast Arrow → Python conversion for decoded records.

``to_pylist`` on a UTC timestamp column builds each datetime through a ``zoneinfo`` lookup
(about 4 µs a value). Here timestamps become aware ``datetime`` objects with
``datetime.timezone.utc`` as ``epoch + timedelta``, the timedeltas built in bulk by numpy:
about fifteen times faster. Rows are assembled by a dict display compiled once
per field list.
"""

from __future__ import annotations

import datetime as dt
import itertools
import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

__all__ = ["column_values", "row_builder"]

_UTC = dt.UTC
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=_UTC)
_US_PER_HOUR = 3_600_000_000
_US_PER_MINUTE = 60_000_000
_US_PER_SECOND = 1_000_000


def _utc_datetimes(array: pa.Array) -> list[Any]:
    """Aware UTC datetimes (None for nulls) from a timestamp[us] array."""
    micros = array.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False)
    try:
        # numpy builds timedeltas in C; epoch + timedelta is one C call per value.
        deltas = micros.astype("timedelta64[us]").tolist()
        values: list[Any] = list(map(operator.add, itertools.repeat(_EPOCH), deltas))
    except OverflowError:  # beyond years 1..9999: the pickle-state path, as before
        values = _state_datetimes(micros)
    if array.null_count:
        for position in np.flatnonzero(array.is_null().to_numpy(zero_copy_only=False)):
            values[position] = None
    return values


def _state_datetimes(micros: np.ndarray[Any, Any]) -> list[Any]:
    stamps = micros.astype("datetime64[us]")
    days = stamps.astype("datetime64[D]")
    months = days.astype("datetime64[M]")
    years = days.astype("datetime64[Y]")
    year = years.astype(np.int64) + 1970
    month = (months - years).astype(np.int64) + 1
    day = (days - months).astype(np.int64) + 1
    rest = (stamps - days).astype(np.int64)
    hour, rest = np.divmod(rest, _US_PER_HOUR)
    minute, rest = np.divmod(rest, _US_PER_MINUTE)
    second, micro = np.divmod(rest, _US_PER_SECOND)
    # datetime's pickle state: year (2 bytes), month, day, hour, minute, second, µs (3 bytes).
    state = np.empty((len(micros), 10), dtype=np.uint8)
    state[:, 0] = year >> 8
    state[:, 1] = year & 0xFF
    state[:, 2] = month
    state[:, 3] = day
    state[:, 4] = hour
    state[:, 5] = minute
    state[:, 6] = second
    state[:, 7] = micro >> 16
    state[:, 8] = (micro >> 8) & 0xFF
    state[:, 9] = micro & 0xFF
    states = state.view("V10").ravel().tolist()
    make: Any = dt.datetime  # the (state bytes, tzinfo) form is the unpickling constructor
    values: list[Any] = list(map(make, states, itertools.repeat(_UTC, len(states))))
    return values


def column_values(column: pa.ChunkedArray | pa.Array) -> list[Any]:
    """Python values of one column; UTC timestamps take the fast path above."""
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    ctype = array.type
    if pa.types.is_timestamp(ctype) and ctype.unit == "us" and ctype.tz in ("UTC", "+00:00"):
        return _utc_datetimes(array)
    values: list[Any] = array.to_pylist()
    return values


def row_builder(names: Sequence[str]) -> Callable[[list[list[Any]]], list[dict[str, Any]]]:
    """A function turning columns (in ``names`` order) into row dicts, compiled once."""
    if not names:
        return lambda columns: []
    variables = [f"c{i}" for i in range(len(names))]
    entries = ", ".join(f"{name!r}: {var}" for name, var in zip(names, variables, strict=True))
    # Generated code holds only repr()'d names and fixed variable names: nothing injectable.
    source = (
        f"lambda columns: [{{{entries}}} for {', '.join(variables)}"
        f"{',' if len(variables) == 1 else ''} in zip(*columns)]"
    )
    builder: Callable[[list[list[Any]]], list[dict[str, Any]]] = eval(source, {"zip": zip})
    return builder
