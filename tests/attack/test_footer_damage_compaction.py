"""Attacks on compaction (``binary_copy="auto"`` and True) with one input whose footer is
damaged (bit flips, replaced bytes, rewritten fields) among healthy ones. Either the
compaction raises a ParquetryError and commits nothing, or the compacted version reads as the
dataset read before (or, when that read failed, as the rows the file held before the damage).

Found: a row group whose row count was lowered (30 → 26) while its chunks still held 30
values was staged (``"auto"``) with other small files: pyarrow trusted the row count and the
rows shifted between the staged files (4 rows of a *healthy* file lost, 4 damaged ones kept).
A PageEncodingStats entry without its required ``count`` passed parquetry's footer reader and
was copied verbatim by ``binary_copy=True``: the committed output's footer did not parse, so
the healthy rows merged into it became unreadable.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from parquetry.dataset import Dataset
from parquetry.errors import InvalidFormat, ParquetryError
from parquetry.parquet.footer import MAGIC, footer_from_bytes
from parquetry.parquet.thrift import write_struct
from parquetry.parquet.thrift_schema import FILE_META_DATA
from parquetry.store import MemoryStore


def _rows(start: int) -> pa.Table:
    ids = range(start, start + 30)
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "s": [f"v{i % 5}" for i in ids],
            "x": pa.array([i * 0.5 for i in ids]),
            "l": [[i, i + 1] for i in ids],
        }
    )


def _dataset() -> tuple[MemoryStore, Dataset, list[str]]:
    store = MemoryStore()
    ds = Dataset.create(store, "c", _rows(0))
    for k in range(1, 4):
        ds = ds.append(_rows(30 * k))
    keys = sorted(m.key for m in store.list("c/table") if m.key.endswith(".parquet"))
    return store, ds, keys


def _canon(table: pa.Table) -> list[str]:
    return sorted(map(repr, table.to_pylist()))


def _rewrite_footer(data: bytes, change: Callable[[dict[int, Any]], None]) -> bytes:
    raw = footer_from_bytes(data)
    assert raw.metadata is not None
    change(raw.metadata)
    footer = write_struct(raw.metadata, FILE_META_DATA)
    body = data[: len(data) - raw.footer_length - 8]
    return body + footer + struct.pack("<i", len(footer)) + MAGIC


def _compacts_honestly(
    store: MemoryStore, ds: Dataset, victim: str, original: list[str], mode: Any
) -> str:
    """Compact; check the outcome against the oracle of the module doc (``original``: the
    rows before the damage); say which it was."""
    try:
        before: list[str] | None = _canon(Dataset.open(store, "c").read())
    except ParquetryError:
        before = None
    version = ds.version
    try:
        out = ds.compact(target_file_size=1 << 20, binary_copy=mode)
    except ParquetryError as exc:
        error = exc
    else:
        assert _canon(out.read()) == (before if before is not None else original)
        return "compacted"
    assert Dataset.open(store, "c").version == version  # nothing committed
    if isinstance(error, InvalidFormat) and "damaged" in str(error):
        assert victim in str(error)
    return "refused"


def _with_damage(damage: Callable[[bytes], bytes], index: int = 2) -> tuple[Any, ...]:
    store, ds, keys = _dataset()
    victim = keys[index]
    original = _canon(ds.read())
    store.put(victim, damage(store.get(victim)))
    return store, ds, victim, original


@pytest.mark.parametrize("mode", ["auto", True])
def test_a_lowered_row_count_does_not_shift_rows_between_files(mode: Any) -> None:
    def lower(meta: dict[int, Any]) -> None:
        meta[4][0][3] = 26
        meta[3] = 26

    store, ds, victim, original = _with_damage(lambda d: _rewrite_footer(d, lower))
    _compacts_honestly(store, ds, victim, original, mode)


@pytest.mark.parametrize("mode", ["auto", True])
def test_an_encoding_stats_entry_without_its_count_is_not_copied(mode: Any) -> None:
    def drop_count(meta: dict[int, Any]) -> None:
        for chunk in meta[4][0][1]:
            stats = chunk[3].get(13)
            if stats:
                stats[-1].pop(3)

    store, ds, victim, original = _with_damage(lambda d: _rewrite_footer(d, drop_count))
    outcome = _compacts_honestly(store, ds, victim, original, mode)
    if mode is True:  # copied, the entry would make the output unreadable
        assert outcome == "refused"


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    seed=st.integers(0, 2**32 - 1),
    kind=st.sampled_from(["flip", "byte", "splice"]),
    mode=st.sampled_from(["auto", True, False]),
)
def test_one_damaged_footer_is_refused_or_changes_nothing_the_read_did_not(
    seed: int, kind: str, mode: Any
) -> None:
    rng = random.Random(seed)

    def damage(data: bytes) -> bytes:
        n = struct.unpack("<i", data[-8:-4])[0]
        body, footer = data[: -8 - n], bytearray(data[-8 - n : -8])
        at = rng.randrange(len(footer))
        if kind == "flip":
            footer[at] ^= 1 << rng.randrange(8)
        elif kind == "byte":
            footer[at] = rng.randrange(256)
        else:
            footer[at : at + rng.randint(1, 4)] = rng.randbytes(rng.randint(0, 4))
        return body + bytes(footer) + struct.pack("<i", len(footer)) + MAGIC

    store, ds, victim, original = _with_damage(damage, rng.randrange(4))
    _compacts_honestly(store, ds, victim, original, mode)
