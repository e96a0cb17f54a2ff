"""When the kartothek pointer is rewritten, and how readers notice kartothek's writes.

:func:`pointer_due` is the one hook of the pointer policy (refined by
``parquetry.dataset.pointer`` where present): ``every-commit`` while the pointer is at most
``POINTER_EVERY_COMMIT_BYTES``; above that (``auto``) only at checkpoints, once the commits
since the last pointer write times ``CHECKPOINT_TAIL_BYTES`` reach the pointer's size.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

from parquetry.dataset.metadata import DatasetDocument, decode_document
from parquetry.dataset.naming import metadata_key
from parquetry.errors import MetadataCorrupted, NotFound, ParquetryError, PointerCorruptedWarning
from parquetry.store import Store

__all__ = ["POINTER_EVERY_COMMIT_BYTES", "foreign_pointer", "pointer_due", "pointer_mode"]

POINTER_EVERY_COMMIT_BYTES = 1 << 20
AMORTISED_BYTES = 64 * 1024


def pointer_mode(last: Mapping[str, Any]) -> str:
    """The mode the bookkeeping of the last pointer write implies."""
    size = last.get("bytes")
    if not isinstance(size, int) or size <= POINTER_EVERY_COMMIT_BYTES:
        return "every-commit"
    return "auto"


def pointer_due(last: Mapping[str, Any], number: int, checkpoint: bool) -> bool:
    """Whether the commit of version ``number`` rewrites the pointer (``last``: the head's
    bookkeeping of the previous pointer write, empty when unknown)."""
    if pointer_mode(last) == "every-commit":
        return True
    since = number - int(last.get("number", -1))
    return checkpoint and since * AMORTISED_BYTES >= int(last["bytes"])


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
        return None, requests
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
