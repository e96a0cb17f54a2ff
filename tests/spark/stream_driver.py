"""A Spark driver for the streaming kill-and-restart tests (run as a subprocess).

``python stream_driver.py <spec JSON>``: streams the parquetry dataset ``source`` of
``store`` (the parquetry streaming source, ``maxFilesPerTrigger`` 1, Trigger.AvailableNow)
into the parquetry dataset ``dataset`` of the same store (the parquetry sink) with
``checkpoint``. With ``PARQUETRY_STREAM_PARK`` set, the sink's commit of the chosen batch
writes a marker file and waits there for the test to SIGKILL this process group.
"""

from __future__ import annotations

import json
import sys
from typing import Any


def start(spark: Any, spec: dict[str, Any]) -> Any:
    """Start the query of ``spec`` on ``spark`` (the tests' final run uses it in-process)."""
    store_options = spec.get("options", {})
    reader = (
        spark.readStream.format("parquetry")
        .option("store", spec["store"])
        .option("dataset", spec["source"])
        .option("maxFilesPerTrigger", 1)
    )
    for key, value in store_options.items():
        reader = reader.option(key, value)
    writer = (
        reader.load()
        .writeStream.format("parquetry")
        .option("store", spec["store"])
        .option("dataset", spec["dataset"])
        .option("partition_on", "k")
        .option("secondary_indices", "id")
        .option("checkpointLocation", spec["checkpoint"])
        .trigger(availableNow=True)
    )
    for key, value in store_options.items():
        writer = writer.option(key, value)
    return writer.start()


def main() -> None:
    from parquetry.spark import local_session

    spec = json.loads(sys.argv[1])
    # One core: the query runs one task at a time anyway (one file per batch), and a second
    # core only adds JVM threads on a loaded machine.
    spark = local_session("local[1]", app_name="stream-driver", driver_memory="1g")
    start(spark, spec).awaitTermination()
    spark.stop()


if __name__ == "__main__":
    main()
