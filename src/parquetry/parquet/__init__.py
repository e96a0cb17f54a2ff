"""The Parquet file layer: write options, the record codec, encryption and inspect."""

from parquetry.parquet.options import WriteOptions

__all__ = ["WriteOptions"]
