"""``validate`` and ``report`` on parts pyarrow cannot decode: never a process abort.

pyarrow ``std::terminate``s when it touches column-chunk metadata it cannot decode: an
encrypted column without keys, statistics of the wrong width, a chunk whose physical type
contradicts the schema. The commands run in a subprocess, since an abort would kill pytest.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from cli_helpers import local_lake

from parquetry.parquet.encryption import EncryptionSettings, InMemoryKms
from parquetry.parquet.files import write_table_bytes
from parquetry.parquet.options import WriteOptions
from parquetry.parquet.thrift import read_struct, write_struct
from parquetry.parquet.thrift_schema import FILE_META_DATA


def _encrypted(data: bytes, *, plaintext_footer: bool) -> bytes:
    table = pq.read_table(io.BytesIO(data))
    kms = InMemoryKms({"f": b"F" * 16, "c": b"C" * 16})  # TEST ONLY
    column = next(n for n in table.column_names if n != "__index_level_0__")
    settings = EncryptionSettings(
        footer_key="f", column_keys=(("c", (column,)),), plaintext_footer=plaintext_footer, kms=kms
    )
    return write_table_bytes(table, WriteOptions(encryption=settings))


def _patched(data: bytes, patch: Callable[[dict[int, Any]], None]) -> bytes:
    length = int.from_bytes(data[-8:-4], "little")
    meta, _ = read_struct(data[-8 - length : -8], 0, FILE_META_DATA)
    patch(meta)
    footer = write_struct(meta, FILE_META_DATA)
    return data[: -8 - length] + footer + len(footer).to_bytes(4, "little") + b"PAR1"


def _bad_stats(meta: dict[int, Any]) -> None:
    for group in meta[4]:
        for chunk in group[1]:
            stats = chunk[3].get(12)
            if stats is not None and chunk[3][1] in (1, 2, 5):  # fixed-width numbers
                stats[5], stats[6] = b"abc", b"abcdefghijk"
                return
    raise AssertionError("no fixed-width column with statistics")


def _wrong_type(meta: dict[int, Any]) -> None:
    chunk = meta[4][0][1][0][3]
    chunk[1] = 6 if chunk[1] != 6 else 1  # BYTE_ARRAY <-> INT32


DAMAGE: dict[str, Callable[[bytes], bytes]] = {
    "encrypted-column": lambda d: _encrypted(d, plaintext_footer=True),
    "encrypted-footer": lambda d: _encrypted(d, plaintext_footer=False),
    "statistics-width": lambda d: _patched(d, _bad_stats),
    "chunk-type": lambda d: _patched(d, _wrong_type),
}


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from parquetry.cli import main; main()", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


CASES = [("orders", damage) for damage in sorted(DAMAGE)] + [
    ("daily/summary", "encrypted-column"),
    ("daily/summary", "statistics-width"),
]


@pytest.mark.parametrize(("dataset", "damage"), CASES)
def test_validate_and_report_survive_undecodable_parts(
    tmp_path: Path, dataset: str, damage: str
) -> None:
    lake = local_lake(tmp_path)
    root = Path(lake.url)
    part = sorted(p for p in (root / dataset).rglob("*.parquet") if "indices" not in p.parts)[0]
    part.write_bytes(DAMAGE[damage](part.read_bytes()))
    name = part.relative_to(root).as_posix()

    validate = _cli("validate", lake.url, dataset)
    assert validate.returncode == 1, validate.stderr[-2000:]
    assert "Traceback" not in validate.stderr
    problems = [line for line in _lines(validate.stdout) if name in line]
    assert problems, validate.stdout
    if damage.startswith("encrypted"):
        assert any("encrypted" in line for line in problems), problems

    report = _cli("report", lake.url, dataset, "--json")
    assert report.returncode in (0, 1), report.stderr[-2000:]
    assert "Traceback" not in report.stderr
    if report.returncode == 1:
        assert len(_lines(report.stderr)) == 1, report.stderr
        assert _lines(report.stderr)[0].startswith("error: ")
    else:
        doc = json.loads(report.stdout)
        assert any(name in p for p in doc["problems"]), doc["problems"]
