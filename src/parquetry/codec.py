"""Public entry point of the explicit-schema record codec (Lode's Parquet codec contract).

``from parquetry.codec import ParquetCodec, ParquetSchema, ParquetField, ParquetType,
ParquetCompression``; the implementation lives in :mod:`parquetry.parquet`.
"""

from parquetry.errors import CodecNotStreamable, InvalidFormat, SchemaViolation
from parquetry.parquet.codec import ParquetCodec
from parquetry.parquet.schema import ParquetCompression, ParquetField, ParquetSchema, ParquetType
from parquetry.parquet.stats import ColumnStats, FileStats
from parquetry.parquet.stream import ParquetStreamWriter

__all__ = [
    "CodecNotStreamable",
    "ColumnStats",
    "FileStats",
    "InvalidFormat",
    "ParquetCodec",
    "ParquetCompression",
    "ParquetField",
    "ParquetSchema",
    "ParquetStreamWriter",
    "ParquetType",
    "SchemaViolation",
]
