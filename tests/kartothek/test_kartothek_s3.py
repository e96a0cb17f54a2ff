"""kartothek on S3 sees the raw object keys: parquetry writes to S3 (moto), the objects are
mirrored key-for-key to a directory kartothek reads and updates, and kartothek's result is
mirrored back for parquetry to read from S3. Catches any key encoding difference (``%``,
``=``, ``/``, non-ASCII) between parquetry's S3 store and what the metadata names."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import boto3
import pytest
from kt_harness import Kartothek
from kt_sample_data import (
    COLUMNS,
    INDEXED,
    PARTITION_ON,
    SCHEMA,
    SLASHED,
    SPECIAL,
    queries,
    sample_table,
)
from kt_support import (
    canonical_records,
    check_index,
    frame,
    oracle,
    rows_of_kartothek,
    rows_of_table,
    to_driver_predicates,
    to_driver_scope,
)

from parquetry import Dataset
from parquetry.store import open_store
from parquetry.testing.moto import MotoServer

pytestmark = [pytest.mark.kartothek, pytest.mark.s3]


def _client(server: MotoServer) -> Any:
    opts = server.options()
    return boto3.client(
        "s3",
        endpoint_url=opts["endpoint"],
        aws_access_key_id=opts["access_key_id"],
        aws_secret_access_key=opts["secret_access_key"],
        region_name=opts.get("region", "us-east-1"),
    )


def _keys(client: Any, bucket: str) -> set[str]:
    keys: set[str] = set()
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        keys.update(o["Key"] for o in page.get("Contents", []))
    return keys


def s3_to_dir(client: Any, bucket: str, root: Path) -> None:
    """Make ``root`` hold exactly the bucket's objects, file path = raw key."""
    keys = _keys(client, bucket)
    for path in [p for p in root.rglob("*") if p.is_file()]:
        if path.relative_to(root).as_posix() not in keys:
            path.unlink()
    for key in keys:
        path = root / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(client.get_object(Bucket=bucket, Key=key)["Body"].read())


def dir_to_s3(client: Any, bucket: str, root: Path) -> None:
    """Make the bucket hold exactly ``root``'s files, raw key = relative path."""
    local = {p.relative_to(root).as_posix(): p for p in root.rglob("*") if p.is_file()}
    for key in _keys(client, bucket) - set(local):
        client.delete_object(Bucket=bucket, Key=key)
    for key, path in local.items():
        client.put_object(Bucket=bucket, Key=key, Body=path.read_bytes())


def test_kartothek_and_parquetry_share_a_dataset_on_s3(
    kartothek: Kartothek, moto_server: MotoServer, tmp_path: Path
) -> None:
    bucket = moto_server.create_bucket()
    store = open_store(moto_server.url(bucket), **moto_server.options())
    client = _client(moto_server)
    root = tmp_path / "mirror"
    root.mkdir()

    first = sample_table(40, seed=101, countries=("DE", SLASHED, SPECIAL))
    Dataset.create(store, "s3ds", first, partition_on=PARTITION_ON, secondary_indices=INDEXED)
    records = canonical_records(first)
    s3_to_dir(client, bucket, root)

    added = sample_table(8, seed=102, countries=("NL",), first_id=500)
    results = kartothek.run(
        root,
        [
            {"op": "inspect", "uuid": "s3ds"},
            *[
                {"op": "read", "uuid": "s3ds", "predicates": to_driver_predicates(p)}
                for p in queries(SLASHED)
            ],
            {
                "op": "update",
                "uuid": "s3ds",
                "frames": [frame(added)],
                "delete_scope": to_driver_scope([{"country": SLASHED, "year": 2021}]),
                "partition_on": PARTITION_ON,
            },
            {"op": "gc", "uuid": "s3ds"},
        ],
    )
    check_index(results[0], records, SCHEMA, INDEXED)
    for predicates, result in zip(queries(SLASHED), results[1:-2], strict=True):
        assert rows_of_kartothek(result, COLUMNS, SCHEMA) == oracle(
            records, predicates, COLUMNS, SCHEMA
        ), predicates

    dir_to_s3(client, bucket, root)
    after = [
        r for r in records if not (r["country"] == SLASHED and r["year"] == 2021)
    ] + canonical_records(added)
    ds = Dataset.open(store, "s3ds")
    for predicates in [None, *queries(SLASHED)]:
        got = rows_of_table(ds.read(predicates=predicates), COLUMNS, SCHEMA)
        assert got == oracle(after, predicates, COLUMNS, SCHEMA), predicates

    more = sample_table(8, seed=103, countries=(SLASHED,), years=(2022,), first_id=900)
    ds.append(more)
    final = after + canonical_records(more)
    s3_to_dir(client, bucket, root)
    results = kartothek.run(
        root,
        [
            {"op": "read", "uuid": "s3ds"},
            {"op": "read", "uuid": "s3ds", "predicates": [[["country", "==", SLASHED]]]},
        ],
    )
    assert rows_of_kartothek(results[0], COLUMNS, SCHEMA) == oracle(final, None, COLUMNS, SCHEMA)
    slashed = [[("country", "==", SLASHED)]]
    assert rows_of_kartothek(results[1], COLUMNS, SCHEMA) == oracle(final, slashed, COLUMNS, SCHEMA)
