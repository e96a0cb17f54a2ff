"""Decide from the raw footer whether pyarrow may touch a file's metadata.

pyarrow ``std::terminate``s (SIGABRT, no exception) when it decodes column-chunk metadata it
cannot handle: an encrypted column without keys, statistics whose width does not fit the
physical type, a chunk whose physical type contradicts the schema. Tools that walk many
foreign files (``validate``, ``report``) ask :func:`safe_metadata` first: it reads the raw
footer with parquetry's own Thrift reader and hands pyarrow only footers that are safe.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from parquetry.errors import EncryptionError, InvalidFormat
from parquetry.parquet.footer import RawFooter, footer_from_store

if TYPE_CHECKING:
    import pyarrow.parquet as pq

    from parquetry.store.base import Store

__all__ = ["pyarrow_hazard", "safe_metadata"]

# Byte widths of the fixed-width physical types (BOOLEAN, INT32, INT64, INT96, FLOAT, DOUBLE).
_WIDTHS = {0: 1, 1: 4, 2: 8, 3: 12, 4: 4, 5: 8}
_FLBA = 7


def _leaves(elements: list[dict[int, Any]]) -> list[dict[int, Any]]:
    return [e for i, e in enumerate(elements) if i and not e.get(5)]


def pyarrow_hazard(raw: RawFooter) -> str | None:
    """Why pyarrow could abort on this (plaintext, unencrypted) footer, or None."""
    meta = raw.metadata or {}
    leaves = _leaves(meta.get(2, []))
    for rg_index, group in enumerate(meta.get(4, [])):
        chunks = group.get(1, [])
        if len(chunks) != len(leaves):
            return f"row group {rg_index} has {len(chunks)} column chunks for {len(leaves)} columns"
        for leaf, chunk in zip(leaves, chunks, strict=True):
            column = chunk.get(3)
            if column is None:
                continue
            name = ".".join(p.decode("utf-8", "replace") for p in column.get(3, [])) or "?"
            physical = leaf.get(1)
            if column.get(1, physical) != physical:
                return f"column {name!r} of row group {rg_index} contradicts the schema's type"
            width = leaf.get(2) if physical == _FLBA else _WIDTHS.get(physical)
            stats = column.get(12) or {}
            for field in (1, 2, 5, 6):
                value = stats.get(field)
                if width is not None and value is not None and len(value) != width:
                    return (
                        f"column {name!r} of row group {rg_index} has {len(value)}-byte "
                        f"statistics for a {width}-byte type"
                    )
    return None


def safe_metadata(store: Store, key: str, size: int | None = None) -> tuple[RawFooter, Any]:
    """The raw footer and pyarrow's ``FileMetaData`` of ``key``, if pyarrow can take it.

    Raises:
        EncryptionError: the file is encrypted (its metadata needs keys).
        InvalidFormat: the footer is malformed, or holds metadata pyarrow would abort on.
        NotFound: no such key.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    raw = footer_from_store(store, key, size)
    if raw.encrypted:
        columns = tuple(c.path for c in raw.encrypted_columns()) or ("*",)
        what = "footer" if raw.encrypted_footer else f"columns {', '.join(columns)}"
        raise EncryptionError(
            f"{key} is encrypted ({what}): it cannot be checked without keys",
            columns=columns,
            key=key,
        )
    hazard = pyarrow_hazard(raw)
    if hazard is not None:
        raise InvalidFormat(f"{key}: corrupted Parquet footer ({hazard})", key=key)
    try:
        meta: pq.FileMetaData = pq.read_metadata(pa.BufferReader(raw.tail))
    except (pa.ArrowException, OSError, ValueError) as exc:
        detail = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        raise InvalidFormat(f"{key}: not a readable Parquet file ({detail})", key=key) from None
    return raw, meta
