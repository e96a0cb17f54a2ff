"""parquetry on Spark: the ``parquetry`` PySpark data source and helpers.

pyspark is imported only inside this package.
"""

from __future__ import annotations

from parquetry.spark.session import local_session
from parquetry.spark.source import ParquetryDataSource, register

__all__ = ["ParquetryDataSource", "local_session", "register"]
