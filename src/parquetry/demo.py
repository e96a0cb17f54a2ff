"""``parquetry demo``: an end-to-end Spark pipeline over the orders data of seed 004.

1. generate orders (order_id, timestamps, discount, customer, address struct, notes list,
   items list<struct>);
2. write them with Spark into a kartothek-format dataset partitioned by order date and
   indexed by customer; append the next day in a second commit;
3. query one customer through the index and a date range, printing the plans and rows;
4. aggregate revenue per day and SKU in Spark into a ParquetDatasetStore snapshot;
5. print the dataset's versions, the snapshot manifest, ``inspect`` of one part, and the
   lake's size against the same data as CSV.

pyspark is imported only when the demo runs (through :mod:`parquetry.spark`).
"""

from __future__ import annotations

import datetime
import os
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["DemoResult", "run_demo"]

DATASET = "orders"
SNAPSHOT = "revenue_per_day_sku"
FIRST_DAY = datetime.date(2025, 1, 1)
LOADED_DAYS = 10


@dataclass(frozen=True, slots=True, kw_only=True)
class DemoResult:
    """The numbers the demo printed, for tests and scripts."""

    store_url: str
    rows: int
    versions: int
    customer: str
    customer_rows: int
    customer_files: int
    range_rows: int
    range_files: int
    total_files: int
    revenue_rows: int
    lake_bytes: int
    csv_bytes: int
    seconds: float


def _store_url(store_url: str | None) -> str:
    if store_url is None:
        return Path("demo-lake").resolve().as_uri()
    if "://" not in store_url:
        return Path(store_url).resolve().as_uri()
    return store_url


def _inspect_lines(store: Any, key: str) -> list[str]:
    try:
        from parquetry.parquet.inspect import inspect_file
    except ImportError:  # the parquet layer's inspect is optional for the demo
        return [f"  (parquetry.parquet.inspect not available; {key})"]
    report = inspect_file(store, key)
    lines = [
        f"  {key}: {report.file_size:,} bytes, {report.rows:,} rows, "
        f"{len(report.row_groups)} row group(s), written by {report.created_by}",
    ]
    for column in sorted(report.columns, key=lambda c: -c.compressed_size)[:6]:
        ratio = f"{column.compression_ratio:.1f}x" if column.compression_ratio else "-"
        lines.append(
            f"    {column.path:<28} {column.compressed_size:>12,} bytes  "
            f"{column.share_of_file:6.1%}  compression {ratio}"
        )
    return lines


def _plan_line(plan: Any, total: int) -> str:
    summary = plan.summary()
    pruned = ", ".join(f"{n} by {why}" for why, n in summary["pruned"].items()) or "none"
    return (
        f"  plan: {summary['files']} of {total} files kept; partitions pruned: {pruned}; "
        f"{summary['requests']} store request(s) to plan"
    )


