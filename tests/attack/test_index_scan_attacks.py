"""Attacks on scanning index lookups (indexscan.py) and the pieces they read: damaged index
files written by another tool (kartothek, format 1) and damaged piece bodies must raise a
ParquetryError naming the file, never abort the interpreter or leak a raw error; random
predicates on many tiny row groups and requests find exactly the labels a brute-force scan
of the pairs finds."""

from __future__ import annotations

import io
import math
import operator
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings

from parquetry.dataset import indexpieces
from parquetry.dataset.indexfile import footer_of
from parquetry.dataset.indexpieces import search_piece, write_piece
from parquetry.dataset.indexscan import scan_piece
from parquetry.dataset.indices import IndexLookup
from parquetry.dataset.predicates import Literal
from parquetry.errors import MetadataCorrupted
from parquetry.store import MemoryStore

KEY = "u/indices/k/2020-01-01T00%3A00%3A00.000000.by-dataset-index.parquet"


def _index_file_with_a_bad_chunk_type() -> bytes:
    """A kartothek-shaped index file (``k``, ``partition``) whose first column chunk
    metadata names a physical type that does not exist (one byte of the footer changed):
    pyarrow ``std::terminate``s when it builds that chunk's metadata."""
    sink = io.BytesIO()
    table = pa.table(
        {"k": pa.array([1, 2, 3], pa.int64()), "partition": [["p=0/a"], ["p=0/b"], ["p=1/c"]]}
    )
    pq.write_table(table, sink, row_group_size=2)
    data = bytearray(sink.getvalue())
    # ColumnChunk.meta_data (struct, field 3) opening with type (i32, field 1) = INT64.
    at = data.rfind(b"\x1c\x15\x04\x19")
    assert at > 0
    data[at + 2] = 0x10  # zigzag 8: no such physical type
    return bytes(data)


