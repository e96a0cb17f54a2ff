"""safe_metadata: only footers pyarrow can decode without aborting reach pyarrow."""

from __future__ import annotations

import copy
import decimal
import subprocess
import sys
import textwrap
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.parquet
import pytest

from parquetry.errors import EncryptionError, InvalidFormat
from parquetry.parquet.encryption import EncryptionSettings, InMemoryKms
from parquetry.parquet.files import write_table_bytes
from parquetry.parquet.footer import footer_from_bytes
from parquetry.parquet.footer_check import check_plaintext_footer, pyarrow_hazard, safe_metadata
from parquetry.parquet.options import WriteOptions
from parquetry.parquet.thrift import read_struct, write_struct
from parquetry.parquet.thrift_schema import FILE_META_DATA
from parquetry.store import MemoryStore

TABLE = pa.table(
    {
        "i": pa.array([1, None, 3], pa.int64()),
        "s": ["a", None, "c"],
        "d": pa.array([decimal.Decimal("1.5"), None, decimal.Decimal("2.5")], pa.decimal128(6, 2)),
        "n": [[1], None, [2, 3]],
        "ts": pa.array([1, 2, None], pa.timestamp("us")),
    }
)


def _store(data: bytes) -> MemoryStore:
    store = MemoryStore()
    store.put("f.parquet", data)
    return store


def _patched(patch: Callable[[dict[int, Any]], None]) -> bytes:
    data = write_table_bytes(TABLE, WriteOptions(row_group_size=2))
    length = int.from_bytes(data[-8:-4], "little")
    meta, _ = read_struct(data[-8 - length : -8], 0, FILE_META_DATA)
    patch(meta)
    footer = write_struct(meta, FILE_META_DATA)
    return data[: -8 - length] + footer + len(footer).to_bytes(4, "little") + b"PAR1"


def _column(meta: dict[int, Any], index: int = 0) -> dict[int, Any]:
    chunk: dict[int, Any] = meta[4][0][1][index][3]
    return chunk


def test_a_sound_footer_passes() -> None:
    raw, meta = safe_metadata(_store(_patched(lambda meta: None)), "f.parquet")
    assert meta.num_rows == 3
    assert raw.dropped_fields == 0


HAZARDS: dict[str, Callable[[dict[int, Any]], None]] = {
    "statistics width": lambda meta: _column(meta)[12].__setitem__(6, b"abc"),
    "type": lambda meta: _column(meta).__setitem__(1, 6),
    "histogram": lambda meta: _column(meta)[16].__setitem__(3, [1, 1, 1]),
    "UTF-8": lambda meta: meta[2][1].__setitem__(4, b"\xe2"),
    "chunks": lambda meta: meta[4][0][1].pop(),
}


@pytest.mark.parametrize("hazard", sorted(HAZARDS))
def test_footers_pyarrow_would_abort_on_are_invalid_format(hazard: str) -> None:
    with pytest.raises(InvalidFormat, match=r"f\.parquet: corrupted Parquet footer"):
        safe_metadata(_store(_patched(HAZARDS[hazard])), "f.parquet")


REQUIRED: dict[str, Callable[[dict[int, Any]], None]] = {
    "file version": lambda meta: meta.pop(1),
    "file num_rows": lambda meta: meta.pop(3),
    "schema name": lambda meta: meta[2][1].pop(4),
    "row group num_rows": lambda meta: meta[4][0].pop(3),
    "chunk file_offset": lambda meta: meta[4][0][1][0].pop(2),
    "column codec": lambda meta: _column(meta).pop(4),
    "column data_page_offset": lambda meta: _column(meta, 1).pop(9),
    "page encoding stats page_type": lambda meta: _column(meta)[13][0].pop(1),
    "timestamp unit": lambda meta: meta[2][7][10][8].pop(2),
    "decimal precision": lambda meta: meta[2][3][10][5].pop(2),
}


@pytest.mark.parametrize("field", sorted(REQUIRED))
def test_footers_missing_a_required_field_are_refused_like_pyarrow_does(field: str) -> None:
    """parquetry's Thrift reader takes a footer lacking a field parquet.thrift requires;
    pyarrow refuses it. Compaction's binary copy and staging trusted the former and so
    compacted a file no reader could open (found by test_compact_stage_damage)."""
    data = _patched(REQUIRED[field])
    with pytest.raises(OSError, match="thrift"):
        pa.parquet.read_metadata(pa.BufferReader(data))
    with pytest.raises(InvalidFormat, match=r"lacks required field|fields missing"):
        safe_metadata(_store(data), "f.parquet")


def _reencoded(spec: dict[int, Any], patch: Callable[[dict[int, Any]], None]) -> bytes:
    data = write_table_bytes(TABLE)
    length = int.from_bytes(data[-8:-4], "little")
    meta, _ = read_struct(data[-8 - length : -8], 0, FILE_META_DATA)
    patch(meta)
    footer = write_struct(meta, spec)
    return data[: -8 - length] + footer + len(footer).to_bytes(4, "little") + b"PAR1"


def test_list_elements_of_another_type_are_a_hazard() -> None:
    # A histogram (list<i64>) sent as a list of binaries: pyarrow would read each element as
    # an i64 anyway, seeing other values than parquetry; the footer must not reach it.
    spec = copy.deepcopy(FILE_META_DATA)
    spec[4][1][1][1][3][16][3] = ("list", "binary")  # row_groups[].columns[].meta_data

    def patch(meta: dict[int, Any]) -> None:
        for chunk in meta[4][0][1]:
            chunk[3][16][3] = [b"x", b"y"]

    data = _reencoded(spec, patch)
    with pytest.raises(InvalidFormat, match="wrong type"):
        safe_metadata(_store(data), "f.parquet")


