"""Fuzzed, malformed and foreign Parquet files: every reader works or raises ParquetryError.

The corpus is vendored from apache/arrow-testing (tests/data/parquet-fuzz) and
apache/parquet-testing (tests/data/parquet-testing); see the README beside each. Anything
that reaches pyarrow runs in a subprocess: pyarrow aborts the process on some inputs.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from parquetry.errors import ParquetryError, SchemaViolation
from parquetry.parquet import ParquetCodec, ParquetField, ParquetSchema, ParquetType
from parquetry.parquet.inspect import inspect_file
from parquetry.store import LocalStore

DATA = Path(__file__).parent.parent / "data"
FUZZ = sorted(p for p in (DATA / "parquet-fuzz").iterdir() if "clusterfuzz" in p.name)
TESTING = sorted(
    p for p in (DATA / "parquet-testing").rglob("*") if p.suffix in (".parquet", ".encrypted")
)
CORPUS = FUZZ + TESTING
#: The six fuzzed footers that made ``parquetry inspect`` exit 70 (wire types ignored).
EXIT_70 = [
    "clusterfuzz-testcase-minimized-parquet-arrow-fuzz-4890562181464064",
    "clusterfuzz-testcase-parquet-arrow-fuzz-4550303804620800",
    "clusterfuzz-testcase-parquet-arrow-fuzz-5139857778409472",
    "clusterfuzz-testcase-parquet-arrow-fuzz-5726376042954752",
    "clusterfuzz-testcase-parquet-arrow-fuzz-5763056434151424.fuzz",
    "clusterfuzz-testcase-parquet-arrow-fuzz-6015129204424704",
]


def test_corpus_is_present() -> None:
    assert len(FUZZ) >= 10
    assert len(TESTING) >= 15
    assert {p.name for p in FUZZ} >= set(EXIT_70)


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.name)
def test_inspect_api_works_or_raises_parquetry_error(path: Path) -> None:
    report = None
    with contextlib.suppress(ParquetryError):
        report = inspect_file(LocalStore(path.parent), path.name)
    if report is not None:
        assert report.to_json()["format"] == "parquetry.inspect/1"


# Skip interpreter finalization once the work is done: an Arrow worker thread freeing a
# Python-owned buffer during it aborts the process (apache/arrow#34314), after every answer.
CLEAN_EXIT = "\nimport os as _os, sys as _sys\n_sys.stdout.flush()\n_os._exit(0)\n"


def _run(script: str, paths: list[Path]) -> list[dict[str, object]]:
    """Run ``script`` over ``paths`` in a fresh interpreter; one JSON line per path."""
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script) + CLEAN_EXIT, *map(str, paths)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    last = lines[-1]["file"] if lines else None
    assert proc.returncode == 0, (
        f"the interpreter died ({proc.returncode}) after {last}: {proc.stderr[-2000:]}"
    )
    assert len(lines) == len(paths)
    return lines


_CLI = """
import json, sys
from typer.testing import CliRunner
from parquetry.cli.app import app
for path in sys.argv[1:]:
    for args in (["inspect", path], ["inspect", "--json", path]):
        result = CliRunner().invoke(app, args)
        lines = [l for l in result.stderr.splitlines() if l.strip()]
    print(json.dumps({"file": path, "code": result.exit_code, "stderr": lines}), flush=True)
"""


def test_cli_inspect_exits_0_or_1_with_one_line() -> None:
    for outcome in _run(_CLI, CORPUS):
        assert outcome["code"] in (0, 1), outcome
        if outcome["code"] == 1:
            stderr = outcome["stderr"]
            assert isinstance(stderr, list)
            assert len(stderr) == 1, outcome
            assert stderr[0].startswith("error: "), outcome


_DECODE = """
import json, sys
from parquetry.errors import ParquetryError, SchemaViolation
from parquetry.parquet import ParquetCodec, ParquetField, ParquetSchema, ParquetType
from parquetry.parquet import ParquetCodec, ParquetField, ParquetSchema, ParquetType
from parquetry.parquet.footer import footer_from_bytes