def run_demo(
    rows: int = 1_000_000,
    store_url: str | None = None,
    progress: Callable[[str], None] | None = None,
    out: Callable[[str], None] = print,
    *,
    store_options: dict[str, Any] | None = None,
    spark: Any = None,
) -> DemoResult:
    """Run the pipeline; see the module docstring.

    Args:
        rows: orders to generate (10/11 over ten days, the rest on the appended eleventh day).
        store_url: where the lake lives (default ``./demo-lake``; ``s3://bucket/prefix`` works).
        progress: called with a short message before each step.
        out: where the report lines go.
        store_options: object-store options (``endpoint``, credentials...), also handed to
            Spark's workers.
        spark: an existing SparkSession (default: :func:`parquetry.spark.local_session`).
    """
    # pyspark 4.3 warns on import that pandas 3 is not fully supported; the demo uses no
    # pandas API, so the warning would only confuse its reader.
    warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas")
    from parquetry.dataset import Dataset
    from parquetry.snapshot import ParquetDatasetStore
    from parquetry.spark import local_session, read_dataset, register, write_dataset
    from parquetry.spark.orders import generate_orders
    from parquetry.spark.pipeline import csv_bytes, order_lines, revenue_per_day_sku, top_revenue
    from parquetry.store import open_store

    started = time.perf_counter()
    step = progress or (lambda message: None)
    url = _store_url(store_url)
    options = dict(store_options or {})
    store = open_store(url, **options)

    step("starting Spark (local[2])")
    if spark is None:
        spark = local_session()
        # The demo prints its own progress; Spark's warnings (e.g. the size of the tasks that
        # ship the generated data) would only bury it.
        spark.sparkContext.setLogLevel("ERROR")
    register(spark)

    step(f"generating {rows:,} orders")
    loaded = max(1, rows * LOADED_DAYS // (LOADED_DAYS + 1))
    first = generate_orders(loaded, day=FIRST_DAY, days=LOADED_DAYS, seed=4)
    next_day = FIRST_DAY + datetime.timedelta(days=LOADED_DAYS)
    second = generate_orders(max(1, rows - loaded), day=next_day, seed=5)

    if Dataset.exists(store, DATASET):
        Dataset.open(store, DATASET).delete()
    step("writing days 1-10 (commit 1)")
    first_df = spark.createDataFrame(first).coalesce(2)
    write_dataset(first_df, url, DATASET, partition_on=("order_date",),
                  secondary_indices=("customer",), mode="append", **options)  # fmt: skip
    step("appending day 11 (commit 2)")
    write_dataset(spark.createDataFrame(second).coalesce(2), url, DATASET, **options)
    dataset = Dataset.open(store, DATASET)
    total_files = len(dataset.plan().files)
    out(f"Wrote {rows:,} orders to {url}/{DATASET} in 2 commits "
        f"(partitioned by order_date, indexed by customer): {total_files} files")  # fmt: skip

    step("querying one customer through the index")
    customer = str(first.column("customer")[0])
    by_customer = [[("customer", "==", customer)]]
    plan = dataset.plan(by_customer)
    out(f"\nOrders of customer {customer!r}:")
    out(_plan_line(plan, total_files))
    found = read_dataset(spark, url, DATASET, predicates=by_customer, **options)
    customer_rows = order_lines(found).collect()
    for row in customer_rows[:10]:
        out(f"  {row.order_id}  {row.created_at:%Y-%m-%d %H:%M}  {row.items} item(s)")
    out(f"  {len(customer_rows)} order(s)")

    step("querying a date range")
    low, high = FIRST_DAY + datetime.timedelta(days=2), FIRST_DAY + datetime.timedelta(days=3)
    by_range = [[("order_date", ">=", low), ("order_date", "<=", high)]]
    range_plan = dataset.plan(by_range)
    out(f"\nOrders from {low} to {high}:")
    out(_plan_line(range_plan, total_files))
    in_range = read_dataset(spark, url, DATASET, predicates=by_range, **options)
    per_day = in_range.groupBy("order_date").count().orderBy("order_date").collect()
    for row in per_day:
        out(f"  {row.order_date}: {row['count']:,} orders")
    range_rows = sum(row["count"] for row in per_day)

    step("aggregating revenue per day and SKU")
    orders = read_dataset(spark, url, DATASET, **options)
    revenue = revenue_per_day_sku(orders)
    run_id = f"demo-{datetime.datetime.now(datetime.UTC):%Y%m%dT%H%M%SZ}"
    revenue.write.format("parquetry").option("store", url).options(**_spark_options(options)) \
        .option("layout", "snapshot").option("key", SNAPSHOT).option("run_id", run_id) \
        .mode("overwrite").save()  # fmt: skip
    manifest = ParquetDatasetStore(store).read_manifest(SNAPSHOT)
    top = top_revenue(revenue)
    out(f"\nRevenue per day and SKU -> snapshot {SNAPSHOT!r} ({manifest.row_count:,} rows); top 3:")
    for row in top:
        out(f"  {row.order_date}  {row.sku}  {row.revenue:>14,.2f}  ({row.lines:,} lines)")

    step("reporting")
    versions = Dataset.open(store, DATASET).versions()
    out("\nVersions of the orders dataset:")
    for info in versions:
        out(f"  v{info.number}  {info.committed_at}  {info.operation:<12} "
            f"+{info.rows_added:,} rows  +{info.files_added} files")  # fmt: skip
    out(f"\nManifest of {SNAPSHOT!r}:")
    out("  " + manifest.to_json().replace("\n", "\n  "))
    out("\nparquetry inspect of one part:")
    for line in _inspect_lines(store, dataset.plan().files[0].key):
        out(line)
    lake_bytes = sum(m.size for m in store.list(f"{DATASET}/"))
    csv_size = csv_bytes(orders)
    out(f"\nLake: {lake_bytes:,} bytes; the same orders as CSV: {csv_size:,} bytes "
        f"({csv_size / max(lake_bytes, 1):.1f}x larger)")  # fmt: skip
    seconds = time.perf_counter() - started
    out(f"Done in {seconds:.0f} s.")
    return DemoResult(
        store_url=url,
        rows=rows,
        versions=len(versions),
        customer=customer,
        customer_rows=len(customer_rows),
        customer_files=len(plan.files),
        range_rows=range_rows,
        range_files=len(range_plan.files),
        total_files=total_files,
        revenue_rows=manifest.row_count,
        lake_bytes=lake_bytes,
        csv_bytes=csv_size,
        seconds=seconds,
    )


def _spark_options(options: dict[str, Any]) -> dict[str, str]:
    from parquetry.spark.options import STORE_OPTION_KEYS

    return {(k if k in STORE_OPTION_KEYS else f"store.{k}"): str(v) for k, v in options.items()}


if __name__ == "__main__":  # pragma: no cover - manual runs
    run_demo(rows=int(os.environ.get("PARQUETRY_DEMO_ROWS", "1000000")), progress=print)
