"""Encrypted Datasets (issue 11 §4): reads decrypt with keys, appends keep the encryption.

Before: ``create`` wrote encrypted files, ``read`` failed with a raw ``OSError`` and
``append`` added plaintext files to the encrypted dataset.
"""

from __future__ import annotations

import uuid

import pyarrow as pa
import pytest

from parquetry.dataset import Dataset
from parquetry.errors import EncryptionError, InvalidArgument, ParquetryError
from parquetry.parquet import DecryptionSettings, EncryptionSettings, InMemoryKms, WriteOptions
from parquetry.parquet.footer import footer_from_bytes
from parquetry.store import MemoryStore

KEYS = {"footer": b"0123456789abcdef", "secret": b"fedcba9876543210"}


def _table(n: int, offset: int = 0) -> pa.Table:
    ids = range(offset, offset + n)
    return pa.table(
        {
            "p": pa.array([i % 2 for i in ids], pa.int64()),
            "ssn": [f"s{i}" for i in ids],
            "v": pa.array(list(ids), pa.int64()),
        }
    )


def _settings(kms: InMemoryKms, *, plaintext_footer: bool, columns: tuple[str, ...] = ("ssn",)):
    return EncryptionSettings(
        footer_key="footer",
        column_keys=(("secret", columns),),
        plaintext_footer=plaintext_footer,
        kms=kms,
    )


@pytest.fixture
def store() -> MemoryStore:
    return MemoryStore(f"enc-{uuid.uuid4().hex}")


def _create(store: MemoryStore, *, plaintext_footer: bool = False) -> Dataset:
    options = WriteOptions(
        encryption=_settings(InMemoryKms(KEYS), plaintext_footer=plaintext_footer)
    )
    return Dataset.create(store, "ds", _table(10), partition_on=["p"], write_options=options)


def _encrypted_files(store: MemoryStore, ds: Dataset) -> list[bool]:
    return [footer_from_bytes(store.get(f.key), f.key).encrypted for f in ds.plan(None).files]


def test_round_trip_create_append_read_with_keys(store: MemoryStore) -> None:
    _create(store)
    keys = DecryptionSettings(InMemoryKms(KEYS))
    ds = Dataset.open(store, "ds", decryption=keys)
    assert ds.read().num_rows == 10
    ds = ds.append(_table(6, 100))  # the recorded settings + the opener's KMS
    ds = ds.update(_table(2, 200), delete_scope=[{"p": 0}])
    assert all(_encrypted_files(store, ds)), "an append added plaintext files"
    reopened = Dataset.open(store, "ds", decryption=keys)
    expected = sorted(
        [*(i for i in range(10) if i % 2), *(i for i in range(100, 106) if i % 2), 200, 201]
    )
    assert sorted(reopened.read().column("v").to_pylist()) == expected
    scanned = sum(b.num_rows for b in reopened.scan(predicates=[[("ssn", "==", "s101")]]))
    assert scanned == 1
    assert reopened.to_pyarrow_dataset().to_table().num_rows == len(expected)


def test_metadata_records_key_ids_not_keys(store: MemoryStore) -> None:
    ds = _create(store)
    recorded = ds.document.encryption
    assert recorded is not None
    assert recorded["footer_key"] == "footer"
    assert recorded["column_keys"] == {"secret": ["ssn"]}
    for obj in store.list("ds"):
        data = store.get(obj.key)
        for key in KEYS.values():
            assert key not in data, obj.key


@pytest.mark.parametrize("plaintext_footer", [False, True])
def test_read_without_keys_says_encrypted(store: MemoryStore, plaintext_footer: bool) -> None:
    _create(store, plaintext_footer=plaintext_footer)
    ds = Dataset.open(store, "ds")
    for call in (ds.read, lambda: list(ds.scan()), lambda: ds.read(columns=["ssn"])):
        with pytest.raises(EncryptionError, match="'ds' is encrypted") as info:
            call()
        assert "ssn" in info.value.columns
    if plaintext_footer:  # plaintext columns stay readable without keys
        assert ds.read(columns=["p", "v"]).num_rows == 10
    else:
        with pytest.raises(EncryptionError):
            ds.read(columns=["v"])


def test_append_without_keys_is_refused(store: MemoryStore) -> None:
    _create(store)
    ds = Dataset.open(store, "ds")
    before = sorted(m.key for m in store.list("ds"))
    with pytest.raises(EncryptionError, match="new files must be encrypted"):
        ds.append(_table(3, 50))
    assert sorted(m.key for m in store.list("ds")) == before
    assert Dataset.open(store, "ds").version == ds.version


def test_append_with_other_encryption_settings_is_refused(store: MemoryStore) -> None:
    _create(store)
    other = WriteOptions(
        encryption=_settings(InMemoryKms(KEYS), plaintext_footer=False, columns=("v",))
    )
    with pytest.raises(InvalidArgument, match=r"settings .* differ"):
        Dataset.open(store, "ds").append(_table(3, 50), write_options=other)
    same = WriteOptions(encryption=_settings(InMemoryKms(KEYS), plaintext_footer=False))
    ds = Dataset.open(store, "ds").append(_table(3, 50), write_options=same)
    assert all(_encrypted_files(store, ds))


def test_encrypted_append_to_plaintext_dataset_is_refused(store: MemoryStore) -> None:
    ds = Dataset.create(store, "ds", _table(4))
    options = WriteOptions(encryption=_settings(InMemoryKms(KEYS), plaintext_footer=False))
    with pytest.raises(InvalidArgument, match="is not encrypted"):
        ds.append(_table(2, 9), write_options=options)


def test_wrong_keys_are_a_parquetry_error(store: MemoryStore) -> None:
    _create(store)
    wrong = {"footer": b"x" * 16, "secret": b"y" * 16}
    ds = Dataset.open(store, "ds", decryption=DecryptionSettings(InMemoryKms(wrong)))
    with pytest.raises(ParquetryError):
        ds.read()


def test_build_index_on_an_encrypted_dataset(store: MemoryStore) -> None:
    _create(store)
    with pytest.raises(EncryptionError):
        Dataset.open(store, "ds").build_index("ssn")
    keys = DecryptionSettings(InMemoryKms(KEYS))
    ds = Dataset.open(store, "ds", decryption=keys).build_index("ssn")
    assert ds.read(predicates=[[("ssn", "==", "s3")]]).column("v").to_pylist() == [3]
    assert ds.plan([[("ssn", "==", "s3")]]).pruned_labels()
