"""Keys for files other writers encrypted: explicit keys, KMS key material, AAD prefixes.

parquet-cpp and parquet-java can encrypt with *explicit* keys (the application hands over
the footer key and one key per column; the file stores only a key id such as ``b"kc1"``)
or through their key tools (the file stores JSON *key material*, inside the file or in a
``_KEY_MATERIAL_FOR_<file>.json`` beside it, holding data keys wrapped by master keys of a
KMS). Both decrypt here: :class:`ExplicitKeys` or a :class:`~parquetry.parquet.encryption.
KmsClient` resolve each module's key, and :mod:`parquetry.parquet.decrypt` decrypts.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from parquetry.errors import EncryptionError, InvalidArgument, NotFound

if TYPE_CHECKING:
    import pyarrow as pa

    from parquetry.parquet.decrypt import KeyLookup
    from parquetry.parquet.encryption import KmsClient
    from parquetry.store.base import Store

__all__ = ["ExplicitKeys", "key_material_key", "kms_key_lookup", "read_encrypted"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ExplicitKeys:
    """Explicit data keys (16, 24 or 32 bytes) for files written without a KMS.

    Args:
        footer: The footer key (also the key of columns encrypted "with the footer key").
        columns: ``{dotted column path: key}``, e.g. ``{"double_field": b"..."}``.
        key_ids: ``{key id: key}``: keys found by the key metadata the writer stored (the
            ``key_id`` of parquet-cpp's key retriever, e.g. ``{"kf": ..., "kc1": ...}``);
            used for the footer when ``footer`` is not given and for columns not in
            ``columns``.

    The keys never appear in ``repr`` or errors.
    """

    footer: bytes | None = field(default=None, repr=False)
    columns: Mapping[str, bytes] = field(default_factory=dict, repr=False)
    key_ids: Mapping[str, bytes] = field(default_factory=dict, repr=False)

    def __repr__(self) -> str:
        return (
            f"ExplicitKeys(footer={'<set>' if self.footer else None}, "
            f"columns={sorted(self.columns)!r}, key_ids={sorted(self.key_ids)!r})"
        )

    def __call__(self, key_metadata: bytes | None, path: str | None) -> bytes:
        if path is None and self.footer is not None:
            return self.footer
        if path is not None and path in self.columns:
            return self.columns[path]
        key_id = (key_metadata or b"").decode("utf-8", "replace")
        if key_id in self.key_ids:
            return self.key_ids[key_id]
        what = "the footer" if path is None else f"column {path!r}"
        known = f" (key id {key_id!r})" if key_id else ""
        raise EncryptionError(f"no key given for {what}{known}", columns=(path or "*",))


def key_material_key(key: str) -> str:
    """Where parquet-java keeps a file's external key material: beside the file."""
    head, tail = posixpath.split(key)
    return posixpath.join(head, f"_KEY_MATERIAL_FOR_{tail}.json")


def _b64(text: Any, what: str) -> bytes:
    try:
        return base64.b64decode(str(text), validate=True)
    except (binascii.Error, ValueError):
        raise EncryptionError(f"key material: {what} is not base64") from None


def kms_key_lookup(kms: KmsClient, external_material: Mapping[str, str] | None = None) -> KeyLookup:
    """Resolve data keys from PKMT1 key material (internal or external) through ``kms``.

    ``external_material`` is the parsed ``_KEY_MATERIAL_FOR_<file>.json`` (``{reference:
    material JSON}``) for files written with external key material.
    """

    def lookup(key_metadata: bytes | None, path: str | None) -> bytes:
        what = "the footer" if path is None else f"column {path!r}"
        try:
            doc = json.loads(key_metadata or b"")
        except (ValueError, UnicodeDecodeError):
            raise EncryptionError(
                f"{what} was encrypted with an explicit key (key id "
                f"{(key_metadata or b'').decode('utf-8', 'replace')!r}), not through a KMS: "
                "pass ExplicitKeys",
                columns=(path or "*",),
            ) from None
        if not isinstance(doc, dict):
            raise EncryptionError(f"key material of {what} is not a JSON object")
        if doc.get("internalStorage") is False:
            reference = str(doc.get("keyReference"))
            if external_material is None or reference not in external_material:
                raise EncryptionError(
                    f"{what} keeps its key material outside the file (reference "
                    f"{reference!r}); the _KEY_MATERIAL_FOR_ file was not found or lacks it",
                    columns=(path or "*",),
                )
            try:
                doc = json.loads(external_material[reference])
            except (ValueError, TypeError):
                raise EncryptionError(f"external key material of {what} is not JSON") from None
            if not isinstance(doc, dict):
                raise EncryptionError(f"external key material of {what} is not a JSON object")
        return _unwrap(kms, doc, what)

    return lookup


def _unwrap(kms: KmsClient, material: dict[str, Any], what: str) -> bytes:
    master = material.get("masterKeyID")
    wrapped_dek = material.get("wrappedDEK")
    if not isinstance(master, str) or not isinstance(wrapped_dek, str):
        raise EncryptionError(f"key material of {what} lacks masterKeyID or wrappedDEK")
    try:
        if not material.get("doubleWrapping"):
            return bytes(kms.unwrap_key(wrapped_dek, master))
        kek = bytes(kms.unwrap_key(str(material.get("wrappedKEK")), master))
    except EncryptionError:
        raise
    except Exception as exc:  # a KMS client is user code: any failure is a key problem
        detail = type(exc).__name__
        raise EncryptionError(f"KMS cannot unwrap the key of {what}: {detail}") from None
    kek_id = _b64(material.get("keyEncryptionKeyID"), "keyEncryptionKeyID")
    sealed = _b64(wrapped_dek, "wrappedDEK")
    from cryptography.exceptions import InvalidTag
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    try:
        # parquet-java's local wrapping: nonce | ciphertext | tag, the KEK id as AAD.
        return bytes(AESGCM(kek).decrypt(sealed[:12], sealed[12:], kek_id))
    except (InvalidTag, ValueError):
        raise EncryptionError(f"cannot unwrap the data key of {what}: wrong master key") from None


def read_encrypted(
    source: Store | str | os.PathLike[str],
    key: str | None = None,
    *,
    keys: ExplicitKeys | None = None,
    kms: KmsClient | None = None,
    aad_prefix: bytes | None = None,
    columns: Sequence[str] | None = None,
) -> pa.Table:
    """Read a file another writer encrypted, from a local path or a Store key.

    Give ``keys`` (explicit keys) or ``kms`` (key material in the file, or external key
    material in ``_KEY_MATERIAL_FOR_<file>.json`` beside it, loaded here), and
    ``aad_prefix`` when the writer used one without storing it.

    Raises:
        EncryptionError: a key is missing or wrong, or the AAD prefix is needed or wrong.
        InvalidFormat: not a (readable) Parquet file.
        NotFound: no such file.
    """
    from parquetry.parquet.encryption import DecryptionSettings
    from parquetry.parquet.files import read_table

    if key is None:
        data, material_doc, name = _from_path(os.fspath(source))  # type: ignore[arg-type]
    else:
        store = source
        if isinstance(store, str | os.PathLike):
            raise InvalidArgument("read_encrypted(path) takes no key; pass a Store with a key")
        data, material_doc, name = _from_store(store, key)
    material = _parse_material(material_doc, name) if material_doc is not None else None
    settings = DecryptionSettings(
        kms, keys=keys, aad_prefix=aad_prefix, key_material=material or None
    )
    # parquetry decrypts whatever wrote the file: one code path for every writer.
    plaintext = settings.decrypt(data, name)
    return read_table(plaintext, columns=columns)


def _from_path(path: str) -> tuple[bytes, bytes | None, str]:
    try:
        with open(path, "rb") as file:
            data = file.read()
    except FileNotFoundError:
        raise NotFound(f"{path} does not exist", key=path) from None
    except OSError as exc:
        raise InvalidArgument(f"cannot read {path}: {exc.strerror}") from None
    material: bytes | None = None
    try:
        with open(key_material_key(path), "rb") as file:
            material = file.read()
    except OSError:
        pass  # no external key material: the usual case
    return data, material, path


def _from_store(store: Store, key: str) -> tuple[bytes, bytes | None, str]:
    data = bytes(store.get(key))
    try:
        material: bytes | None = bytes(store.get(key_material_key(key)))
    except NotFound:
        material = None
    return data, material, key


def _parse_material(doc: bytes, name: str) -> dict[str, str]:
    try:
        parsed = json.loads(doc)
    except (ValueError, UnicodeDecodeError):
        raise EncryptionError(f"{key_material_key(name)} is not JSON") from None
    if not isinstance(parsed, dict) or not all(isinstance(v, str) for v in parsed.values()):
        raise EncryptionError(f"{key_material_key(name)} is not a key material document")
    return parsed
