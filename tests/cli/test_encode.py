"""``parquetry encode``: JSON lines through the record codec to one Parquet file, locally
and on S3; bad input names the line and field and writes nothing."""

from __future__ import annotations

import datetime as dt
import decimal
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from cli_helpers import Lake, invoke, one_error_line
from typer.testing import CliRunner

from parquetry.cli import cmd_codec
from parquetry.cli.app import app
from parquetry.codec import ParquetCodec, ParquetSchema
from parquetry.store import open_store

SCHEMA = {
    "fields": [
        {"name": "id", "type": "int64"},
        {"name": "at", "type": "timestamp"},
        {"name": "amount", "type": "decimal(10,2)", "nullable": True},
        {"name": "tag", "type": "string", "nullable": True},
    ]
}


def _record(i: int) -> dict[str, object]:
    return {
        "id": i,
        "at": f"2024-01-01T00:00:{i % 60:02d}+01:00",
        "amount": f"{i}.25",
        "tag": None if i % 3 else f"t{i}",
        "ignored": [1, 2],  # extra fields are ignored, as the codec's rules say
    }


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(SCHEMA))
    lines = tmp_path / "events.jsonl"
    lines.write_text(
        "".join(json.dumps(_record(i)) + "\n" + ("\n" if i == 5 else "") for i in range(70_000))
    )
    return schema, lines


def _check_file(data: bytes) -> None:
    codec = ParquetCodec(ParquetSchema.from_json(SCHEMA))
    rows = codec.decode(data)
    assert len(rows) == 70_000
    assert rows[61] == {
        "id": 61,
        "at": dt.datetime(2023, 12, 31, 23, 0, 1, tzinfo=dt.UTC),
        "amount": decimal.Decimal("61.25"),
        "tag": None,
    }
    assert rows[3]["tag"] == "t3"


def test_encode_local_file(files: tuple[Path, Path], tmp_path: Path) -> None:
    schema, lines = files
    out = tmp_path / "events.parquet"
    result = invoke("encode", str(schema), str(lines), str(out), "--row-group-size", "30000")
    assert result.exit_code == 0, result.output
    assert "wrote 70,000 rows in 3 row groups" in result.output
    _check_file(out.read_bytes())
    md = pq.ParquetFile(out).metadata
    assert md.row_group(0).column(0).compression == "ZSTD"


def test_encode_into_a_lake_with_json_summary(files: tuple[Path, Path], lake: Lake) -> None:
    schema, lines = files
    target = f"{lake.url.rstrip('/')}/events.parquet"
    result = lake.run_raw("encode", str(schema), str(lines), target, "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert (summary["rows"], summary["output"], summary["row_groups"]) == (70_000, target, 1)
    data = lake.store.get("events.parquet")
    assert summary["bytes"] == len(data)
    _check_file(data)


def test_a_bad_record_names_its_line_and_writes_nothing(
    files: tuple[Path, Path], tmp_path: Path
) -> None:
    schema, lines = files
    records = lines.read_text().splitlines(keepends=True)
    # Line 40,001 of the file (one blank line after record 5): the second batch.
    bad_line = 40_001
    records[bad_line - 1] = json.dumps({"id": 1.5, "at": "2024-01-01T00:00:00Z"}) + "\n"
    lines.write_text("".join(records))
    out = tmp_path / "bad.parquet"
    result = invoke("encode", str(schema), str(lines), str(out))
    assert result.exit_code == 1
    message = one_error_line(result)
    assert f"line {bad_line}: field 'id' (int64): 1.5 has a fractional part" in message
    assert not out.exists()
    assert bad_line > cmd_codec.BATCH_RECORDS  # the line number crossed a batch boundary


@pytest.mark.parametrize(
    ("schema_text", "stdin", "message"),
    [
        (json.dumps(SCHEMA), '{"id": 1, "at": "2024-01-01T00:00:00Z"}\n[1, 2]\n', "line 2"),
        (json.dumps(SCHEMA), "not json\n", "line 1: not valid JSON"),
        (json.dumps(SCHEMA), '{"at": "2024-01-01T00:00:00Z"}\n', "'id' is missing"),
        ('{"fields": [{"name": "id"}]}', "", "schema field 0"),
        ('{"fields": [{"name": "id", "type": "int99"}]}', "", "invalid type 'int99'"),
        ("{not json", "", "not a JSON schema document"),
    ],
    ids=["not-a-mapping", "bad-json", "missing-field", "no-type", "bad-type", "bad-schema-json"],
)
def test_bad_input_is_one_error_line(
    tmp_path: Path, schema_text: str, stdin: str, message: str
) -> None:
    schema = tmp_path / "schema.json"
    schema.write_text(schema_text)
    out = tmp_path / "out.parquet"
    result = CliRunner().invoke(app, ["encode", str(schema), "-", str(out)], input=stdin)
    assert result.exit_code == 1
    assert message in one_error_line(result)
    assert not out.exists()


def test_empty_input_writes_a_valid_empty_file(tmp_path: Path) -> None:
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(SCHEMA))
    (tmp_path / "empty.jsonl").write_text("\n\n")
    result = invoke("encode", str(schema), str(tmp_path / "empty.jsonl"), "memory://enc/e.parquet")
    assert result.exit_code == 0, result.output
    data = open_store("memory://enc").get("e.parquet")
    assert pq.ParquetFile(pa.BufferReader(data)).metadata.num_rows == 0