def test_a_foreign_index_file_with_a_bad_chunk_type_is_named_not_an_abort() -> None:
    # IndexState.legacy parsed the tail of a format-1/kartothek index file with pyarrow,
    # whose column-chunk metadata of an unknown physical type aborts the process (SIGABRT)
    # when the statistics are read: every scanning lookup killed the interpreter. In a
    # child process, so that the abort fails this test instead of killing the run.
    code = textwrap.dedent(
        f"""
        import sys
        import pyarrow as pa
        sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})
        from tests.attack.test_index_scan_attacks import KEY, _index_file_with_a_bad_chunk_type
        from parquetry.dataset.indices import IndexLookup
        from parquetry.dataset.predicates import Literal
        from parquetry.errors import ParquetryError
        from parquetry.store import MemoryStore

        store = MemoryStore()
        store.put(KEY, _index_file_with_a_bad_chunk_type())
        for op, value in [("!=", 2), ("is not null", None), (">=", 1), ("==", 2)]:
            lookup = IndexLookup(store, "k", KEY, None, pa.int64())
            try:
                got = lookup.lookup(Literal(column="k", op=op, value=value, type=pa.int64()))
            except ParquetryError as exc:
                print(op, type(exc).__name__, exc, flush=True)
            else:
                print(op, "found", sorted(got), flush=True)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert len(lines) == 4, done.stdout
    for line in lines[:3]:
        assert " MetadataCorrupted " in line, line
        assert KEY in line, line
    # ``==`` reads the file whole: pyarrow's reader never builds the damaged chunk's
    # metadata there, and the values are intact.
    assert lines[3] == "== found ['p=0/b']", lines[3]


def _not_utf8_index() -> bytes:
    """An index file (``k``, ``partition``) whose label of value 2 is not UTF-8."""
    labels = pa.array([b"aa", b"\xb7\xb7", b"cc"], pa.binary()).view(pa.string())
    table = pa.table(
        {
            "k": pa.array([1, 2, 3], pa.int64()),
            "partition": pa.ListArray.from_arrays(pa.array([0, 1, 2, 3], pa.int32()), labels),
        }
    )
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()


def test_a_foreign_index_file_whose_labels_are_not_utf8_is_named() -> None:
    # IndexLookup (format-1/kartothek index files) turned the labels of a whole or ranged
    # read into Python strings outside any error translation: a raw UnicodeDecodeError.
    store = MemoryStore()
    data = _not_utf8_index()
    store.put(KEY, data)
    for footer in (None, footer_of(KEY, data)):
        for op, value in [("==", 2), ("in", (2, 3)), ("!=", 1), ("<", 3)]:
            lookup = IndexLookup(store, "k", KEY, footer, pa.int64())
            with pytest.raises(MetadataCorrupted, match=KEY):
                lookup.lookup(Literal(column="k", op=op, value=value, type=pa.int64()))


def test_a_piece_whose_labels_are_not_utf8_is_named() -> None:
    # The labels of a ranged read were decoded outside search_piece's error translation:
    # a piece whose label bytes are not UTF-8 (a damaged page, another writer) raised a raw
    # UnicodeDecodeError out of the lookup instead of naming the piece.
    data = _not_utf8_index()
    store = MemoryStore()
    key = "u/_indices/k/bad.parquet"
    store.put(key, data)
    footer = footer_of(key, data)
    for op in ("!=", "==", "in", "is not null"):
        # Every lookup matches the label that is not UTF-8 (value 2).
        value: Any = {"!=": 1, "==": 2, "in": (2, 3), "is not null": None}[op]
        lit = Literal(column="k", op=op, value=value, type=pa.int64())
        with pytest.raises(MetadataCorrupted, match=key):
            search_piece(store, "k", footer, lit, pa.int64())


_OPS = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
_VALUES: dict[str, tuple[pa.DataType, st.SearchStrategy[Any]]] = {
    "int8": (pa.int8(), st.sampled_from([-128, 127, 0, -1, 1]) | st.integers(-128, 127)),
    "uint64": (pa.uint64(), st.sampled_from([0, 2**63 - 1, 2**63, 2**64 - 1])),
    "int64": (pa.int64(), st.sampled_from([-(2**63), 2**63 - 1, 0]) | st.integers(-3, 3)),
    "string": (
        pa.string(),
        st.sampled_from(["", "a", "é", "\U0010ffff", "z" * 300]) | st.text("ab", max_size=3),
    ),
    "float64": (pa.float64(), st.sampled_from([-0.0, 0.0, 1.5, -2.0, math.inf, -math.inf])),
}


@st.composite
def _scan_case(draw: st.DrawFn) -> tuple[pa.DataType, list[tuple[Any, str]], Literal]:
    t, values = _VALUES[draw(st.sampled_from(sorted(_VALUES)))]
    # Labels include huge ones (a row group of a few values then spans many bytes).
    label = st.builds(
        lambda n, long: ("L" * 400 if long else "") + f"p={n}", st.integers(0, 4), st.booleans()
    )
    pairs = draw(st.lists(st.tuples(values, label), max_size=16))
    op = draw(st.sampled_from([*_OPS, "in", "is not null"]))
    value: Any = (
        None
        if op == "is not null"
        else tuple(draw(st.lists(values, min_size=1, max_size=3)))
        if op == "in"
        else draw(values)
    )
    return t, pairs, Literal(column="k", op=op, value=value, type=t)


def _brute_force(pairs: list[tuple[Any, str]], lit: Literal) -> set[str]:
    if lit.op == "is not null":
        return {label for _, label in pairs}
    if lit.op == "in":
        return {label for v, label in pairs if v in lit.value}
    return {label for v, label in pairs if _OPS[lit.op](v, lit.value)}


@settings(max_examples=60, deadline=None)
@given(
    case=_scan_case(),
    group_pairs=st.integers(1, 4),
    request_bytes=st.sampled_from([1, 200, 2 << 20]),
)
def test_a_lookup_finds_what_a_brute_force_scan_of_the_pairs_finds(
    case: tuple[pa.DataType, list[tuple[Any, str]], Literal],
    group_pairs: int,
    request_bytes: int,
) -> None:
    """Pieces of one to a few pairs per row group (empty and single-group pieces too), at
    type edges, scanned in requests of one group or many, and searched by search_piece."""
    t, pairs, lit = case
    store = MemoryStore()
    table = pa.table({"value": pa.array([v for v, _ in pairs], t), "label": [x for _, x in pairs]})
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(indexpieces, "PIECE_ROW_GROUP", group_pairs)
        footer = write_piece(store, "u", "k", table)
    want = _brute_force(pairs, lit)
    assert scan_piece(store, "k", footer, lit, t, request_bytes=request_bytes)[0] == want
    assert search_piece(store, "k", footer, lit, t)[0] == want