TYPES = {0: ParquetType.BOOL, 1: ParquetType.INT32, 2: ParquetType.INT64,
         3: ParquetType.TIMESTAMP, 4: ParquetType.FLOAT32, 5: ParquetType.FLOAT64,
         6: ParquetType.BYTES, 7: ParquetType.BYTES}

def schema(data):
    try:
        raw = footer_from_bytes(data)
    except ParquetryError:
        return ParquetSchema([ParquetField("x", ParquetType.INT64, nullable=True)])
    fields, names = [], set()
    elements = (raw.metadata or {}).get(2, [])

    def after(index):  # the element after the subtree at ``index``
        children = elements[index].get(5, 0)
        index += 1
        for _ in range(children):
            index = after(index)
        return index

    index = 1
    while index < len(elements):
        element = elements[index]
        name = element.get(4, b"").decode("utf-8", "replace")
        # Groups (lists, maps, structs) are asked for as strings: read, then refused.
        kind = ParquetType.STRING if element.get(5) else TYPES.get(element.get(1))
        if name and name not in names and kind is not None:
            names.add(name)
            fields.append(ParquetField(name, kind, nullable=True))
        index = after(index)
    return ParquetSchema(fields)

for path in sys.argv[1:]:
    data = open(path, "rb").read()
    outcomes = []
    try:
        codec = ParquetCodec(schema(data))
    except ParquetryError as exc:
        codec = ParquetCodec(ParquetSchema([]))
    for run in (codec.decode, lambda d: list(codec.iter_records(d))):
        try:
            run(data)
            outcomes.append("ok")
        except ParquetryError as exc:
            outcomes.append(type(exc).__name__)
        except Exception as exc:
            outcomes.append("RAW " + type(exc).__name__ + ": " + str(exc)[:200])
    print(json.dumps({"file": path, "outcomes": outcomes}), flush=True)
"""


def test_codec_decode_works_or_raises_parquetry_error() -> None:
    for outcome in _run(_DECODE, CORPUS):
        outcomes = outcome["outcomes"]
        assert isinstance(outcomes, list)
        assert not any(o.startswith("RAW") for o in outcomes), outcome
        assert outcomes[0] == outcomes[1], f"decode and iter_records disagree: {outcome}"


def test_spark_int96_beyond_year_9999_is_a_clear_error() -> None:
    """Spark's INT96 for year 290000: a SchemaViolation naming column and row, not a
    ``datetime`` object with an impossible year."""
    data = (DATA / "parquet-testing" / "data" / "int96_from_spark.parquet").read_bytes()
    codec = ParquetCodec(ParquetSchema([ParquetField("a", ParquetType.TIMESTAMP, nullable=True)]))
    with pytest.raises(SchemaViolation, match=r"column 'a', row 5: .*years 1-9999") as info:
        codec.decode(data)
    assert (info.value.field, info.value.index) == ("a", 5)
    seen: list[dict[str, object]] = []
    with pytest.raises(SchemaViolation, match="row 5") as info:
        seen.extend(codec.iter_records(data, batch_rows=2))
    assert info.value.index == 5
    assert len(seen) == 4  # the batches before the bad one were yielded
    assert seen[2]["a"] == dt.datetime(9999, 12, 31, 3, tzinfo=dt.UTC)


def test_nested_column_read_as_a_string_fails_alike_in_decode_and_iter_records() -> None:
    data = (DATA / "parquet-testing" / "data" / "large_string_map.brotli.parquet").read_bytes()
    codec = ParquetCodec(ParquetSchema([ParquetField("arr", ParquetType.STRING, nullable=True)]))
    with pytest.raises(SchemaViolation, match="arr"):
        codec.decode(data)
    with pytest.raises(SchemaViolation, match="arr"):
        list(codec.iter_records(data))
