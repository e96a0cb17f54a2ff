"""Encrypted datasets: what the version document records and what reads and appends need.

A dataset created with ``write_options=WriteOptions(encryption=...)`` records the settings'
JSON (master key *ids*, encrypted columns, footer mode, algorithm; never key material) in
its version documents. Appends then keep that encryption: with the KMS of
``Dataset.open(..., decryption=DecryptionSettings(kms))`` the recorded settings are applied
to the new files, explicit settings must match the recorded ones, and an append without
any keys is refused (it would add plaintext files to an encrypted dataset). Reads without
keys of encrypted columns raise :class:`EncryptionError` naming the dataset.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from parquetry.errors import EncryptionError, InvalidArgument
from parquetry.parquet import DecryptionSettings, EncryptionSettings, WriteOptions

__all__ = ["check_keys_for_read", "encrypted_columns", "write_options_for"]


def _identity(settings: Mapping[str, Any]) -> tuple[Any, ...]:
    keys = settings.get("column_keys") or {}
    return (
        settings.get("footer_key"),
        tuple(sorted((k, tuple(sorted(v))) for k, v in keys.items())),
        bool(settings.get("plaintext_footer", False)),
        bool(settings.get("uniform", False)),
        settings.get("algorithm", "AES_GCM_V1"),
    )


def _describe(settings: Mapping[str, Any]) -> str:
    keys = settings.get("column_keys") or {}
    columns = sorted(c for cols in keys.values() for c in cols)
    what = "every column" if settings.get("uniform") else f"columns {columns}"
    return f"footer key {settings.get('footer_key')!r}, {what}"


def write_options_for(
    uuid: str,
    recorded: Mapping[str, Any] | None,
    given: WriteOptions | None,
    decryption: DecryptionSettings | None,
) -> WriteOptions | None:
    """The write options for new files of a dataset, keeping its recorded encryption."""
    wanted = given.encryption if given is not None else None
    if recorded is None:
        if wanted is not None:
            raise InvalidArgument(
                f"dataset {uuid!r} is not encrypted: encrypted files would make it readable "
                "only in part without keys; create an encrypted dataset instead"
            )
        return given
    if wanted is not None:
        if _identity(wanted.to_json()) != _identity(recorded):
            raise InvalidArgument(
                f"dataset {uuid!r} is encrypted with {_describe(recorded)}; the given "
                f"encryption settings ({_describe(wanted.to_json())}) differ"
            )
        return given
    if decryption is None:
        raise EncryptionError(
            f"dataset {uuid!r} is encrypted ({_describe(recorded)}): new files must be "
            "encrypted too; open it with decryption=DecryptionSettings(kms) or pass "
            "write_options with its encryption settings",
            columns=encrypted_columns(recorded, ()),
        )
    settings = EncryptionSettings.from_json(recorded, kms=decryption.kms)
    return replace(given or WriteOptions(), encryption=settings)


def encrypted_columns(recorded: Mapping[str, Any], all_columns: Iterable[str]) -> tuple[str, ...]:
    """Columns a reader without keys cannot read (all of them if the footer is encrypted)."""
    if recorded.get("uniform") or not recorded.get("plaintext_footer", False):
        return tuple(all_columns) or ("*",)
    keys = recorded.get("column_keys") or {}
    return tuple(sorted({c.split(".")[0] for cols in keys.values() for c in cols}))


def check_keys_for_read(
    uuid: str,
    recorded: Mapping[str, Any] | None,
    columns: Iterable[str],
    decryption: DecryptionSettings | None,
) -> None:
    """Raise EncryptionError if reading ``columns`` of the data files needs keys not given."""
    if recorded is None or decryption is not None:
        return
    wanted = list(columns)
    locked = set(encrypted_columns(recorded, wanted))
    blocked = tuple(c for c in wanted if c in locked or "*" in locked)
    if blocked:
        raise EncryptionError(
            f"dataset {uuid!r} is encrypted ({_describe(recorded)}): reading "
            f"{', '.join(blocked)} needs its keys; open it with "
            "decryption=DecryptionSettings(kms)",
            columns=blocked,
        )
