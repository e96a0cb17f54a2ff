"""How readers notice kartothek's writes on the pointer.

:func:`foreign_pointer` compares the pointer's version token with the one the head recorded
for parquetry's last pointer write (when the pointer policy is ``every-commit`` in effect).
When the pointer is rewritten at all is :mod:`parquetry.dataset.pointer`'s business.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

from parquetry.dataset.metadata import DatasetDocument, decode_document
from parquetry.dataset.naming import metadata_key
from parquetry.errors import (
    DatasetNotFound,
    MetadataCorrupted,
    NotFound,
    ParquetryError,
    PointerCorruptedWarning,
)
from parquetry.store import Store

__all__ = ["foreign_pointer"]


def foreign_pointer(
    store: Store, uuid: str, last: Mapping[str, Any]
) -> tuple[tuple[DatasetDocument, str] | None, int]:
    """(kartothek's document and its format if another tool rewrote the pointer since our
    last write, requests). Only in ``every-commit`` mode (one HEAD, plus a GET when the
    pointer's version differs from the one we wrote)."""
    etag = last.get("etag")
    if not etag or last.get("mode", "every-commit") != "every-commit":
        return None, 0
    fmt = str(last.get("format") or "json")
    key = metadata_key(uuid, fmt)
    requests = 0
    try:
        if fmt != "json":
            # kartothek reads (and rewrites) the JSON pointer first: one beside ours is its.
            requests += 1
            try:
                json_key = metadata_key(uuid, "json")
                store.head(json_key)
                fmt, key = "json", json_key
            except NotFound:
                pass
        requests += 1
        ours = key == metadata_key(uuid, str(last.get("format") or "json"))
        if ours and store.head(key).version == etag:
            return None, requests
        requests += 1
        doc = decode_document(store.get(key), fmt, key=key)
    except NotFound:
        if not any(store.exists(metadata_key(uuid, f)) for f in ("json", "msgpack.zstd")):
            # parquetry wrote a pointer and it is gone: the dataset was deleted (kartothek's
            # delete_dataset leaves parquetry's head behind); do not serve that head.
            raise DatasetNotFound(
                f"dataset {uuid!r} was deleted: its metadata file {key} is gone", key=key
            ) from None
        return None, requests + 2
    except MetadataCorrupted as exc:
        warnings.warn(
            PointerCorruptedWarning(
                f"the metadata file {key} of dataset {uuid!r} is unreadable ({exc}); using "
                "the newest readable version (the head and version entries; run repair to "
                "rewrite the metadata file)"
            ),
            stacklevel=4,
        )
        return None, requests
    except ParquetryError:
        return None, requests
    return ((doc, fmt) if doc.version is None else None), requests
