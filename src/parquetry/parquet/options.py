"""One frozen options value shared by every writer (codec, snapshots, datasets, Spark)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

__all__ = ["WriteOptions"]


@dataclass(frozen=True, slots=True, kw_only=True)
class WriteOptions:
    """How Parquet files are written.

    Defaults produce files Spark 4, DuckDB, Polars and pandas read: zstd level 1, µs
    timestamps, data page v1, compliant nested types.
    """

    compression: str = "zstd"
    compression_level: int | None = 1
    row_group_size: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def writer_kwargs(self, schema: pa.Schema) -> dict[str, Any]:
        """Keyword arguments for ``pq.ParquetWriter`` / ``pq.write_table``."""
        kwargs: dict[str, Any] = {
            "compression": self.compression,
            "coerce_timestamps": "us",
            "allow_truncated_timestamps": False,
            "data_page_version": "1.0",
            "use_compliant_nested_type": True,
        }
        if self.compression_level is not None and self.compression in ("zstd", "gzip", "brotli"):
            kwargs["compression_level"] = self.compression_level
        kwargs.update(self.extra)
        return kwargs
