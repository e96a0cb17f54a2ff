"""parquetry on Spark: the ``parquetry`` PySpark data source and helpers.

pyspark is imported only inside this package.
"""

from __future__ import annotations

from parquetry.spark.handle import ParquetryTable
from parquetry.spark.helpers import dnf_to_column, read_dataset, table, write_dataset
from parquetry.spark.scan_info import ScanSummary, scan_summary
from parquetry.spark.session import local_session
from parquetry.spark.source import ParquetryDataSource, register

__all__ = [
    "ParquetryDataSource",
    "ParquetryTable",
    "ScanSummary",
    "dnf_to_column",
    "local_session",
    "read_dataset",
    "register",
    "scan_summary",
    "table",
    "write_dataset",
]
