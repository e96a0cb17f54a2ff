"""Options and errors of the ``parquetry`` format through a real SparkSession (issue 12 §3):
unknown options, versionAsOf/timestampAsOf, the path form, partitionBy, error text, a
missing bucket, AWS_ENDPOINT_URL in executors, scan numbers."""

from __future__ import annotations

import datetime
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from pyspark.errors import PySparkException

from parquetry.dataset import Dataset
from parquetry.dataset.predicates import dnf_to_json
from parquetry.spark import scan_summary, write_dataset
from parquetry.store import open_store

# Spark's own prefix; what follows it is the worker's report, parquetry's message first.
_SPARK = re.compile(r"\[PYTHON_DATA_SOURCE_ERROR\] Failed to \w+ Python data source \w+: ")


def first_line(exc: BaseException) -> str:
    """The first line of what the user sees, after Spark's prefix (which must be there)."""
    line = str(exc).splitlines()[0]
    prefix = _SPARK.match(line)
    assert prefix, line
    return line[prefix.end() :]


def rows(n: int, start: int = 0) -> str:
    return f"id >= {start} and id < {start + n}"


def test_unknown_options_paths_and_partition_by(spark: Any, tmp_path: Path) -> None:
    lake = tmp_path.resolve().as_uri()
    df = spark.range(0, 120, numPartitions=2).selectExpr("id", "cast(id % 3 as string) as part")

    # A misspelt option used to write an unpartitioned dataset silently.
    with pytest.raises(PySparkException) as info:
        df.write.format("parquetry").option("store", lake).option("dataset", "orders").option(
            "partiton_on", "part"
        ).mode("append").save()
    assert first_line(info.value) == (
        "parquetry.errors.InvalidArgument: unknown option 'partiton_on' for format "
        "parquetry; did you mean 'partition_on'?"
    )
    assert not Dataset.exists(open_store(lake), "orders")

    # save(path)/load(path): '<store URL>/<dataset>'.
    df.write.format("parquetry").option("partition_on", "part").mode("append").save(
        f"{lake}/orders"
    )
    ds = Dataset.open(open_store(lake), "orders")
    assert (ds.version, ds.partition_keys) == (0, ("part",))
    back = spark.read.format("parquetry").load(f"{lake}/orders")
    assert back.count() == 120
    assert back.filter("part = '2'").count() == 40
    # option 'store' + a relative path, and option names in any case (Spark lower-cases them)
    relative = spark.read.format("parquetry").option("STORE", lake).load("orders")
    assert relative.count() == 120

    # A path and options that disagree.
    with pytest.raises(PySparkException) as info:
        spark.read.format("parquetry").option("dataset", "other").load(f"{lake}/orders")
    assert first_line(info.value) == (
        f"parquetry.errors.InvalidArgument: path '{lake}/orders' does not end with "
        "option 'dataset' 'other': give '<store>/<dataset>' or only one of them"
    )
    with pytest.raises(PySparkException) as info:
        spark.read.format("parquetry").option("store", "memory://elsewhere").load(f"{lake}/orders")
    assert first_line(info.value).startswith(
        f"parquetry.errors.InvalidArgument: path '{lake}/orders' is not inside "
        "option 'store' 'memory://elsewhere'"
    )

    # Spark refuses partitionBy() for Python sources before parquetry runs (documented);
    # write_dataset takes Spark's name.
    with pytest.raises(PySparkException, match="partitioning or clustering columns do not match"):
        df.write.format("parquetry").partitionBy("part").mode("append").save(f"{lake}/p")
    written = write_dataset(df, lake, "by_part", partition_by=("part",))
    assert (written.partition_keys, written.version) == (("part",), 0)
    with pytest.raises(ValueError, match="disagree"):
        write_dataset(df, lake, "x", partition_by=("part",), partition_on=("id",))


