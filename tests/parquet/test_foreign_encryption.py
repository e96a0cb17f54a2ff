"""Files other writers encrypted (apache/parquet-testing): explicit keys, AAD, key material.

The vendored files and their keys are described in tests/data/parquet-testing/README.md.
"""

from __future__ import annotations

import contextlib
import math
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pyarrow.parquet.encryption as pe
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parquetry.errors import EncryptionError, InvalidArgument, InvalidFormat, ParquetryError
from parquetry.parquet import ParquetCodec, ParquetField, ParquetSchema, ParquetType
from parquetry.parquet.encryption import (
    DecryptionSettings,
    EncryptionSettings,
    ExplicitKeys,
    InMemoryKms,
    read_encrypted,
)
from parquetry.parquet.files import read_table, write_table_bytes
from parquetry.parquet.footer import footer_from_bytes
from parquetry.parquet.options import WriteOptions
from parquetry.store import LocalStore, MemoryStore

DATA = Path(__file__).parent.parent / "data" / "parquet-testing" / "data"
FOOTER, KC1, KC2 = b"0123456789012345", b"1234567890123450", b"1234567890123451"
BY_COLUMN = ExplicitKeys(footer=FOOTER, columns={"double_field": KC1, "float_field": KC2})
BY_KEY_ID = ExplicitKeys(key_ids={"kf": FOOTER, "kc1": KC1, "kc2": KC2})
AES256 = ExplicitKeys(
    key_ids={
        "kf": b"01234567890123456789012345678901",
        **{f"kc{i}": b"123456789012345678901234567890" + b"1%d" % (i + 1) for i in range(1, 9)},
    }
)
FILES_128 = [
    "encrypt_columns_and_footer",
    "encrypt_columns_and_footer_aad",
    "encrypt_columns_and_footer_ctr",
    "encrypt_columns_and_footer_disable_aad_storage",
    "encrypt_columns_plaintext_footer",
    "uniform_encryption",
]
FILES_256 = [
    "encrypt_columns_and_footer",
    "encrypt_columns_and_footer_ctr",
    "encrypt_columns_and_footer_disable_aad_storage",
    "encrypt_columns_plaintext_footer",
    "uniform_encryption",
]


def _aad(name: str) -> bytes | None:
    return b"tester" if "aad" in name else None


def _check_known_values(table: pa.Table) -> None:
    """The values parquet-cpp's read-configurations test writes: row i holds i-based data."""
    assert table.num_rows == 50
    for i, (b, f, d) in enumerate(
        zip(
            table["boolean_field"].to_pylist(),
            table["float_field"].to_pylist(),
            table["double_field"].to_pylist(),
            strict=True,
        )
    ):
        assert b == (i % 2 == 0)
        assert math.isclose(f, i * 1.1, rel_tol=1e-6)
        assert math.isclose(d, i * 1.1111111, rel_tol=1e-9)
    ba = table["ba_field"].to_pylist()
    assert ba[:2] == [b"parquet000", None]


@pytest.mark.parametrize("keys", [BY_COLUMN, BY_KEY_ID], ids=["by-column", "by-key-id"])
@pytest.mark.parametrize("name", FILES_128)
def test_parquet_testing_files_decrypt_with_explicit_keys(name: str, keys: ExplicitKeys) -> None:
    path = DATA / f"{name}.parquet.encrypted"
    _check_known_values(read_encrypted(path, keys=keys, aad_prefix=_aad(name)))


@pytest.mark.parametrize("name", FILES_256)
def test_aes256_files_decrypt(name: str) -> None:
    path = DATA / "aes256" / f"{name}.parquet.encrypted"
    _check_known_values(read_encrypted(path, keys=AES256, aad_prefix=_aad(name)))