def test_a_field_of_another_type_is_skipped_as_thrift_readers_do() -> None:
    """parquet-mr 1.12 forks write a list in ColumnMetaData field 15 (bloom_filter_length,
    an i32, upstream): every Thrift reader skips it, so the file stays readable."""
    spec = copy.deepcopy(FILE_META_DATA)
    spec[4][1][1][1][3][15] = ("list", "i64")
    data = _reencoded(spec, lambda meta: _column(meta).__setitem__(15, [1, 2]))
    raw, meta = safe_metadata(_store(data), "f.parquet")
    assert raw.dropped_fields == 0
    assert meta.num_rows == 3


@pytest.mark.parametrize("plaintext_footer", [True, False])
def test_encrypted_files_never_reach_pyarrow(plaintext_footer: bool) -> None:
    kms = InMemoryKms({"f": b"F" * 16, "c": b"C" * 16})
    settings = EncryptionSettings(
        footer_key="f", column_keys=(("c", ("s",)),), plaintext_footer=plaintext_footer, kms=kms
    )
    data = write_table_bytes(TABLE, WriteOptions(encryption=settings))
    with pytest.raises(EncryptionError, match="is encrypted"):
        safe_metadata(_store(data), "f.parquet")


_FUZZ = """
import random, sys
import pyarrow as pa
from parquetry.errors import ParquetryError
from parquetry.parquet.files import write_table_bytes
from parquetry.parquet.footer_check import safe_metadata
from parquetry.parquet.options import WriteOptions
from parquetry.store import MemoryStore
sys.path.insert(0, sys.argv[1])
from test_footer_check import TABLE

base = write_table_bytes(TABLE, WriteOptions(row_group_size=2))
length = int.from_bytes(base[-8:-4], "little")
rng = random.Random(int(sys.argv[2]))
store = MemoryStore()
for _ in range(int(sys.argv[3])):
    data = bytearray(base)
    for _ in range(rng.randint(1, 4)):
        data[rng.randrange(len(data) - 8 - length, len(data) - 8)] ^= 1 << rng.randrange(8)
    store.put("f", bytes(data))
    try:
        _raw, meta = safe_metadata(store, "f")
    except ParquetryError:
        continue
    try:  # what validate and report touch; Python errors are theirs to handle
        for rg in range(meta.num_row_groups):
            group = meta.row_group(rg)
            for c in range(group.num_columns):
                column = group.column(c)
                stats = column.statistics
                if stats is not None and stats.has_min_max:
                    stats.min, stats.max
                column.path_in_schema, column.total_compressed_size
        meta.schema.to_arrow_schema()
    except (ValueError, OverflowError):
        pass
print("survived")
"""


# Skip finalization after the work: an Arrow worker thread freeing a Python-owned buffer during
# it aborts the process (apache/arrow#34314).
CLEAN_EXIT = "\nimport os as _os, sys as _sys\n_sys.stdout.flush()\n_os._exit(0)\n"


@pytest.mark.parametrize("seed", [1, 2])
def test_damaged_footers_passed_by_safe_metadata_never_abort_pyarrow(seed: int) -> None:
    """Random bit flips of a footer: whatever safe_metadata lets through, pyarrow survives.

    Seeds 1-7 x 3,000 flips ran clean; each run here does 300 (an abort kills only the child).
    """
    from pathlib import Path

    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            textwrap.dedent(_FUZZ) + CLEAN_EXIT,
            str(Path(__file__).parent),
            str(seed),
            "300",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "survived"


ROW_COUNTS: dict[str, Callable[[dict[int, Any]], None]] = {
    # pyarrow returns a row group's num_rows rows whatever its pages hold: lowered, rows vanish.
    "row group lowered": lambda meta: meta[4][0].__setitem__(3, 1),
    "file raised": lambda meta: meta.__setitem__(3, 4),
    "row group and file lowered": lambda meta: (
        meta[4][0].__setitem__(3, 1),
        meta.__setitem__(3, 2),
    ),
}


@pytest.mark.parametrize("change", sorted(ROW_COUNTS))
def test_row_counts_that_disagree_are_a_hazard(change: str) -> None:
    with pytest.raises(InvalidFormat, match=r"f\.parquet: corrupted Parquet footer \(.*rows"):
        safe_metadata(_store(_patched(ROW_COUNTS[change])), "f.parquet")


def test_a_file_num_rows_of_zero_is_the_old_parquet_rs_quirk_not_a_hazard() -> None:
    """parquet-rs 0.3 wrote num_rows 0 (parquet-testing's repeated_no_annotation.parquet);
    readers go by the row groups, so the file reads whole and must not be refused."""
    data = _patched(lambda meta: meta.__setitem__(3, 0))
    raw = footer_from_bytes(data)
    assert pyarrow_hazard(raw) is None
    assert pa.parquet.ParquetFile(pa.BufferReader(data)).read().num_rows == 3


def test_check_plaintext_footer_compares_the_recorded_rows() -> None:
    raw = footer_from_bytes(_patched(lambda meta: None))
    check_plaintext_footer(raw, "f.parquet", 3)
    check_plaintext_footer(raw, "f.parquet", None)
    with pytest.raises(InvalidFormat, match=r"f\.parquet: .*recorded 4 rows.*says 3"):
        check_plaintext_footer(raw, "f.parquet", 4)
