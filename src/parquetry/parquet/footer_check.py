"""Decide from the raw footer whether pyarrow may touch a file's metadata.

pyarrow ``std::terminate``s (SIGABRT, no exception) when it decodes column-chunk metadata it
cannot handle: an encrypted column without keys, statistics whose width does not fit the
physical type, a chunk whose physical type contradicts the schema. Tools that walk many
foreign files (``validate``, ``report``) ask :func:`safe_metadata` first: it reads the raw
footer with parquetry's own Thrift reader and hands pyarrow only footers that are safe.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from parquetry.errors import EncryptionError, InvalidFormat
from parquetry.parquet.footer import RawFooter, footer_from_store
from parquetry.parquet.thrift_schema import FILE_META_DATA, REQUIRED

if TYPE_CHECKING:
    import pyarrow.parquet as pq

    from parquetry.store.base import Store

__all__ = ["check_plaintext_footer", "footer_rows", "pyarrow_hazard", "safe_metadata"]

# Byte widths of the fixed-width physical types (BOOLEAN, INT32, INT64, INT96, FLOAT, DOUBLE).
_WIDTHS = {0: 1, 1: 4, 2: 8, 3: 12, 4: 4, 5: 8}
_FLBA = 7


def _leaves(elements: list[dict[int, Any]]) -> list[tuple[dict[int, Any], int, int]]:
    """Leaf elements with their max repetition and definition levels (depth-first)."""
    out: list[tuple[dict[int, Any], int, int]] = []

    def walk(index: int, rep: int, definition: int) -> int:
        if index >= len(elements):
            raise InvalidFormat("the footer's schema is truncated")
        element = elements[index]
        if index:
            repetition = element.get(3, 0)
            rep += repetition == 2
            definition += repetition in (1, 2)
        children = element.get(5, 0)
        index += 1
        if index > 1 and not children:
            out.append((element, rep, definition))
        for _ in range(children):
            index = walk(index, rep, definition)
        return index

    if elements:
        walk(0, 0, 0)
    return out


def _utf8(names: Iterable[bytes]) -> bool:
    try:
        for name in names:
            name.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _holds_required(spec: Any) -> bool:
    if isinstance(spec, tuple):
        return _holds_required(spec[1])
    if not isinstance(spec, dict):
        return False
    return id(spec) in REQUIRED or any(_holds_required(sub) for sub in spec.values())


# Per struct spec: its required fields and the sub-structs that hold any (computed once:
# the walk runs on every footer a compaction reads, 10,000 of them for tiny files).
_WALK: dict[int, tuple[tuple[int, ...], tuple[tuple[int, Any], ...]]] = {}


def _walk_plan(spec: dict[int, Any]) -> tuple[tuple[int, ...], tuple[tuple[int, Any], ...]]:
    plan = _WALK.get(id(spec))
    if plan is None:
        subs = tuple((f, sub) for f, sub in spec.items() if _holds_required(sub))
        plan = _WALK[id(spec)] = (REQUIRED.get(id(spec), ()), subs)
    return plan


def _missing_required(value: Any, spec: Any) -> str | None:
    """Where a struct of ``value`` lacks a field parquet.thrift requires (a path of field
    ids and list positions), or None.

    pyarrow's generated reader refuses such a footer; parquetry's reader keeps whatever is
    there, so the paths that trust it (the binary copy, the staging decode) would accept a
    file every other reader refuses."""
    if isinstance(spec, tuple):
        for i, element in enumerate(value if isinstance(value, list) else []):
            found = _missing_required(element, spec[1])
            if found is not None:
                return f"[{i}]{found}"
        return None
    if not isinstance(value, dict):
        return None
    required, subs = _walk_plan(spec)
    for field in required:
        if field not in value:
            return f" lacks required field {field}"
    for field, sub in subs:
        if field in value:
            found = _missing_required(value[field], sub)
            if found is not None:
                return f".{field}{found}"
    return None


def footer_rows(raw: RawFooter) -> int:
    """The rows a reader returns: the sum of the row groups' counts (pyarrow goes by these,
    not by the file's num_rows)."""
    return sum(group.get(3, 0) for group in (raw.metadata or {}).get(4, []))


def pyarrow_hazard(raw: RawFooter) -> str | None:
    """Why pyarrow could abort on, refuse, or silently misread this (plaintext, unencrypted)
    footer, or None.

    Misread: pyarrow returns exactly a row group's ``num_rows`` rows, whatever its pages
    hold, so a lowered count loses rows without an error. The row groups' counts must sum
    to the file's, and a chunk of a non-repeated column holds one value per row."""
    if raw.dropped_fields:
        return f"{raw.dropped_fields} list(s) or integer(s) of the wrong type or range"
    meta = raw.metadata or {}
    missing = _missing_required(meta, FILE_META_DATA)
    if missing is not None:
        return f"the footer{missing}"  # e.g. "the footer.4[0].1[2].3 lacks required field 9"
    if not _utf8(e.get(4, b"") for e in meta.get(2, [])):
        return "column names that are not UTF-8"
    try:
        leaves = _leaves(meta.get(2, []))
    except (InvalidFormat, RecursionError):
        return "its schema is truncated or nested too deep"
    groups = meta.get(4, [])
    total = footer_rows(raw)
    # parquet-rs 0.3 wrote num_rows 0 (parquet-testing's repeated_no_annotation.parquet);
    # readers go by the row groups' counts, so that loses nothing.
    if total != meta.get(3) and meta.get(3) != 0:
        return f"its row groups hold {total} rows, its num_rows says {meta.get(3)}"
    for rg_index, group in enumerate(groups):
        chunks = group.get(1, [])
        if len(chunks) != len(leaves):
            return f"row group {rg_index} has {len(chunks)} column chunks for {len(leaves)} columns"
        for (leaf, max_rep, max_def), chunk in zip(leaves, chunks, strict=True):
            column = chunk.get(3)
            if column is None:
                continue
            if not _utf8(column.get(3, [])):
                return f"a column path of row group {rg_index} that is not UTF-8"
            name = ".".join(p.decode("utf-8", "replace") for p in column.get(3, [])) or "?"
            sizes = column.get(16) or {}
            for field, level in ((2, max_rep), (3, max_def)):
                histogram = sizes.get(field)
                if histogram and len(histogram) != level + 1:
                    return (
                        f"column {name!r} of row group {rg_index} has a level histogram of "
                        f"{len(histogram)} entries for {level + 1} levels"
                    )
            if not max_rep and column.get(5, group.get(3)) != group.get(3):
                return (
                    f"column {name!r} of row group {rg_index} holds {column.get(5)} values "
                    f"for {group.get(3)} rows"
                )
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


def check_plaintext_footer(raw: RawFooter, name: str, rows: int | None = None) -> None:
    """Raise InvalidFormat naming ``name`` if pyarrow must not see this footer: a hazard
    (:func:`pyarrow_hazard`), or a row count other than the ``rows`` a dataset version
    recorded for the file (rows lost to a lowered count, the file swapped...). Encrypted
    files are left to decryption: their footers hold no plaintext chunk metadata to check.
    """
    if raw.encrypted or raw.metadata is None:
        return
    hazard = pyarrow_hazard(raw)
    if hazard is not None:
        raise InvalidFormat(f"{name}: corrupted Parquet footer ({hazard})", key=name)
    if rows is None:
        return
    found = footer_rows(raw)
    if found != rows:
        raise InvalidFormat(
            f"{name}: the dataset version recorded {rows} rows for the file, its footer says "
            f"{found}",
            key=name,
        )


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
