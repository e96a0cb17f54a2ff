"""parquetry's message first in the errors Spark shows for the data source's driver-side steps.

Spark (4.0-4.3) reports a Python data source failure as ``[PYTHON_DATA_SOURCE_ERROR] Failed to
<action> Python data source <type>: <msg>``, where ``<msg>`` is whatever the Python worker wrote
for the exception. pyspark's worker writes the full traceback (``Traceback (most recent call
last): ...``, the message on its last line) unless ``SPARK_HIDE_TRACEBACK`` is set in the
worker's environment when the exception is handled (``pyspark.util.handle_worker_exception``;
Spark's conf ``spark.sql.execution.pyspark.udf.hideTraceback.enabled`` sets it for every worker).
Spark offers no other hook: neither a PySparkException subclass nor a chained cause changes
that text (the simplified traceback drops causes).

So a :class:`~parquetry.errors.ParquetryError` raised by a planning step (bad option, missing
dataset, version not found, missing bucket) sets that variable in the worker just before it
propagates: the message Spark shows is then ``parquetry.errors.<Class>: <message>`` on its first
line. A planner worker exits after reporting an exception (``worker_run`` calls
``sys.exit(-1)``), so the setting never outlives the error. Any other exception — a bug — keeps
its full traceback.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from parquetry.errors import ParquetryError

__all__ = ["message_first"]

P = ParamSpec("P")
R = TypeVar("R")

# Modules only a Spark Python worker imports (the planner workers import the first).
_WORKER_MODULES = ("pyspark.sql.worker.utils", "pyspark.worker")


def in_spark_worker() -> bool:
    """Whether this process is a Spark Python worker (not the user's driver process, whose
    environment a later JVM launch would inherit)."""
    return any(name in sys.modules for name in _WORKER_MODULES)


def message_first(function: Callable[P, R]) -> Callable[P, R]:
    """Run ``function``; a ParquetryError it raises reaches the user as its message alone."""

    @functools.wraps(function)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return function(*args, **kwargs)
        except ParquetryError:
            if in_spark_worker():
                os.environ["SPARK_HIDE_TRACEBACK"] = "1"
            raise

    return wrapper
