"""A small local SparkSession configured for parquetry's tests, demo and benchmarks."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

from pyspark.sql import SparkSession

__all__ = ["LOCAL_CONF", "local_session"]

# Settings measured to work on a 2-core machine (see docs/spark.md, "Local sessions").
LOCAL_CONF: dict[str, str] = {
    "spark.driver.memory": "2g",
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "2",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.python.filterPushdown.enabled": "true",
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.driver.host": "127.0.0.1",
    "spark.sql.adaptive.enabled": "true",
    "spark.python.worker.reuse": "true",
}


def local_session(
    master: str = "local[2]",
    *,
    app_name: str = "parquetry",
    driver_memory: str = "2g",
    conf: Mapping[str, Any] | None = None,
    register: bool = True,
) -> SparkSession:
    """Start (or reuse) a local SparkSession whose Python workers can import parquetry.

    Spark's Python workers run ``python3`` from ``PATH`` unless ``PYSPARK_PYTHON`` is set, and
    that interpreter lacks parquetry; so this points them at the running interpreter.

    Args:
        master: Spark master URL, e.g. ``"local[2]"`` or ``"local[2,2]"`` (2 task attempts).
        app_name: application name shown in logs.
        driver_memory: JVM heap of the driver (which is also the executor in local mode).
        conf: extra Spark settings, applied after the defaults.
        register: register the ``parquetry`` data source on the session.

    Returns:
        The SparkSession, with log level WARN.
    """
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder.master(master).appName(app_name)
    settings = {**LOCAL_CONF, "spark.driver.memory": driver_memory, **(conf or {})}
    for key, value in settings.items():
        builder = builder.config(key, str(value))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    if register:
        from parquetry.spark.source import register as register_source

        register_source(spark)
    return spark
