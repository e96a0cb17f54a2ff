"""The index pairs of files written before their commit, spilled as they are written.

A :class:`~parquetry.dataset.write.FileDescription` carries its file's distinct values of
each indexed column (``index_values``) for the commit, which adds them to the index as
``(value, label)`` pairs (:func:`parquetry.dataset.ops.apply_change`). A rewrite of every
file of a large dataset would hold all of them until its commit: 76 MiB for 10M int64 keys,
381 MiB for 10M UUID texts. :class:`IndexSinks` instead takes each file's values as it is
written into one :class:`~parquetry.dataset.indexspill.PairSink` per column (which spills
sorted runs to local temporary files past ``RUN_PAIRS`` pairs) and hands back the
description without them; the commit then encodes the sink's pairs (:meth:`sink`). The
pairs go in in the order of the files given, so the commit's delta is the one it would
build from the descriptions themselves.

Memory: one run per indexed column (``RUN_PAIRS`` pairs) and the labels of the files taken.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from dataclasses import replace

import pyarrow as pa

from parquetry.dataset.indexspill import RUN_PAIRS, PairSink, label_pairs
from parquetry.dataset.schema import normalise_type
from parquetry.dataset.write import FileDescription
from parquetry.errors import InvalidArgument
from parquetry.parquet.utf8 import first_invalid

__all__ = ["IndexSinks", "checked_values"]


def checked_values(fd: FileDescription, column: str, values: pa.Array) -> pa.Array:
    """``values`` of ``fd``'s indexed ``column``, refused when one is not valid UTF-8 (a
    file another tool wrote is not checked when written: such a value in an index delta
    would make every open of the dataset fail)."""
    if first_invalid(values) is not None:
        raise InvalidArgument(
            f"file {fd.key} (partition {fd.label!r}): a value of indexed column {column!r} "
            "is not valid UTF-8; nothing is committed",
            key=fd.key,
        )
    return values


class IndexSinks:
    """Per indexed column, the pairs of every file :meth:`take` took (thread-safe).

    Use as a context manager, or :meth:`close` it: the spilled runs are removed then."""

    def __init__(self, *, run_pairs: int = RUN_PAIRS) -> None:
        self.run_pairs = run_pairs
        self.sinks: dict[str, PairSink] = {}
        #: Columns whose values every file taken carried (None: no file taken yet).
        self.columns: set[str] | None = None
        self.labels: set[str] = set()
        self.lock = threading.Lock()

    def __enter__(self) -> IndexSinks:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        with self.lock:
            sinks, self.sinks = self.sinks, {}
        for sink in sinks.values():
            sink.close()

    def take(self, files: Iterable[FileDescription]) -> list[FileDescription]:
        """Add the files' index values to the sinks, in order; the files without them."""
        out = []
        with self.lock:
            for fd in files:
                if fd.label in self.labels and not fd.index_values:
                    out.append(fd)  # taken before (a caller's file handed to the engine)
                    continue
                for column, values in fd.index_values.items():
                    t = normalise_type(values.type)
                    sink = self.sinks.get(column)
                    if sink is None:
                        sink = self.sinks[column] = PairSink(t, run_pairs=self.run_pairs)
                    sink.add(label_pairs(fd.label, checked_values(fd, column, values), sink.type))
                have = set(fd.index_values)
                self.columns = have if self.columns is None else self.columns & have
                self.labels.add(fd.label)
                out.append(replace(fd, index_values={}) if fd.index_values else fd)
        return out

    def sink(self, column: str, t: pa.DataType, add: Sequence[FileDescription]) -> PairSink | None:
        """The pairs of ``column`` (type ``t``) of exactly the files ``add``, or None when
        the sinks do not hold them (another file, a column some file did not carry, a
        type a concurrent schema change widened): the commit then takes each file's values
        itself (reading the file when its description no longer has them)."""
        with self.lock:
            if self.columns is None or column not in self.columns:
                return None
            got = self.sinks.get(column)
            if got is None or got.type != t or len(add) != len(self.labels):
                return None
            if any(fd.label not in self.labels for fd in add):
                return None
            return got
