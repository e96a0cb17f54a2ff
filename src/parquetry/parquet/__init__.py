"""The Parquet file layer: write options, the record codec, streaming, encryption, inspect."""

from parquetry.parquet.codec import ParquetCodec
from parquetry.parquet.encryption import (
    DecryptionSettings,
    EncryptionSettings,
    ExplicitKeys,
    InMemoryKms,
    KmsClient,
    read_encrypted,
)
from parquetry.parquet.files import (
    read_table,
    read_table_from_store,
    write_table_bytes,
    write_table_to_sink,
    write_table_to_store,
)
from parquetry.parquet.options import BloomFilter, WriteOptions
from parquetry.parquet.schema import ParquetCompression, ParquetField, ParquetSchema, ParquetType
from parquetry.parquet.stats import ColumnStats, FileStats
from parquetry.parquet.stream import ParquetStreamWriter

__all__ = [
    "BloomFilter",
    "ColumnStats",
    "DecryptionSettings",
    "EncryptionSettings",
    "ExplicitKeys",
    "FileStats",
    "InMemoryKms",
    "KmsClient",
    "ParquetCodec",
    "ParquetCompression",
    "ParquetField",
    "ParquetSchema",
    "ParquetStreamWriter",
    "ParquetType",
    "WriteOptions",
    "read_encrypted",
    "read_table",
    "read_table_from_store",
    "write_table_bytes",
    "write_table_to_sink",
    "write_table_to_store",
]
