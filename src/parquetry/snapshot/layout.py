"""Every rule about where a snapshot dataset's objects live, in one place.

A committed dataset is exactly remote-store 0.33.0's layout::

    {key}/data.parquet                 when the dataset has one part
    {key}/part-00000.parquet ...       when it has more than one
    {key}/manifest.json
    {key}/_SUCCESS                     empty, written last

parquetry adds two things remote-store ignores (it reads only the parts its manifest lists):

    {key}/_staging/{write_id}/{name}   parts of a write not yet committed
    {key}/_parquetry_switch.json       the journal (and lock) of a switch in progress

A snapshot owns exactly these objects; a dataset stored below ``{key}/`` is another
dataset. The reserved names above may not appear in any segment of a dataset key.
"""

from __future__ import annotations

import re

from parquetry.errors import InvalidArgument, InvalidKey
from parquetry.store.keys import validate_key

__all__ = [
    "DATA_FILE",
    "JOURNAL",
    "MANIFEST",
    "RESERVED",
    "STAGING",
    "SUCCESS",
    "check_dataset_key",
    "check_name",
    "journal_key",
    "manifest_key",
    "part_key",
    "part_names",
    "staged_key",
    "staging_prefix",
    "success_key",
    "write_staging_prefix",
]

DATA_FILE = "data.parquet"
MANIFEST = "manifest.json"
SUCCESS = "_SUCCESS"
STAGING = "_staging"
JOURNAL = "_parquetry_switch.json"
#: Names a snapshot uses for its own objects: never a segment of a dataset key.
RESERVED = frozenset({STAGING, SUCCESS, MANIFEST, JOURNAL})

# Write ids and staged part names become one key segment each.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._=-]{0,199}")


def check_dataset_key(key: object) -> str:
    """Return ``key`` if it can name a dataset directory, else raise :class:`InvalidKey`."""
    if not isinstance(key, str):
        raise InvalidKey(f"dataset key must be a str, got {type(key).__name__}")
    if key == "":
        raise InvalidKey("dataset key is empty; a dataset needs its own directory", key=key)
    validate_key(key)
    # In any segment, not only the last: writing snapshot "a" deletes what lies in
    # "a/_staging/", so a dataset at "a/_staging/keep" would be lost.
    for segment in key.split("/"):
        if segment in RESERVED:
            raise InvalidKey(
                f"dataset key {key!r} contains the reserved name {segment!r} (snapshot "
                f"datasets keep their own objects under it); choose another name",
                key=key,
            )
    return key


def check_name(what: str, name: object) -> str:
    """Validate a write id or a staged part name (one plain key segment)."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise InvalidArgument(
            f"{what} must be 1-200 characters of letters, digits, '.', '_', '=', '-' "
            f"(not starting with a symbol), got {name!r}"
        )
    return name


def part_names(count: int) -> list[str]:
    """File names of a dataset's parts: ``data.parquet`` iff there is exactly one."""
    if count == 1:
        return [DATA_FILE]
    return [f"part-{i:05d}.parquet" for i in range(count)]


def part_key(key: str, name: str) -> str:
    return f"{key}/{name}"


def manifest_key(key: str) -> str:
    return f"{key}/{MANIFEST}"


def success_key(key: str) -> str:
    return f"{key}/{SUCCESS}"


def journal_key(key: str) -> str:
    return f"{key}/{JOURNAL}"


def staging_prefix(key: str) -> str:
    return f"{key}/{STAGING}"


def write_staging_prefix(key: str, write_id: str) -> str:
    return f"{key}/{STAGING}/{write_id}"


def staged_key(key: str, write_id: str, name: str) -> str:
    return f"{key}/{STAGING}/{write_id}/{name}"
