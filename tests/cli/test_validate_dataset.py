"""``validate`` reports what makes kartothek or reads fail (issue 11 §5): a missing or garbage
``_common_metadata``, files whose values do not read as the dataset schema, unreadable row
groups, a stale pointer and bad per-file statistics — each a problem line, exit 1."""

from __future__ import annotations

import io
import json

import pyarrow as pa
import pyarrow.parquet as pq
from cli_helpers import Lake

from parquetry import Dataset
from parquetry.dataset.naming import common_metadata_key, metadata_key, version_key


def _problems(lake: Lake) -> list[str]:
    result = lake.run("validate", "orders")
    assert result.exit_code == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    lines: list[str] = result.stdout.splitlines()
    return lines


def test_missing_common_metadata(local: Lake) -> None:
    local.store.delete(common_metadata_key("orders"))
    assert any("_common_metadata is missing" in p for p in _problems(local))


def test_garbage_common_metadata(local: Lake) -> None:
    local.store.put(common_metadata_key("orders"), b"not parquet")
    problems = _problems(local)
    assert any(p.startswith(common_metadata_key("orders")) for p in problems), problems


def test_common_metadata_of_another_schema(local: Lake) -> None:
    sink = io.BytesIO()
    pq.write_metadata(pa.schema([("other", pa.string())]), sink)
    local.store.put(common_metadata_key("orders"), sink.getvalue())
    problems = _problems(local)
    assert any("columns ['other'] are not in the dataset schema" in p for p in problems)
    assert any("of the dataset schema is missing" in p for p in problems)


def test_values_that_do_not_read_as_the_dataset_schema(local: Lake) -> None:
    ds = Dataset.open(local.store, "orders")
    planned = ds.plan(None).files[0]
    original = pq.read_table(io.BytesIO(local.store.get(planned.key)))
    # Same column names and type classes, but values that overflow the dataset's types.
    fields = []
    columns = []
    for field, column in zip(original.schema, original.columns, strict=True):
        if pa.types.is_integer(field.type):
            fields.append(pa.field(field.name, pa.uint64()))
            columns.append(pa.array([2**64 - 1] * len(column), pa.uint64()))
        else:
            fields.append(field)
            columns.append(column)
    bad = pa.table(columns, schema=pa.schema(fields))
    sink = io.BytesIO()
    pq.write_table(bad, sink)
    local.store.put(planned.key, sink.getvalue())
    with_read_failure = [p for p in _problems(local) if "cannot be read" in p]
    assert with_read_failure, _problems(local)
    assert with_read_failure[0].startswith(planned.key)


def test_unreadable_row_group(local: Lake) -> None:
    ds = Dataset.open(local.store, "orders")
    planned = ds.plan(None).files[0]
    data = bytearray(local.store.get(planned.key))
    meta = pq.read_metadata(io.BytesIO(bytes(data)))
    col = meta.row_group(0).column(0)
    start = col.data_page_offset
    for i in range(start, start + col.total_compressed_size):
        data[i] = 0xFF  # the page bytes, not the footer: the footer check passes
    local.store.put(planned.key, bytes(data))
    problems = _problems(local)
    assert any(p.startswith(f"{planned.key}: cannot be read") for p in problems), problems


def test_stale_pointer(local: Lake) -> None:
    ds = Dataset.open(local.store, "orders")
    old_pointer = local.store.get(metadata_key("orders"))
    ds.append(pa.table({n: ds.read().column(n)[:2] for n in ds.schema.names}, schema=ds.schema))
    newest = Dataset.open(local.store, "orders").version
    assert local.store.exists(version_key("orders", newest))
    local.store.put(metadata_key("orders"), old_pointer)  # as if the pointer update was lost
    problems = _problems(local)
    assert any(f"the newest version document is {newest}" in p for p in problems), problems
    assert local.run("repair", "orders").exit_code == 0
    assert local.run("validate", "orders").exit_code == 0


def test_bad_statistics_entry_is_a_problem_not_a_crash(local: Lake) -> None:
    doc = json.loads(local.store.get(metadata_key("orders")))
    label = next(iter(doc["parquetry"]["files"]))
    doc["parquetry"]["files"][label] = "[1, 2, {]"
    data = json.dumps(doc).encode()
    local.store.put(metadata_key("orders"), data)
    local.store.put(version_key("orders", doc["parquetry"]["version"]["number"]), data)
    local.store.delete("orders/_head.json")  # format 2: else the head's copy is what is read
    problems = _problems(local)
    assert any(f"parquetry.files[{label!r}]" in p for p in problems), problems


def test_common_metadata_with_invalid_utf8_names(local: Lake) -> None:
    """Found by the corruption fuzzer: a flipped bit in a column name (UnicodeDecodeError)."""
    sink = io.BytesIO()
    pq.write_metadata(pa.schema([("zzzzzz", pa.int64())]), sink, store_schema=False)
    data = sink.getvalue().replace(b"zzzzzz", b"\xf0zzzzz")
    local.store.put(common_metadata_key("orders"), data)
    problems = _problems(local)
    assert any(p.startswith(common_metadata_key("orders")) for p in problems), problems
