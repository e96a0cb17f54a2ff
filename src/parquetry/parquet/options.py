"""One frozen options value shared by every writer (codec, snapshots, datasets, Spark).

Defaults produce files that Spark 4, DuckDB, Polars and pandas all read: zstd level 1 (a
third of snappy's size at similar speed), µs timestamps, data page v1, compliant nested
lists, page index on (Spark prunes pages with it), statistics on, no INT96, no brotli.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from parquetry.errors import InvalidArgument
from parquetry.parquet.distinct import count_distinct
from parquetry.parquet.encryption import EncryptionSettings, KmsClient

__all__ = ["BloomFilter", "WriteOptions"]

_CODECS = ("none", "snappy", "gzip", "zstd", "lz4", "brotli")
_LEVELS = {"gzip": (1, 9), "zstd": (-131072, 22), "brotli": (0, 11), "lz4": (1, 12)}
#: Rows looked at to decide the dictionary policy of a column when no row-group size is set
#: (pyarrow's default row group): a dictionary lives per column chunk, so the ratio that
#: matters is distinct values per row group.
DICTIONARY_SAMPLE_ROWS = 1024 * 1024
_PROBE_ROWS = 65_536
_UNIQUE_PROBE_RATIO = 0.9


@dataclass(frozen=True, slots=True, kw_only=True)
class BloomFilter:
    """A split-block bloom filter on one column (``ndv`` distinct values, ``fpp`` rate)."""

    column: str
    ndv: int | None = None
    fpp: float | None = None

    def pyarrow_option(self) -> dict[str, Any] | bool:
        option: dict[str, Any] = {}
        if self.ndv is not None:
            option["ndv"] = self.ndv
        if self.fpp is not None:
            option["fpp"] = self.fpp
        return option or True


@dataclass(frozen=True, slots=True, kw_only=True)
class WriteOptions:
    """How Parquet files are written.

    Args:
        compression: ``zstd`` (default), ``snappy``, ``lz4``, ``gzip``, ``none`` or
            ``brotli`` (Spark cannot read brotli).
        compression_level: Level for zstd/gzip/brotli/lz4; ``None`` = the codec's default.
        row_group_size: Rows per row group. ``None`` = the writer's default: 1 Mi rows
            (pyarrow's) for Arrow tables (snapshots, datasets, Spark), 128 Ki rows for records
            (the codec and the stream writer, which encode one row group on a background
            thread while converting the next). Not part of :meth:`writer_kwargs`: pass it to
            ``write_table`` / ``ParquetWriter.write_table``.
        dictionary: ``"auto"`` dictionary-encodes only low-cardinality columns of the
            ``sample`` given to :meth:`writer_kwargs` (all columns when there is no sample);
            ``True``/``False`` for all or none; or a tuple of column names.
        dictionary_max_ratio: ``"auto"``: a column qualifies when distinct / rows ≤ this.
        write_page_index: Write ColumnIndex/OffsetIndex (Spark skips pages with it).
        bloom_filters: Bloom filters for chosen columns.
        sorting_columns: ``((column, "ascending"|"descending"), ...)`` recorded in row groups
            (a claim: the writer does not sort).
        data_page_version: ``"1.0"`` (default, read by every engine) or ``"2.0"``.
        encryption: Modular encryption (:class:`EncryptionSettings`), or ``None``.
        extra: Extra keyword arguments for pyarrow, applied last.
    """

    compression: str = "zstd"
    compression_level: int | None = 1
    row_group_size: int | None = None
    dictionary: bool | str | tuple[str, ...] = "auto"
    dictionary_max_ratio: float = 0.1
    write_page_index: bool = True
    bloom_filters: tuple[BloomFilter, ...] = ()
    sorting_columns: tuple[tuple[str, str], ...] = ()
    data_page_version: str = "1.0"
    encryption: EncryptionSettings | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        codec = self.compression.lower()
        if codec not in _CODECS:
            raise InvalidArgument(f"unknown compression {self.compression!r}; use one of {_CODECS}")
        object.__setattr__(self, "compression", codec)
        if self.compression_level is not None and codec in _LEVELS:
            low, high = _LEVELS[codec]
            if not low <= self.compression_level <= high:
                raise InvalidArgument(
                    f"{codec} level must be in [{low}, {high}], got {self.compression_level}"
                )
        if self.row_group_size is not None and self.row_group_size <= 0:
            raise InvalidArgument(f"row_group_size must be positive, got {self.row_group_size}")
        if isinstance(self.dictionary, str) and self.dictionary != "auto":
            raise InvalidArgument(
                f"dictionary must be 'auto', a bool or columns, got {self.dictionary!r}"
            )
        if isinstance(self.dictionary, list):
            object.__setattr__(self, "dictionary", tuple(self.dictionary))
        if not 0 < self.dictionary_max_ratio <= 1:
            raise InvalidArgument("dictionary_max_ratio must be in (0, 1]")
        for column, order in self.sorting_columns:
            if order not in ("ascending", "descending"):
                raise InvalidArgument(f"sort order of {column!r} must be ascending or descending")
        if self.data_page_version not in ("1.0", "2.0"):
            raise InvalidArgument("data_page_version must be '1.0' or '2.0'")

    # --- pyarrow arguments ------------------------------------------------------------------

    def writer_kwargs(self, schema: pa.Schema, sample: pa.Table | None = None) -> dict[str, Any]:
        """Keyword arguments for ``pq.ParquetWriter`` / ``pq.write_table``.

        Args:
            schema: The Arrow schema of the file.
            sample: Data of the file (or its first batch), used by ``dictionary="auto"``.
        """
        kwargs: dict[str, Any] = {
            "compression": self.compression,
            "version": "2.6",
            "coerce_timestamps": "us",
            "allow_truncated_timestamps": False,
            "data_page_version": self.data_page_version,
            "use_compliant_nested_type": True,
            "use_dictionary": self._dictionary(schema, sample),
            "write_statistics": True,
            "store_schema": True,
            "write_page_index": self.write_page_index,
        }
        if self.compression_level is not None and self.compression in _LEVELS:
            kwargs["compression_level"] = self.compression_level
        self.check_columns(schema)
        if self.bloom_filters:
            kwargs["bloom_filter_options"] = {
                b.column: b.pyarrow_option() for b in self.bloom_filters
            }
        if self.sorting_columns:
            kwargs["sorting_columns"] = pq.SortingColumn.from_ordering(
                schema, list(self.sorting_columns)
            )
        if self.encryption is not None:
            kwargs["encryption_properties"] = self.encryption.file_encryption_properties(
                schema.names
            )
        kwargs.update(self.extra)
        return kwargs

    def check_columns(self, schema: pa.Schema) -> None:
        """Raise :class:`InvalidArgument` if an option names a column not in ``schema``."""
        names = set(schema.names)
        self._check_columns((b.column for b in self.bloom_filters), names, "bloom filter")
        self._check_columns((c for c, _ in self.sorting_columns), names, "sorting")
        if isinstance(self.dictionary, tuple):
            self._check_columns(self.dictionary, names, "dictionary")

    @staticmethod
    def _check_columns(columns: Any, names: set[str], what: str) -> None:
        for column in columns:
            if column.split(".")[0] not in names:
                raise InvalidArgument(f"{what} column {column!r} is not in the schema")

    def _dictionary(self, schema: pa.Schema, sample: pa.Table | None) -> bool | list[str]:
        if isinstance(self.dictionary, bool):
            return self.dictionary
        if isinstance(self.dictionary, tuple):
            return list(self.dictionary)
        if sample is None or sample.num_rows == 0:
            return True
        rows = self.row_group_size or DICTIONARY_SAMPLE_ROWS
        return low_cardinality_columns(sample.slice(0, rows), self.dictionary_max_ratio)

    # --- JSON -------------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        """A JSON-able document (the KMS client of encryption settings is left out)."""
        return {
            "compression": self.compression,
            "compression_level": self.compression_level,
            "row_group_size": self.row_group_size,
            "dictionary": list(self.dictionary)
            if isinstance(self.dictionary, tuple)
            else self.dictionary,
            "dictionary_max_ratio": self.dictionary_max_ratio,
            "write_page_index": self.write_page_index,
            "bloom_filters": [
                {"column": b.column, "ndv": b.ndv, "fpp": b.fpp} for b in self.bloom_filters
            ],
            "sorting_columns": [list(s) for s in self.sorting_columns],
            "data_page_version": self.data_page_version,
            "encryption": self.encryption.to_json() if self.encryption else None,
            "extra": dict(self.extra),
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any], *, kms: KmsClient | None = None) -> WriteOptions:
        """Inverse of :meth:`to_json`; ``kms`` re-attaches the KMS client for encryption."""
        dictionary = doc.get("dictionary", "auto")
        encryption = doc.get("encryption")
        return cls(
            compression=doc.get("compression", "zstd"),
            compression_level=doc.get("compression_level", 1),
            row_group_size=doc.get("row_group_size"),
            dictionary=tuple(dictionary) if isinstance(dictionary, list) else dictionary,
            dictionary_max_ratio=doc.get("dictionary_max_ratio", 0.1),
            write_page_index=doc.get("write_page_index", True),
            bloom_filters=tuple(BloomFilter(**b) for b in doc.get("bloom_filters", ())),
            sorting_columns=tuple((c, o) for c, o in doc.get("sorting_columns", ())),
            data_page_version=doc.get("data_page_version", "1.0"),
            encryption=EncryptionSettings.from_json(encryption, kms=kms) if encryption else None,
            extra=dict(doc.get("extra", {})),
        )


def low_cardinality_columns(sample: pa.Table, max_ratio: float) -> list[str]:
    """Flat columns whose distinct/rows ratio in ``sample`` is at most ``max_ratio``."""
    chosen: list[str] = []
    for name, column in zip(sample.column_names, sample.columns, strict=True):
        ctype = column.type
        if pa.types.is_nested(ctype) or pa.types.is_boolean(ctype) or pa.types.is_null(ctype):
            continue
        if pa.types.is_dictionary(ctype):
            chosen.append(name)
            continue
        rows = len(column) - column.null_count
        if rows == 0 or _looks_unique(column):
            continue
        distinct = count_distinct(column)
        if distinct / rows <= max_ratio:
            chosen.append(name)
    return chosen


def _looks_unique(column: pa.ChunkedArray) -> bool:
    """Whether the head of a long column is nearly all distinct: counting distinct values of
    a unique column over a whole row group costs ~0.15 s per million rows, for a known no."""
    if len(column) <= _PROBE_ROWS:
        return False
    head = column.slice(0, _PROBE_ROWS)
    present = len(head) - head.null_count
    distinct = count_distinct(head)
    return bool(present > 0 and distinct >= _UNIQUE_PROBE_RATIO * present)