def test_uniform_file_agrees_with_pyarrow() -> None:
    path = DATA / "uniform_encryption.parquet.encrypted"
    oracle = pq.read_table(
        path,
        decryption_properties=pe.create_decryption_properties(FOOTER),
        coerce_int96_timestamp_unit="us",
    )
    assert read_encrypted(path, keys=ExplicitKeys(footer=FOOTER)).equals(oracle)


def test_bloom_filter_file_decrypts() -> None:
    table = read_encrypted(
        DATA / "encrypt_columns_and_footer_bloom_filter.parquet.encrypted", keys=BY_KEY_ID
    )
    assert table.num_rows == 2000
    assert table["name"][7].as_py() == "name_7"


def test_external_key_material_from_parquet_java(tmp_path: Path) -> None:
    kms = InMemoryKms({"kf": FOOTER, "kc1": KC1, "kc2": KC2})  # TEST ONLY
    name = "external_key_material_java.parquet.encrypted"
    table = read_encrypted(DATA / name, kms=kms)
    assert table.num_rows == 100
    assert table["integers"].to_pylist()[:3] == [0, 1, 2]
    assert table["strings"].to_pylist()[:2] == ["a0", "b1"]
    # From a store: the key material is fetched from beside the file.
    store = MemoryStore()
    store.put(f"x/{name}", (DATA / name).read_bytes())
    material = f"_KEY_MATERIAL_FOR_{name}.json"
    with pytest.raises(EncryptionError, match="outside the file"):
        read_encrypted(store, f"x/{name}", kms=kms)
    store.put(f"x/{material}", (DATA / material).read_bytes())
    assert read_encrypted(store, f"x/{name}", kms=kms).equals(table)
    # A local store works the same way.
    shutil.copy(DATA / name, tmp_path / name)
    shutil.copy(DATA / material, tmp_path / material)
    assert read_encrypted(LocalStore(tmp_path), name, kms=kms).equals(table)


def test_read_table_takes_explicit_keys() -> None:
    data = (DATA / "encrypt_columns_and_footer_aad.parquet.encrypted").read_bytes()
    settings = DecryptionSettings(keys=BY_KEY_ID, aad_prefix=b"tester")
    _check_known_values(read_table(data, decryption=settings))
    assert read_table(data, columns=["int32_field"], decryption=settings).num_columns == 1


def test_missing_or_wrong_keys_are_encryption_errors() -> None:
    path = DATA / "encrypt_columns_and_footer.parquet.encrypted"
    with pytest.raises(EncryptionError, match="float_field") as info:
        read_encrypted(path, keys=ExplicitKeys(footer=FOOTER, columns={"double_field": KC1}))
    assert info.value.columns == ("float_field",)
    with pytest.raises(EncryptionError, match="cannot decrypt the footer"):
        read_encrypted(path, keys=ExplicitKeys(footer=KC1))
    swapped = {"double_field": KC2, "float_field": KC2}
    with pytest.raises(EncryptionError, match="cannot decrypt"):
        read_encrypted(path, keys=ExplicitKeys(footer=FOOTER, columns=swapped))
    with pytest.raises(EncryptionError, match="explicit key"):
        read_encrypted(path, kms=InMemoryKms({"kf": FOOTER}))
    with pytest.raises(InvalidArgument):
        DecryptionSettings()


def test_aad_prefix_needed_or_wrong() -> None:
    path = DATA / "encrypt_columns_and_footer_disable_aad_storage.parquet.encrypted"
    with pytest.raises(EncryptionError, match="aad_prefix"):
        read_encrypted(path, keys=BY_KEY_ID)
    with pytest.raises(EncryptionError, match="cannot decrypt"):
        read_encrypted(path, keys=BY_KEY_ID, aad_prefix=b"other")
    stored = DATA / "encrypt_columns_and_footer_aad.parquet.encrypted"
    with pytest.raises(EncryptionError, match="differs"):
        read_encrypted(stored, keys=BY_KEY_ID, aad_prefix=b"other")


