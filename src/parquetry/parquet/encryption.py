"""Parquet modular encryption through ``pyarrow.parquet.encryption``.

Write options name *master key ids* (the footer key and, per key, the columns it protects);
the key material lives only in a :class:`KmsClient`, which wraps and unwraps the per-file
data keys. Key material never appears in reprs, logs or error messages: settings hold ids
only and KMS clients hide their keys from ``repr``.

:class:`InMemoryKms` is **for tests only**: it keeps master keys in process memory.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Protocol, runtime_checkable

import pyarrow.parquet.encryption as pe

from parquetry.errors import EncryptionError, InvalidArgument
from parquetry.parquet.decryption import ExplicitKeys, read_encrypted

__all__ = [
    "DecryptionSettings",
    "EncryptionSettings",
    "ExplicitKeys",
    "InMemoryKms",
    "KmsClient",
    "read_encrypted",
]

_ALGORITHMS = ("AES_GCM_V1", "AES_GCM_CTR_V1")


@runtime_checkable
class KmsClient(Protocol):
    """Wraps data keys with master keys held by a key management service."""

    def wrap_key(self, key_bytes: bytes, master_key_identifier: str) -> str:
        """Encrypt ``key_bytes`` with the master key; return a printable wrapped key."""

    def unwrap_key(self, wrapped_key: str, master_key_identifier: str) -> bytes:
        """Reverse :meth:`wrap_key`."""


class _PyarrowKms(pe.KmsClient):  # type: ignore[misc]
    """Adapts a :class:`KmsClient` to pyarrow; KMS failures become EncryptionError."""

    def __init__(self, client: KmsClient):
        super().__init__()
        self._client = client

    def wrap_key(self, key_bytes: bytes, master_key_identifier: str) -> str:
        return self._client.wrap_key(bytes(key_bytes), master_key_identifier)

    def unwrap_key(self, wrapped_key: str, master_key_identifier: str) -> bytes:
        return self._client.unwrap_key(wrapped_key, master_key_identifier)


def _crypto_factory(kms: KmsClient) -> pe.CryptoFactory:
    return pe.CryptoFactory(lambda _config: _PyarrowKms(kms))


@dataclass(frozen=True, slots=True, kw_only=True)
class EncryptionSettings:
    """Which master keys encrypt the footer and which columns.

    Args:
        footer_key: Master key id for the footer (and columns not listed elsewhere when
            ``uniform`` is true).
        column_keys: ``((key_id, (column, ...)), ...)``: columns encrypted per master key.
        plaintext_footer: Leave the footer readable (signed), so readers without keys still
            see the schema and read the unencrypted columns.
        uniform: Encrypt every column with the footer key (``column_keys`` must be empty).
        algorithm: ``AES_GCM_V1`` (default) or ``AES_GCM_CTR_V1``.
        kms: The KMS client; not part of equality, repr or JSON.
    """

    footer_key: str
    column_keys: tuple[tuple[str, tuple[str, ...]], ...] = ()
    plaintext_footer: bool = False
    uniform: bool = False
    algorithm: str = "AES_GCM_V1"
    double_wrapping: bool = True
    kms: KmsClient | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not self.footer_key:
            raise InvalidArgument("encryption needs a footer key id")
        if self.algorithm not in _ALGORITHMS:
            raise InvalidArgument(f"unknown encryption algorithm {self.algorithm!r}")
        if self.uniform == bool(self.column_keys):
            raise InvalidArgument("give either column_keys or uniform=True (not both, not none)")
        object.__setattr__(
            self, "column_keys", tuple((k, tuple(cols)) for k, cols in self.column_keys)
        )

    @property
    def encrypted_columns(self) -> tuple[str, ...]:
        return tuple(c for _, cols in self.column_keys for c in cols)

    def file_encryption_properties(self, column_names: Sequence[str]) -> Any:
        """pyarrow ``FileEncryptionProperties`` for a file with these top-level columns."""
        if self.kms is None:
            raise EncryptionError("encryption settings have no KMS client")
        missing = [c for c in self.encrypted_columns if c.split(".")[0] not in column_names]
        if missing:
            raise InvalidArgument(f"encrypted columns not in the schema: {', '.join(missing)}")
        config = pe.EncryptionConfiguration(
            footer_key=self.footer_key,
            column_keys={k: list(cols) for k, cols in self.column_keys},
            uniform_encryption=self.uniform,
            encryption_algorithm=self.algorithm,
            plaintext_footer=self.plaintext_footer,
            double_wrapping=self.double_wrapping,
            cache_lifetime=timedelta(minutes=10),
            internal_key_material=True,
        )
        try:
            return _crypto_factory(self.kms).file_encryption_properties(
                pe.KmsConnectionConfig(), config
            )
        except EncryptionError:
            raise
        except Exception as exc:
            raise EncryptionError(f"cannot set up encryption: {type(exc).__name__}") from None

    def to_json(self) -> dict[str, Any]:
        return {
            "footer_key": self.footer_key,
            "column_keys": {k: list(cols) for k, cols in self.column_keys},
            "plaintext_footer": self.plaintext_footer,
            "uniform": self.uniform,
            "algorithm": self.algorithm,
            "double_wrapping": self.double_wrapping,
        }

    @classmethod
    def from_json(
        cls, doc: Mapping[str, Any], *, kms: KmsClient | None = None
    ) -> EncryptionSettings:
        return cls(
            footer_key=doc["footer_key"],
            column_keys=tuple((k, tuple(v)) for k, v in doc.get("column_keys", {}).items()),
            plaintext_footer=bool(doc.get("plaintext_footer", False)),
            uniform=bool(doc.get("uniform", False)),
            algorithm=doc.get("algorithm", "AES_GCM_V1"),
            double_wrapping=bool(doc.get("double_wrapping", True)),
            kms=kms,
        )


@dataclass(frozen=True, slots=True)
class DecryptionSettings:
    """How to read encrypted files: a KMS that unwraps their data keys, or explicit keys.

    Args:
        kms: Unwraps data keys from the key material the writer stored (pyarrow,
            parquet-java and Spark key tools).
        keys: Explicit keys, for files written without a KMS (parquet-cpp/parquet-java
            explicit key properties); see :class:`ExplicitKeys`.
        aad_prefix: The AAD prefix the writer used, needed when the file does not store it.
        key_material: For files with *external* key material: the parsed
            ``_KEY_MATERIAL_FOR_<file>.json`` (:func:`read_encrypted` loads it itself).

    Files read with ``keys``, ``aad_prefix`` or ``key_material`` are decrypted by parquetry
    itself (:mod:`parquetry.parquet.decrypt`, needs ``cryptography``) and then read by
    pyarrow; with ``kms`` alone pyarrow decrypts.
    """

    kms: KmsClient | None = field(default=None, repr=False)
    keys: ExplicitKeys | None = field(default=None, repr=False, kw_only=True)
    aad_prefix: bytes | None = field(default=None, repr=False, kw_only=True)
    key_material: Mapping[str, str] | None = field(
        default=None, repr=False, compare=False, kw_only=True
    )

    def __post_init__(self) -> None:
        if (self.kms is None) == (self.keys is None):
            raise InvalidArgument("decryption needs either a KMS client or explicit keys")

    @property
    def decrypts_itself(self) -> bool:
        """Whether parquetry (not pyarrow) decrypts: explicit keys, AAD prefix, key material."""
        return self.keys is not None or self.aad_prefix is not None or bool(self.key_material)

    def file_decryption_properties(self) -> Any:
        if self.kms is None:
            raise EncryptionError("explicit keys are not a pyarrow KMS configuration")
        return _crypto_factory(self.kms).file_decryption_properties(
            pe.KmsConnectionConfig(), pe.DecryptionConfiguration()
        )

    def decrypt(self, data: bytes, name: str = "<bytes>") -> bytes:
        """The plaintext Parquet file for the encrypted file ``data``."""
        from parquetry.parquet.decrypt import KeyLookup, decrypt_parquet
        from parquetry.parquet.decryption import kms_key_lookup

        lookup: KeyLookup
        if self.keys is not None:
            lookup = self.keys
        else:
            assert self.kms is not None  # __post_init__
            lookup = kms_key_lookup(self.kms, self.key_material)
        return decrypt_parquet(data, lookup, aad_prefix=self.aad_prefix, name=name)


class InMemoryKms:
    """TEST-ONLY KMS holding master keys in memory. Never use it for real data.

    Wraps with AES-GCM: ``base64(nonce | ciphertext | tag)`` with the master key id as
    associated data, the format of parquet-java's local key wrapping. Needs the
    ``cryptography`` package (a test dependency).

    Args:
        master_keys: ``{key_id: key}`` with 16, 24 or 32-byte keys.
    """

    def __init__(self, master_keys: Mapping[str, bytes]):
        for key_id, key in master_keys.items():
            if len(key) not in (16, 24, 32):
                raise InvalidArgument(f"master key {key_id!r} must be 16, 24 or 32 bytes")
        self._keys = dict(master_keys)

    def __repr__(self) -> str:
        return f"InMemoryKms(key_ids={sorted(self._keys)!r})"

    def _aead(self, key_id: str) -> Any:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        if key_id not in self._keys:
            raise EncryptionError(f"unknown master key id {key_id!r}")
        return AESGCM(self._keys[key_id])

    def wrap_key(self, key_bytes: bytes, master_key_identifier: str) -> str:
        nonce = os.urandom(12)
        sealed = self._aead(master_key_identifier).encrypt(
            nonce, bytes(key_bytes), master_key_identifier.encode()
        )
        return base64.b64encode(nonce + sealed).decode("ascii")

    def unwrap_key(self, wrapped_key: str, master_key_identifier: str) -> bytes:
        from cryptography.exceptions import InvalidTag

        raw = base64.b64decode(wrapped_key)
        try:
            return bytes(
                self._aead(master_key_identifier).decrypt(
                    raw[:12], raw[12:], master_key_identifier.encode()
                )
            )
        except InvalidTag:
            raise EncryptionError(
                f"wrong master key {master_key_identifier!r} for this file"
            ) from None
