"""Metadata documents round-trip through JSON and msgpack.zstd; bad documents are named."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parquetry.dataset.metadata import (
    DatasetDocument,
    FileInfo,
    FileInfos,
    VersionInfo,
    decode_document,
    encode_document,
)
from parquetry.errors import MetadataCorrupted

labels = st.text("abcdef0123456789=/%", min_size=1, max_size=20)
stats = st.dictionaries(
    st.sampled_from(["a", "b"]),
    st.tuples(
        st.integers(-5, 5) | st.none(), st.integers(-5, 5) | st.none(), st.integers(0, 9)
    ).map(list),
)


@st.composite
def documents(draw: st.DrawFn) -> DatasetDocument:
    parts = draw(st.lists(labels, unique=True, max_size=5))
    ours = draw(st.booleans())
    return DatasetDocument(
        uuid=draw(st.from_regex(r"[a-z0-9_+-]{1,10}", fullmatch=True)),
        partitions={p: {"table": f"u/table/{p}.parquet"} for p in parts},
        partition_keys=tuple(draw(st.lists(st.sampled_from(["k1", "k2"]), unique=True))),
        indices=draw(st.dictionaries(st.sampled_from(["x", "y"]), labels)),
        metadata=draw(
            st.dictionaries(
                st.text(max_size=5), st.integers(-(2**63), 2**63 - 1) | st.text(max_size=5)
            )
        ),
        # Partition keys and indexed columns are columns of the schema (checked on decode).
        schema=pa.schema(
            [(c, pa.int64()) for c in ("k1", "k2", "x", "y")]
            + [("a", pa.int64()), ("b", pa.string())]
        )
        if ours
        else None,
        files=FileInfos({p: FileInfo(rows=1, size=2, stats=draw(stats)) for p in parts})
        if ours
        else FileInfos(),
        version=VersionInfo(
            number=draw(st.integers(0, 99)),
            parent=None,
            committed_at="2024-01-01T00:00:00+00:00",
            operation="append",
        )
        if ours
        else None,
    )


@settings(max_examples=60, deadline=None)
@given(documents(), st.sampled_from(["json", "msgpack.zstd"]))
def test_document_round_trip(doc: DatasetDocument, fmt: str) -> None:
    back = decode_document(encode_document(doc, fmt), fmt, key="k")
    assert back.to_dict() == doc.to_dict()
    assert back.partitions == doc.partitions


def test_kartothek_readers_see_only_known_keys_first() -> None:
    doc = DatasetDocument(uuid="u", partitions={}, partition_keys=())
    raw = json.loads(encode_document(doc))
    assert list(raw) == [
        "dataset_metadata_version",
        "dataset_uuid",
        "metadata",
        "partitions",
        "partition_keys",
    ]


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        (b"not json", "cannot decode"),
        (b'{"dataset_metadata_version": 3, "dataset_uuid": "u"}', "expected 4"),
        (b'{"dataset_metadata_version": 4}', "dataset_uuid"),
        (b'{"dataset_metadata_version": 4, "dataset_uuid": "u", "partitions": {"l": 1}}', "l"),
    ],
)
def test_corrupt_documents_name_the_key(data: bytes, needle: str) -> None:
    with pytest.raises(MetadataCorrupted) as err:
        decode_document(data, "json", key="u.by-dataset-metadata.json")
    assert "u.by-dataset-metadata.json" in str(err.value)
    assert needle in str(err.value)
