"""DatasetManifest: field validation, JSON round trips and byte-compatibility with
remote-store 0.33.0's manifest."""

from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from remote_store.ext.parquet import DatasetManifest as RsManifest

from parquetry import DatasetManifest, ManifestCorrupted, ParquetryError
from parquetry.snapshot import StagedPart

GOOD = {
    "dataset_key": "ds/x",
    "parts": ["data.parquet"],
    "row_count": 3,
    "schema_hash": "abcdef0123456789",
    "compression": "zstd",
    "created_at_utc": "2026-03-28T12:00:00Z",
}


def with_(**changes: object) -> str:
    return json.dumps({**GOOD, **changes})


def test_roundtrip_all_fields() -> None:
    m = DatasetManifest(**GOOD, run_id="run-1", metadata={"source": "unit-test"})  # type: ignore[arg-type]
    assert DatasetManifest.from_json(m.to_json()) == m


def test_frozen() -> None:
    m = DatasetManifest.from_json(json.dumps(GOOD))
    with pytest.raises(dataclasses.FrozenInstanceError, match=r"cannot|frozen"):
        m.dataset_key = "other"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        ("not valid json {{{", "[Jj]son|[Pp]ars"),
        ('{"dataset_key": "x", "parts": []}', "missing required fields: row_count, schema_hash"),
        ("[1, 2, 3]", "object"),
        ('"just a string"', "object"),
        ("null", "object"),
        ("{}", "dataset_key, parts, row_count, schema_hash, compression, created_at_utc"),
        (with_(row_count=True), "row_count"),
        (with_(row_count=3.0), "row_count"),
        (with_(row_count="3"), "row_count"),
        (with_(run_id=42), "run_id"),
        (with_(metadata="not-a-dict"), "metadata"),
        (with_(metadata={"a": 1}), "metadata"),
        (with_(metadata={"a": None}), "metadata"),
        (with_(dataset_key=99), "dataset_key"),
        (with_(parts="not-a-list"), "parts"),
        (with_(parts=["a", 1]), "parts"),
        (with_(schema_hash=42), "schema_hash"),
        (with_(compression=["zstd"]), "compression"),
        (with_(created_at_utc=20260101), "created_at_utc"),
    ],
)
def test_from_json_rejects(text: str, pattern: str) -> None:
    with pytest.raises(ManifestCorrupted, match=pattern) as info:
        DatasetManifest.from_json(text)
    assert isinstance(info.value, ParquetryError)
    assert info.value.reason


def test_from_json_names_every_bad_field() -> None:
    with pytest.raises(ManifestCorrupted) as info:
        DatasetManifest.from_json(with_(row_count=False, run_id=1, compression=None))
    for field in ("row_count", "run_id", "compression"):
        assert field in str(info.value)


def test_from_json_non_utf8_bytes() -> None:
    with pytest.raises(ManifestCorrupted, match="JSON"):
        DatasetManifest.from_json(b"\xff\xfe{\x00")


def test_from_json_none_input() -> None:
    with pytest.raises(ManifestCorrupted):
        DatasetManifest.from_json(None)  # type: ignore[arg-type]


def test_unknown_keys_ignored_and_nulls_accepted() -> None:
    m = DatasetManifest.from_json(with_(extra={"x": 1}, run_id=None, metadata=None))
    assert m.run_id is None
    assert m.metadata is None
    assert m.row_count == 3


def test_error_str_and_repr() -> None:
    assert str(ManifestCorrupted("bad manifest")) == "bad manifest"
    err = ManifestCorrupted("bad manifest", key="ds/x", reason="missing field")
    assert err.reason == "missing field"
    assert err.key == "ds/x"


manifests = st.builds(
    DatasetManifest,
    dataset_key=st.text(min_size=1),
    parts=st.lists(st.text(), max_size=4),
    row_count=st.integers(min_value=0, max_value=2**62),
    schema_hash=st.text(alphabet="0123456789abcdef", min_size=16, max_size=16),
    compression=st.sampled_from(["zstd", "snappy", "none"]),
    created_at_utc=st.text(),
    run_id=st.none() | st.text(),
    metadata=st.none() | st.dictionaries(st.text(), st.text(), max_size=3),
)


@settings(max_examples=100, deadline=None)
@given(manifests)
def test_roundtrip_and_byte_identical_to_remote_store(m: DatasetManifest) -> None:
    assert DatasetManifest.from_json(m.to_json()) == m
    assert DatasetManifest.from_json(m.to_json().encode("utf-8")) == m
    # txns is parquetry's own field (None here: byte-identical); see the test below.
    theirs = RsManifest(
        **{f.name: getattr(m, f.name) for f in dataclasses.fields(m) if f.name != "txns"}
    )
    assert m.to_json() == theirs.to_json()
    assert RsManifest.from_json(m.to_json()) == theirs


def test_manifest_txns_roundtrip_and_remote_store_ignores_them() -> None:
    m = DatasetManifest(
        dataset_key="k",
        parts=["p"],
        row_count=1,
        schema_hash="0" * 16,
        compression="zstd",
        created_at_utc="t",
        txns={"query": 3},
    )
    assert DatasetManifest.from_json(m.to_json()) == m
    assert RsManifest.from_json(m.to_json()).row_count == 1
    bad = m.to_json().replace('"query": 3', '"query": "3"')
    with pytest.raises(ManifestCorrupted, match="txns"):
        DatasetManifest.from_json(bad)


def test_staged_part_json_and_pickle() -> None:
    import pickle

    part = StagedPart(name="p-1.parquet", rows=5, size=123, schema_hash="0" * 16)
    assert StagedPart.from_json(part.to_json()) == part
    assert pickle.loads(pickle.dumps(part)) == part
    with pytest.raises(ManifestCorrupted, match="rows"):
        StagedPart.from_json('{"name": "a", "rows": true, "size": 1, "schema_hash": "x"}')
