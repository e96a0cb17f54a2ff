"""Modular encryption: round trips, reads without keys, plaintext footers, no key leaks."""

from __future__ import annotations

import base64
import logging
import pickle

import pyarrow as pa
import pytest

from parquetry.codec import ParquetCodec, ParquetField, ParquetSchema, ParquetType
from parquetry.errors import EncryptionError, InvalidArgument
from parquetry.parquet.encryption import (
    DecryptionSettings,
    EncryptionSettings,
    InMemoryKms,
    KmsClient,
)
from parquetry.parquet.files import read_table, write_table_bytes
from parquetry.parquet.footer import footer_from_bytes
from parquetry.parquet.options import WriteOptions

FOOTER_KEY = b"F" * 8 + b"0123456789ABCDEF"[:8]
PII_KEY = b"k3y-material-PII"
KEYS = {"footer": FOOTER_KEY, "pii": PII_KEY}
TABLE = pa.table(
    {"id": [1, 2, 3], "email": ["a@x.io", "b@y.io", "c@z.io"], "phone": ["111", "222", "333"]}
)
SECRETS = [
    s for key in KEYS.values() for s in (key.decode(), key.hex(), base64.b64encode(key).decode())
]


def options(kms: KmsClient, *, plaintext_footer: bool) -> WriteOptions:
    return WriteOptions(
        encryption=EncryptionSettings(
            footer_key="footer",
            column_keys=(("pii", ("email", "phone")),),
            plaintext_footer=plaintext_footer,
            kms=kms,
        )
    )


@pytest.mark.parametrize("plaintext_footer", [False, True])
def test_round_trip_with_keys(plaintext_footer: bool) -> None:
    kms = InMemoryKms(KEYS)
    data = write_table_bytes(TABLE, options(kms, plaintext_footer=plaintext_footer))
    assert data[:4] == (b"PAR1" if plaintext_footer else b"PARE")
    assert b"a@x.io" not in data  # the encrypted column's values are not in the clear
    assert read_table(data, decryption=DecryptionSettings(kms)).equals(TABLE)


def test_encrypted_footer_without_keys_is_an_encryption_error() -> None:
    data = write_table_bytes(TABLE, options(InMemoryKms(KEYS), plaintext_footer=False))
    with pytest.raises(EncryptionError, match="encrypted footer") as info:
        read_table(data)
    assert info.value.columns == ("*",)


def test_plaintext_footer_names_encrypted_columns_and_keeps_plain_ones_readable() -> None:
    data = write_table_bytes(TABLE, options(InMemoryKms(KEYS), plaintext_footer=True))
    raw = footer_from_bytes(data)
    assert [(c.path, c.key_id) for c in raw.encrypted_columns()] == [
        ("email", "pii"),
        ("phone", "pii"),
    ]
    with pytest.raises(EncryptionError, match="email, phone") as info:
        read_table(data)
    assert info.value.columns == ("email", "phone")
    with pytest.raises(EncryptionError) as info:
        read_table(data, columns=["id", "phone"])
    assert info.value.columns == ("phone",)
    assert read_table(data, columns=["id"]).to_pydict() == {"id": [1, 2, 3]}


def test_codec_decode_of_encrypted_file() -> None:
    kms = InMemoryKms(KEYS)
    data = write_table_bytes(TABLE, options(kms, plaintext_footer=True))
    schema = ParquetSchema(
        [ParquetField("id", ParquetType.INT64), ParquetField("email", ParquetType.STRING)]
    )
    with pytest.raises(EncryptionError, match="email"):
        ParquetCodec(schema).decode(data)
    decoded = ParquetCodec(schema, decryption=DecryptionSettings(kms)).decode(data)
    assert decoded[0] == {"id": 1, "email": "a@x.io"}
    plain_only = ParquetSchema([ParquetField("id", ParquetType.INT64)])
    assert len(ParquetCodec(plain_only).decode(data)) == 3


def test_wrong_master_key_is_an_encryption_error_without_key_material(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    data = write_table_bytes(TABLE, options(InMemoryKms(KEYS), plaintext_footer=False))
    wrong = InMemoryKms({"footer": b"x" * 16, "pii": b"y" * 16})
    with pytest.raises(EncryptionError) as info:
        read_table(data, decryption=DecryptionSettings(wrong))
    text = " ".join([str(info.value), repr(info.value), caplog.text])
    assert not any(secret in text for secret in SECRETS)


def test_key_material_never_in_reprs_json_or_errors() -> None:
    kms = InMemoryKms(KEYS)
    opts = options(kms, plaintext_footer=True)
    texts = [
        repr(kms),
        repr(opts),
        str(opts),
        repr(opts.encryption),
        repr(DecryptionSettings(kms)),
        str(opts.to_json()),
    ]
    assert not any(secret in text for text in texts for secret in SECRETS)
    assert "footer" in repr(kms)  # key ids are fine to show
    with pytest.raises(InvalidArgument) as info:
        InMemoryKms({"short": PII_KEY[:5]})
    assert PII_KEY[:5].decode() not in str(info.value)


def test_options_json_round_trip_reattaches_the_kms() -> None:
    kms = InMemoryKms(KEYS)
    opts = options(kms, plaintext_footer=True)
    back = WriteOptions.from_json(opts.to_json(), kms=kms)
    assert back == opts
    assert back.encryption is not None
    assert back.encryption.kms is kms
    data = write_table_bytes(TABLE, back)
    assert read_table(data, decryption=DecryptionSettings(kms)).equals(TABLE)


def test_settings_validation() -> None:
    with pytest.raises(InvalidArgument):
        EncryptionSettings(footer_key="")
    with pytest.raises(InvalidArgument):
        EncryptionSettings(footer_key="f")  # neither column keys nor uniform
    with pytest.raises(InvalidArgument):
        EncryptionSettings(footer_key="f", algorithm="ROT13", uniform=True)
    bad_column = WriteOptions(
        encryption=EncryptionSettings(
            footer_key="footer", column_keys=(("pii", ("nope",)),), kms=InMemoryKms(KEYS)
        )
    )
    with pytest.raises(InvalidArgument, match="nope"):
        write_table_bytes(TABLE, bad_column)


def test_uniform_encryption_and_picklable_kms() -> None:
    kms = pickle.loads(pickle.dumps(InMemoryKms(KEYS)))
    opts = WriteOptions(encryption=EncryptionSettings(footer_key="footer", uniform=True, kms=kms))
    data = write_table_bytes(TABLE, opts)
    assert read_table(data, decryption=DecryptionSettings(kms)).equals(TABLE)
