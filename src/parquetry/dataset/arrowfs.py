"""A read-only ``pyarrow.fs`` filesystem over a :class:`Store`, for ``pyarrow.dataset``.

Local stores map to pyarrow's native local filesystem (paths under the store root); other
stores go through a small handler doing ranged gets, so DuckDB/Polars/pyarrow can scan an
exact snapshot of a dataset on any store.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NoReturn

import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.fs as pafs

from parquetry.errors import CapabilityNotSupported, NotFound
from parquetry.parquet.encryption import DecryptionSettings
from parquetry.parquet.files import check_readable
from parquetry.parquet.footer import footer_from_store
from parquetry.parquet.footer_check import check_plaintext_footer
from parquetry.store import LocalStore, Store

if TYPE_CHECKING:
    from parquetry.dataset.plan import PlannedFile

__all__ = ["arrow_filesystem", "pyarrow_dataset"]


class _StoreHandler(pafs.FileSystemHandler):  # type: ignore[misc]
    def __init__(self, store: Store):
        self.store = store

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _StoreHandler) and other.store == self.store

    def __ne__(self, other: object) -> bool:
        return not self == other

    def get_type_name(self) -> str:
        return "parquetry"

    def normalize_path(self, path: str) -> str:
        return path

    def get_file_info(self, paths: list[str]) -> list[pafs.FileInfo]:
        out = []
        for path in paths:
            try:
                meta = self.store.head(path)
                out.append(pafs.FileInfo(path, pafs.FileType.File, size=meta.size))
            except NotFound:
                out.append(pafs.FileInfo(path, pafs.FileType.NotFound))
        return out

    def get_file_info_selector(self, selector: Any) -> list[pafs.FileInfo]:
        return [
            pafs.FileInfo(m.key, pafs.FileType.File, size=m.size)
            for m in self.store.list(selector.base_dir)
        ]

    def open_input_file(self, path: str) -> pa.NativeFile:
        return pa.PythonFile(self.store.open(path), mode="r")

    def open_input_stream(self, path: str) -> pa.NativeFile:
        return pa.BufferReader(self.store.get(path))

    def _read_only(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise CapabilityNotSupported(
            "the dataset filesystem is read-only", capability="write", store=self.store.url
        )

    create_dir = delete_dir = delete_dir_contents = delete_root_dir_contents = _read_only
    delete_file = move = copy_file = open_output_stream = open_append_stream = _read_only


def arrow_filesystem(store: Store) -> tuple[pafs.FileSystem, str]:
    """A pyarrow filesystem for ``store`` and the path prefix to put before keys."""
    if isinstance(store, LocalStore):
        return pafs.LocalFileSystem(), str(store.root) + "/"
    return pafs.PyFileSystem(_StoreHandler(store)), ""


def pyarrow_dataset(
    store: Store,
    schema: pa.Schema,
    files: Sequence[PlannedFile],
    *,
    decryption: DecryptionSettings | None = None,
) -> pads.Dataset:
    """A ``pyarrow.dataset`` over exactly ``files``, partition values as guarantees
    (``decryption``: keys for encrypted files).

    Every file's footer is checked first (one ranged read each, 8 at a time): pyarrow's
    scan aborts the process on some footers and silently drops rows on a lowered row count
    (``footer_check``); such a file is InvalidFormat naming it, before any scan.

    Raises:
        InvalidFormat: a file's footer is corrupted or disagrees with its recorded rows.
        EncryptionError: a file is encrypted and no ``decryption`` was given.
    """
    store.map_concurrent(lambda planned: _check(store, planned, decryption), files)
    fs, root = arrow_filesystem(store)
    exprs = []
    for pf in files:
        expr = pads.scalar(True)
        for k, v in pf.partition:
            expr = expr & (pads.field(k) == pa.scalar(v, type=schema.field(k).type))
        exprs.append(expr)
    if isinstance(store, LocalStore):
        # pyarrow opens these paths itself and follows links: refuse (UnsafePath) a file that
        # a link inside the root would take outside it.
        paths = [str(store.path(pf.key)) for pf in files]
    else:
        paths = [root + pf.key for pf in files]
    return pads.FileSystemDataset.from_paths(
        paths,
        schema=schema,
        format=_format(decryption),
        filesystem=fs,
        partitions=exprs,
    )


def _check(store: Store, planned: PlannedFile, decryption: DecryptionSettings | None) -> None:
    try:
        raw = footer_from_store(store, planned.key, planned.size)
    except NotFound:
        return  # the scan reports it (a collected version: see to_pyarrow_dataset)
    check_readable(raw, planned.key, None, decryption)
    check_plaintext_footer(raw, planned.key, planned.rows)


def _format(decryption: DecryptionSettings | None) -> pads.ParquetFileFormat:
    if decryption is None:
        return pads.ParquetFileFormat()
    options = pads.ParquetFragmentScanOptions(
        decryption_properties=decryption.file_decryption_properties()
    )
    return pads.ParquetFileFormat(default_fragment_scan_options=options)