def test_tampered_page_is_detected() -> None:
    data = (DATA / "encrypt_columns_plaintext_footer.parquet.encrypted").read_bytes()
    raw = footer_from_bytes(data)
    assert raw.metadata is not None
    chunk = raw.metadata[4][0][1][4]  # float_field, encrypted with its column key
    assert chunk[8][2][1] == [b"float_field"]
    start, size = chunk[3][9], chunk[3][7]
    settings = DecryptionSettings(keys=BY_KEY_ID)
    for position in (start + 2, start + size // 2, start + size - 1):
        tampered = bytearray(data)
        tampered[position] ^= 0x01
        with pytest.raises((EncryptionError, InvalidFormat)):
            read_table(bytes(tampered), decryption=settings)


@pytest.mark.parametrize("plaintext_footer", [False, True])
def test_own_decryption_agrees_with_pyarrow_written_files(plaintext_footer: bool) -> None:
    """Files pyarrow encrypts through a KMS (internal key material) decrypt here too."""
    kms = InMemoryKms({"footer": b"F" * 16, "pii": b"P" * 16})
    table = pa.table({"id": [1, 2, 3], "email": ["a", "b", None], "n": [[1], [], None]})
    settings = EncryptionSettings(
        footer_key="footer",
        column_keys=(("pii", ("email",)),),
        plaintext_footer=plaintext_footer,
        kms=kms,
    )
    data = write_table_bytes(table, WriteOptions(encryption=settings))
    plaintext = DecryptionSettings(kms, key_material={}).decrypt(data)
    assert b"PAR1" == plaintext[:4] == plaintext[-4:]
    assert pq.read_table(pa.BufferReader(plaintext)).equals(table)


def test_keys_never_in_reprs_or_errors() -> None:
    texts = [repr(BY_COLUMN), repr(BY_KEY_ID), repr(DecryptionSettings(keys=BY_KEY_ID))]
    try:
        read_encrypted(DATA / "uniform_encryption.parquet.encrypted", keys=ExplicitKeys(footer=KC1))
    except EncryptionError as exc:
        texts.append(str(exc))
    for text in texts:
        for key in (FOOTER, KC1, KC2):
            assert key.decode() not in text
            assert key.hex() not in text


@settings(max_examples=80, deadline=None)
@given(st.data())
def test_damaged_encrypted_files_raise_only_parquetry_errors(data: st.DataObject) -> None:
    """Any byte of an encrypted file changed or cut: a table or a ParquetryError."""
    name = data.draw(st.sampled_from(FILES_128))
    original = (DATA / f"{name}.parquet.encrypted").read_bytes()
    damaged = bytearray(original)
    for _ in range(data.draw(st.integers(1, 3))):
        position = data.draw(st.integers(0, len(damaged) - 1))
        damaged[position] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        damaged = damaged[: data.draw(st.integers(0, len(damaged)))]
    settings_ = DecryptionSettings(keys=BY_KEY_ID, aad_prefix=_aad(name))
    with contextlib.suppress(ParquetryError):
        settings_.decrypt(bytes(damaged))
    with contextlib.suppress(ParquetryError):
        read_table(bytes(damaged), decryption=settings_)


def test_codec_decodes_with_explicit_keys_from_bytes_and_store() -> None:
    name = "encrypt_columns_and_footer_ctr.parquet.encrypted"
    data = (DATA / name).read_bytes()
    schema = ParquetSchema(
        [
            ParquetField("double_field", ParquetType.FLOAT64),
            ParquetField("float_field", ParquetType.FLOAT32),
        ]
    )
    codec = ParquetCodec(schema, decryption=DecryptionSettings(keys=BY_KEY_ID))
    records = codec.decode(data)
    assert len(records) == 50
    assert math.isclose(records[3]["double_field"], 3.3333333)
    store = MemoryStore()
    store.put(name, data)
    assert list(codec.iter_records(store.open(name), batch_rows=7)) == records
    with pytest.raises(EncryptionError):
        ParquetCodec(schema).decode(data)
