"""Read and write whole Parquet files safely: bytes, binary files or Store keys.

Reads check the raw footer first, so a non-Parquet input raises :class:`InvalidFormat` and
an encrypted file without keys raises :class:`EncryptionError` naming its encrypted columns,
never a raw pyarrow error (or a process abort, see :mod:`parquetry.parquet.footer`).
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import IO, TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from parquetry.errors import (
    EncryptionError,
    InvalidFormat,
    ResourceExhausted,
    SchemaViolation,
    resource_failure,
)
from parquetry.parquet.encryption import DecryptionSettings
from parquetry.parquet.footer import RawFooter, footer_from_bytes, footer_from_file
from parquetry.parquet.footer_check import check_plaintext_footer
from parquetry.parquet.options import WriteOptions

if TYPE_CHECKING:
    from parquetry.store.base import ObjectMeta, PutMode, Store

__all__ = [
    "Source",
    "open_parquet",
    "read_table",
    "read_table_from_store",
    "write_table_bytes",
    "write_table_to_store",
    "write_table_to_sink",
]

Source = bytes | bytearray | memoryview | IO[bytes] | io.RawIOBase
_READ_ERRORS = (pa.ArrowException, OSError, ValueError, EOFError)


def _as_file(source: Source) -> tuple[Any, RawFooter, str]:
    if isinstance(source, bytes | bytearray | memoryview):
        name = "<bytes>"
        raw = footer_from_bytes(source, name)
        return pa.BufferReader(source), raw, name
    name = str(getattr(source, "key", None) or getattr(source, "name", "<file>"))
    if not (hasattr(source, "seek") and hasattr(source, "read")):
        raise InvalidFormat(f"{name}: expected bytes or a seekable binary file", key=name)
    return source, footer_from_file(source, name), name


def _affected(encrypted: Sequence[str], columns: Sequence[str] | None) -> tuple[str, ...]:
    if columns is None:
        return tuple(encrypted)
    wanted = set(columns)
    return tuple(p for p in encrypted if p in wanted or p.split(".")[0] in wanted)


def check_readable(
    raw: RawFooter, name: str, columns: Sequence[str] | None, decryption: DecryptionSettings | None
) -> None:
    """Raise EncryptionError if reading ``columns`` needs keys that were not given."""
    if not raw.encrypted or decryption is not None:
        return
    if raw.encrypted_footer:
        raise EncryptionError(
            f"{name} has an encrypted footer: every column is encrypted and no keys were given",
            columns=("*",),
            key=name,
        )
    blocked = _affected([c.path for c in raw.encrypted_columns()], columns)
    if blocked:
        raise EncryptionError(
            f"{name}: columns {', '.join(blocked)} are encrypted and no keys were given",
            columns=blocked,
            key=name,
        )


def open_parquet(
    source: Source,
    *,
    columns: Sequence[str] | None = None,
    decryption: DecryptionSettings | None = None,
    pre_buffer: bool = True,
    rows: int | None = None,
) -> tuple[pq.ParquetFile, RawFooter, str]:
    """Open a Parquet file after checking its footer; return the file, footer and a name.

    A plaintext footer pyarrow would abort on or misread (``footer_check.pyarrow_hazard``),
    or whose row count is not ``rows`` (what a dataset version recorded for the file), is
    InvalidFormat naming the file before pyarrow sees it.

    ``pre_buffer`` (pyarrow's default) fetches every needed column chunk in a few
    coalesced reads before decoding: right for whole-file reads, wrong for streaming ones,
    which should read one row group at a time.
    """
    file, raw, name = _as_file(source)
    check_readable(raw, name, columns, decryption)
    if decryption is not None and decryption.decrypts_itself and raw.encrypted:
        # Explicit keys, AAD prefixes, external key material: beyond pyarrow's Python API,
        # so parquetry decrypts the whole file and pyarrow reads the plaintext.
        plaintext = decryption.decrypt(_whole(file), name)
        file, raw, decryption = pa.BufferReader(plaintext), footer_from_bytes(plaintext), None
    check_plaintext_footer(raw, name, rows)
    try:
        parquet_file = pq.ParquetFile(
            file,
            pre_buffer=pre_buffer,
            # Spark's default INT96 timestamps overflow nanoseconds outside 1677-2262.
            coerce_int96_timestamp_unit="us",
            # A page written with a CRC that no longer matches is damaged: an error naming
            # the file, not silently wrong values (pyarrow does not check by default).
            page_checksum_verification=True,
            decryption_properties=(
                decryption.file_decryption_properties() if decryption is not None else None
            ),
        )
    except EncryptionError:
        raise
    except _READ_ERRORS as exc:
        raise read_failure(raw, name, exc) from None
    return parquet_file, raw, name


def _whole(file: Any) -> bytes:
    if isinstance(file, pa.BufferReader):
        return bytes(file.read_buffer())
    file.seek(0)
    data: bytes = file.read()
    return data


def read_failure(
    raw: RawFooter, name: str, exc: BaseException
) -> InvalidFormat | EncryptionError | ResourceExhausted:
    """The parquetry error for a pyarrow failure: decryption problems on encrypted files,
    memory exhaustion never blamed on the file."""
    exhausted = resource_failure(exc, f"reading {name}", key=name)
    if exhausted is not None:
        return exhausted
    if raw.encrypted:
        detail = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        columns = tuple(c.path for c in raw.encrypted_columns()) or ("*",)
        return EncryptionError(f"{name}: cannot decrypt ({detail})", columns=columns, key=name)
    return _invalid(name, exc)


def _invalid(name: str, exc: BaseException) -> InvalidFormat:
    detail = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
    return InvalidFormat(f"{name}: not a readable Parquet file ({detail})", key=name)


def read_table(
    source: Source,
    *,
    columns: Sequence[str] | None = None,
    decryption: DecryptionSettings | None = None,
) -> pa.Table:
    """Read a whole file (or some top-level columns) into an Arrow table."""
    parquet_file, raw, name = open_parquet(source, columns=columns, decryption=decryption)
    try:
        return parquet_file.read(
            columns=list(columns) if columns is not None else None, use_threads=True
        )
    except EncryptionError:
        raise
    except KeyError as exc:
        raise InvalidFormat(f"{name}: {exc}", key=name) from None
    except _READ_ERRORS as exc:
        raise read_failure(raw, name, exc) from None


def read_table_from_store(
    store: Store,
    key: str,
    *,
    columns: Sequence[str] | None = None,
    decryption: DecryptionSettings | None = None,
) -> pa.Table:
    """Read ``key`` through ranged gets (only the footer and the needed column chunks)."""
    return read_table(store.open(key), columns=columns, decryption=decryption)


def write_table_to_sink(table: pa.Table, sink: Any, options: WriteOptions | None = None) -> None:
    """Write ``table`` as one Parquet file to a path-less binary sink or pyarrow stream."""
    opts = options or WriteOptions()
    kwargs = opts.writer_kwargs(table.schema, sample=table)
    try:
        pq.write_table(table, sink, row_group_size=opts.row_group_size, **kwargs)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        # e.g. nanoseconds that µs timestamps would truncate: refuse, never drop silently.
        detail = str(exc).splitlines()[0][:300]
        raise SchemaViolation(f"cannot write the table as Parquet: {detail}") from None


def write_table_bytes(table: pa.Table, options: WriteOptions | None = None) -> bytes:
    """One Parquet file holding ``table``, as bytes."""
    sink = pa.BufferOutputStream()
    write_table_to_sink(table, sink, options)
    data: bytes = sink.getvalue().to_pybytes()
    return data


def write_table_to_store(
    store: Store,
    key: str,
    table: pa.Table,
    options: WriteOptions | None = None,
    *,
    mode: PutMode | None = None,
    expected_version: str | None = None,
) -> ObjectMeta:
    """Write ``table`` as one Parquet file at ``key`` (one atomic put)."""
    from parquetry.store.base import PutMode

    sink = pa.BufferOutputStream()
    write_table_to_sink(table, sink, options)
    return store.put(
        key,
        memoryview(sink.getvalue()).cast("B"),
        mode=mode or PutMode.OVERWRITE,
        expected_version=expected_version,
    )
