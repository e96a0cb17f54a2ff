"""A Spark driver for the streaming sink's kill-and-restart tests (run as a subprocess).

``python stream_driver.py <spec JSON>``: streams the parquet files of ``input`` (one file
per micro-batch, Trigger.AvailableNow) into the parquetry dataset ``dataset`` of ``store``
with ``checkpoint``. With ``PARQUETRY_STREAM_PARK`` set, the sink's commit of the chosen
batch writes a marker file and waits there for the test to SIGKILL this process group.
"""

from __future__ import annotations

import json
import sys
from typing import Any


def start(spark: Any, spec: dict[str, Any]) -> Any:
    """Start the query of ``spec`` on ``spark`` (the tests' final run uses it in-process)."""
    source = (
        spark.readStream.schema("id long, k long")
        .option("maxFilesPerTrigger", 1)
        .parquet(spec["input"])
    )
    writer = (
        source.writeStream.format("parquetry")
        .option("store", spec["store"])
        .option("dataset", spec["dataset"])
        .option("partition_on", "k")
        .option("secondary_indices", "id")
        .option("checkpointLocation", spec["checkpoint"])
        .trigger(availableNow=True)
    )
    for key, value in spec.get("options", {}).items():
        writer = writer.option(key, value)
    return writer.start()


def main() -> None:
    from parquetry.spark import local_session

    spec = json.loads(sys.argv[1])
    spark = local_session("local[2]", app_name="stream-driver")
    start(spark, spec).awaitTermination()
    spark.stop()


if __name__ == "__main__":
    main()
