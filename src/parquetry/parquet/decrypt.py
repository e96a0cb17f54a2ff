"""Decrypt a Parquet file written with modular encryption into a plaintext Parquet file.

pyarrow's Python API decrypts only files whose keys come from its KMS toolkit, or with one
explicit key for everything (uniform encryption). Files encrypted by parquet-cpp or
parquet-java with explicit per-column keys, or with a supplied AAD prefix, need the keys
handed over per column; this module does that itself (AES-GCM and AES-GCM-CTR with the
``cryptography`` package) following the Parquet Modular Encryption spec, and rewrites the
file in plaintext so pyarrow reads it normally. Page indexes and bloom filters are left
out of the rewritten file; data, statistics and key-value metadata are kept.

Keys never appear in errors or reprs.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from parquetry.errors import EncryptionError, InvalidFormat
from parquetry.parquet.thrift import ThriftError, read_struct, write_struct
from parquetry.parquet.thrift_schema import (
    COLUMN_META_DATA,
    FILE_CRYPTO_META_DATA,
    FILE_META_DATA,
    PAGE_HEADER,
)

__all__ = ["KeyLookup", "decrypt_parquet"]

#: ``(key_metadata, column path or None for the footer) -> key``; raises EncryptionError.
KeyLookup = Callable[[bytes | None, str | None], bytes]

_MAGIC, _MAGIC_ENCRYPTED = b"PAR1", b"PARE"
_NONCE, _TAG = 12, 16
# Module types of the spec's AAD suffix.
_FOOTER, _COLUMN_META, _DATA_PAGE, _DICT_PAGE, _DATA_HEADER, _DICT_HEADER = 0, 1, 2, 3, 4, 5
_DICTIONARY_PAGE = 2  # PageType.DICTIONARY_PAGE


def _ciphers() -> Any:
    try:
        from cryptography.exceptions import InvalidTag
        from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    except ImportError:  # pragma: no cover - cryptography is installed with parquetry[encryption]
        raise EncryptionError(
            "decrypting with explicit keys needs the 'cryptography' package "
            "(pip install 'parquetry[encryption]')"
        ) from None
    return InvalidTag, Cipher, algorithms, modes, AESGCM


class _Decryptor:
    def __init__(self, name: str, algorithm: dict[int, Any], aad_prefix: bytes | None):
        self.name = name
        if len(algorithm) != 1:
            raise InvalidFormat(f"{name}: the encryption algorithm is missing or unknown")
        ((kind, params),) = algorithm.items()
        self.ctr = kind == 2
        stored = params.get(1)
        if aad_prefix is not None and stored is not None and stored != aad_prefix:
            raise EncryptionError(f"{name}: the AAD prefix given differs from the file's")
        prefix = aad_prefix if aad_prefix is not None else stored
        if prefix is None and params.get(3):
            raise EncryptionError(
                f"{name}: the file was written with an AAD prefix it does not store; "
                "pass aad_prefix"
            )
        self.file_aad: bytes = bytes(prefix or b"") + bytes(params.get(2, b""))
        self.invalid_tag, self.cipher, self.algorithms, self.modes, self.aesgcm = _ciphers()

    def aad(self, module: int, row_group: int = -1, column: int = -1, page: int = -1) -> bytes:
        suffix = bytes([module])
        for ordinal in (row_group, column, page):
            if ordinal >= 0:
                if ordinal > 0x7FFF:
                    raise InvalidFormat(f"{self.name}: more than 32767 row groups or pages")
                suffix += struct.pack("<h", ordinal)
        return self.file_aad + suffix

    def module(
        self,
        data: bytes | memoryview,
        pos: int,
        key: bytes,
        aad: bytes,
        what: str,
        ctr: bool = False,
    ) -> tuple[bytes, int]:
        """Decrypt the module at ``pos``; return the plaintext and the position after it."""
        if pos < 0 or pos + 4 > len(data):
            raise InvalidFormat(f"{self.name}: {what} lies outside the file", key=self.name)
        (length,) = struct.unpack_from("<i", data, pos)
        end = pos + 4 + length
        if length < _NONCE + (0 if ctr else _TAG) or end > len(data):
            raise InvalidFormat(f"{self.name}: {what} is truncated", key=self.name)
        nonce = bytes(data[pos + 4 : pos + 4 + _NONCE])
        body = bytes(data[pos + 4 + _NONCE : end])
        try:
            if ctr:
                iv = nonce + b"\x00\x00\x00\x01"
                decryptor = self.cipher(self.algorithms.AES(key), self.modes.CTR(iv)).decryptor()
                return decryptor.update(body) + decryptor.finalize(), end
            return self.aesgcm(key).decrypt(nonce, body, aad), end
        except self.invalid_tag:
            raise EncryptionError(
                f"{self.name}: cannot decrypt the {what}: wrong key or AAD prefix, or the "
                "file was tampered with",
                key=self.name,
            ) from None
        except ValueError as exc:  # a key of the wrong length
            raise EncryptionError(f"{self.name}: bad key for the {what} ({exc})") from None

    def verify_signature(self, footer: bytes, signature: bytes, key: bytes) -> None:
        nonce, tag = signature[:_NONCE], signature[_NONCE:]
        try:
            sealed = self.aesgcm(key).encrypt(nonce, footer, self.aad(_FOOTER))
        except ValueError as exc:
            raise EncryptionError(f"{self.name}: bad footer key ({exc})") from None
        if len(signature) != _NONCE + _TAG or sealed[-_TAG:] != tag:
            raise EncryptionError(
                f"{self.name}: the plaintext footer's signature does not match: wrong footer "
                "key, or the footer was tampered with",
                key=self.name,
            )


def decrypt_parquet(
    data: bytes, keys: KeyLookup, *, aad_prefix: bytes | None = None, name: str = "<bytes>"
) -> bytes:
    """The plaintext Parquet file equivalent to the encrypted file ``data``.

    Raises:
        InvalidFormat: not a Parquet file, or not an encrypted one.
        EncryptionError: a key is missing or wrong, or the AAD prefix is needed or wrong.
    """
    try:
        return _decrypt(memoryview(data), keys, aad_prefix, name)
    except EncryptionError as exc:
        if exc.message.startswith(name):
            raise
        columns = getattr(exc, "columns", ())
        raise EncryptionError(f"{name}: {exc.message}", columns=columns, key=name) from None
    except ThriftError as exc:
        raise InvalidFormat(f"{name}: corrupted encrypted Parquet metadata ({exc})") from None


def _decrypt(data: memoryview, keys: KeyLookup, aad_prefix: bytes | None, name: str) -> bytes:
    if len(data) < 12 or bytes(data[-4:]) not in (_MAGIC, _MAGIC_ENCRYPTED):
        raise InvalidFormat(f"{name} is not a Parquet file", key=name)
    (length,) = struct.unpack_from("<i", data, len(data) - 8)
    if length <= 0 or length + 12 > len(data):
        raise InvalidFormat(f"{name}: footer length {length} does not fit the file", key=name)
    footer = data[len(data) - 8 - length : len(data) - 8]
    if bytes(data[-4:]) == _MAGIC_ENCRYPTED:
        crypto, pos = read_struct(footer, 0, FILE_CRYPTO_META_DATA)
        if 1 not in crypto:
            raise InvalidFormat(f"{name}: encrypted footer without an algorithm", key=name)
        dec = _Decryptor(name, crypto[1], aad_prefix)
        footer_key = keys(crypto.get(2), None)
        plain, _ = dec.module(footer, pos, footer_key, dec.aad(_FOOTER), "footer")
        meta, _ = read_struct(plain, 0, FILE_META_DATA)
    else:
        meta, pos = read_struct(footer, 0, FILE_META_DATA)
        if 8 not in meta:
            raise InvalidFormat(f"{name} is not encrypted", key=name)
        dec = _Decryptor(name, meta[8], aad_prefix)
        footer_key = keys(meta.get(9), None)
        dec.verify_signature(bytes(footer[:pos]), bytes(footer[pos:]), footer_key)
    if not {2, 3, 4} <= meta.keys():
        raise InvalidFormat(f"{name}: the decrypted footer lacks fields", key=name)
    out = bytearray(_MAGIC)
    for rg_index, group in enumerate(meta[4]):
        ordinal = group.get(7, rg_index)
        for col_index, chunk in enumerate(group.get(1, [])):
            _rewrite_chunk(data, out, dec, keys, footer_key, chunk, ordinal, col_index)
        for field in (5, 6):  # offsets and sizes of the encrypted layout
            group.pop(field, None)
    for field in (8, 9):
        meta.pop(field, None)
    footer_out = write_struct(meta, FILE_META_DATA)
    out += footer_out + struct.pack("<i", len(footer_out)) + _MAGIC
    return bytes(out)


def _rewrite_chunk(
    data: memoryview,
    out: bytearray,
    dec: _Decryptor,
    keys: KeyLookup,
    footer_key: bytes,
    chunk: dict[int, Any],
    rg: int,
    col: int,
) -> None:
    crypto = chunk.get(8)
    key: bytes | None = None
    if crypto is not None:
        with_key = crypto.get(2)
        if with_key is None:
            key = footer_key
        else:
            path = ".".join(p.decode("utf-8", "replace") for p in with_key.get(1, []))
            key = keys(with_key.get(2), path)
    meta = chunk.get(3)
    if 9 in chunk and key is not None:
        raw, _ = dec.module(chunk[9], 0, key, dec.aad(_COLUMN_META, rg, col), "column metadata")
        meta, _ = read_struct(raw, 0, COLUMN_META_DATA)
    if not meta or 9 not in meta or 7 not in meta:
        raise InvalidFormat(f"{dec.name}: column {col} of row group {rg} has no metadata")
    dictionary = meta.get(11)
    start = dictionary if dictionary and dictionary < meta[9] else meta[9]
    end = start + meta[7]
    if start < 4 or end > len(data):
        raise InvalidFormat(f"{dec.name}: column {col} of row group {rg} lies outside the file")
    new_start = len(out)
    if key is None:
        out += data[start:end]
    else:
        _rewrite_pages(data, out, dec, key, start, end, rg, col)
    shift = new_start - start
    meta[9] += shift
    if dictionary and dictionary < meta[9] - shift:
        meta[11] = dictionary + shift
    else:
        meta.pop(11, None)
    meta[7] = len(out) - new_start
    for field in (10, 14, 15):  # index page, bloom filter: not carried over
        meta.pop(field, None)
    for field in (4, 5, 6, 7, 8, 9):  # page indexes and crypto metadata
        chunk.pop(field, None)
    chunk[2] = new_start
    chunk[3] = meta


def _rewrite_pages(
    data: memoryview,
    out: bytearray,
    dec: _Decryptor,
    key: bytes,
    pos: int,
    end: int,
    rg: int,
    col: int,
) -> None:
    page = 0
    while pos < end:
        dictionary = _peek_dictionary(dec, data, pos, key, rg, col, page)
        module = _DICT_HEADER if dictionary else _DATA_HEADER
        aad = dec.aad(module, rg, col, -1 if dictionary else page)
        raw, pos = dec.module(data, pos, key, aad, "page header")
        header, _ = read_struct(raw, 0, PAGE_HEADER)
        if header.get(1) == _DICTIONARY_PAGE:
            aad = dec.aad(_DICT_PAGE, rg, col)
        else:
            aad = dec.aad(_DATA_PAGE, rg, col, page)
            page += 1
        body, pos = dec.module(data, pos, key, aad, "page", ctr=dec.ctr)
        header[3] = len(body)
        header.pop(4, None)  # a CRC of the encrypted bytes would not match the plaintext
        out += write_struct(header, PAGE_HEADER) + body


def _peek_dictionary(
    dec: _Decryptor, data: memoryview, pos: int, key: bytes, rg: int, col: int, page: int
) -> bool:
    """Whether the header at ``pos`` is a dictionary page header (its AAD tells)."""
    if page:
        return False  # a dictionary page only ever comes first
    try:
        dec.module(data, pos, key, dec.aad(_DICT_HEADER, rg, col), "page header")
    except EncryptionError:
        return False
    return True