def test_version_and_timestamp_as_of(spark: Any, tmp_path: Path) -> None:
    lake = tmp_path.resolve().as_uri()
    base = spark.range(0, 300, numPartitions=2).selectExpr("id", "cast(id % 2 as string) as part")
    write_dataset(base.filter(rows(100)), lake, "events", partition_on=("part",))
    time.sleep(1.1)  # commit times have microseconds; a second apart keeps the cut clear
    between = datetime.datetime.now(datetime.UTC)
    time.sleep(1.1)
    write_dataset(base.filter(rows(50, 100)), lake, "events")
    write_dataset(base.filter(rows(25, 150)), lake, "events")
    versions = Dataset.open(open_store(lake), "events").versions()
    assert [v.number for v in versions] == [0, 1, 2]

    def read(**options: str) -> Any:
        return spark.read.format("parquetry").options(**options).load(f"{lake}/events")

    assert read(versionAsOf="0").count() == 100
    assert read(versionAsOf="1").count() == 150
    assert read(version="2").count() == 175
    assert read(timestampAsOf=between.isoformat()).count() == 100
    assert read(timestampAsOf=between.strftime("%Y-%m-%d %H:%M:%S.%f")).count() == 100
    assert read(timestampAsOf=versions[1].committed_at).count() == 150
    tomorrow = (between + datetime.timedelta(days=1)).date().isoformat()
    assert read(timestampAsOf=tomorrow).count() == 175

    with pytest.raises(PySparkException) as info:
        read(timestampAsOf="2001-01-01").count()
    assert first_line(info.value) == (
        "parquetry.errors.NotFound: dataset 'events' has no version committed at or "
        "before 2001-01-01T00:00:00+00:00 (option 'timestampAsOf'); its oldest retained "
        f"version 0 was committed at {versions[0].committed_at}"
    )
    with pytest.raises(PySparkException) as info:
        read(versionAsOf="1", timestampAsOf=tomorrow).count()
    assert first_line(info.value) == (
        "parquetry.errors.InvalidArgument: options 'versionAsOf'/'version' and "
        "'timestampAsOf' exclude each other: give one of them"
    )
    with pytest.raises(PySparkException) as info:
        read(timestampAsOf="yesterday").count()
    assert first_line(info.value).startswith(
        "parquetry.errors.InvalidArgument: option 'timestampAsOf' must be an ISO "
    )
    with pytest.raises(PySparkException) as info:
        read(versionAsOf="7").count()
    assert first_line(info.value) == (
        "parquetry.errors.DatasetNotFound: dataset 'events' has no version 7"
    )
    with pytest.raises(PySparkException) as info:
        spark.read.format("parquetry").load(f"{lake}/missing").count()
    assert first_line(info.value) == (
        f"parquetry.errors.DatasetNotFound: no dataset 'missing' in {lake}"
    )

    # files kept / total, as the data source plans them
    one = json.dumps(dnf_to_json([[("part", "==", "1")]]))
    summary = scan_summary({"path": f"{lake}/events", "predicates": one, "versionAsOf": "1"})
    full = scan_summary({"path": f"{lake}/events", "versionAsOf": "1"})
    assert (summary.version, full.version) == (1, 1)
    assert full.files_kept == full.files_total == summary.files_total
    assert 0 < summary.files_kept < summary.files_total
    assert summary.bytes_kept < summary.bytes_total == full.bytes_total
    assert str(summary).startswith(
        f"parquetry scan of 'events' version 1: {summary.files_kept} of "
        f"{summary.files_total} files kept"
    )


@pytest.mark.s3
def test_missing_bucket_is_not_missing_dataset(spark: Any, moto_server: Any) -> None:
    options = moto_server.options()
    with pytest.raises(PySparkException) as info:
        spark.read.format("parquetry").options(**options).load(
            "s3://nonexistent-bucket/lake/orders"
        ).count()
    assert first_line(info.value) == (
        "parquetry.errors.StoreUnavailable: bucket 'nonexistent-bucket' does not "
        "exist (s3://nonexistent-bucket/lake, key 'orders/_head.json')"  # the first GET
    )


_ENV_ONLY_SCRIPT = """
import sys
from parquetry.spark import local_session
url = sys.argv[1]
spark = local_session("local[2]", app_name="parquetry-env-only")
df = spark.range(0, 200, numPartitions=2).selectExpr("id", "id % 5 as k")
df.write.format("parquetry").mode("append").save(url + "/env_only")
back = spark.read.format("parquetry").load(url + "/env_only")
print("counts", back.count(), back.filter("k = 3").count(), flush=True)
spark.stop()
# No interpreter finalization: pyarrow may abort there after all the work (apache/arrow#34314).
import os
os._exit(0)
"""


@pytest.mark.s3
@pytest.mark.timeout(1800)  # its own JVM: 400 s on a loaded 2-core machine, 600 s was close
def test_endpoint_from_environment_only(moto_server: Any, tmp_path: Path) -> None:
    """AWS_ENDPOINT_URL=http://... and credentials only in the environment: the driver's
    planner and commit workers and the executors' Python workers inherit the JVM's
    environment, so this runs a Spark of its own started with them (the shared session's
    JVM predates any variable a test could set)."""
    options = moto_server.options()
    url = moto_server.url()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(
        AWS_ENDPOINT_URL=options["endpoint"],
        AWS_ACCESS_KEY_ID=options["access_key_id"],
        AWS_SECRET_ACCESS_KEY=options["secret_access_key"],
        AWS_REGION=options["region"],
        PYTHONPATH=os.pathsep.join(sys.path),
    )
    script = tmp_path / "env_only.py"
    script.write_text(_ENV_ONLY_SCRIPT)
    done = subprocess.run(
        [sys.executable, str(script), url],
        env=env,
        capture_output=True,
        text=True,
        timeout=1500,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "counts 200 40" in done.stdout.splitlines()
    assert Dataset.open(open_store(url, **options), "env_only").version == 0
