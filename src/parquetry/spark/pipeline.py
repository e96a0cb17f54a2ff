"""The Spark transformations of ``parquetry demo`` (pyspark stays inside parquetry.spark)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F

__all__ = ["csv_bytes", "order_lines", "revenue_per_day_sku", "top_revenue"]


def order_lines(orders: DataFrame) -> DataFrame:
    """order_id, created_at, order_date and the number of items, oldest first."""
    return orders.select(
        "order_id", "created_at", "order_date", F.size("items").alias("items")
    ).orderBy("created_at")


def revenue_per_day_sku(orders: DataFrame) -> DataFrame:
    """Revenue (quantity x price, less the order's discount %) and lines per day and SKU."""
    discount = 1 - F.coalesce(F.col("discount"), F.lit(0.0)) / 100
    lines = orders.select("order_date", "discount", F.explode("items").alias("item")).select(
        "order_date",
        F.col("item.sku").alias("sku"),
        (F.col("item.quantity") * F.col("item.price") * discount).alias("revenue"),
    )
    return (
        lines.groupBy("order_date", "sku")
        .agg(F.round(F.sum("revenue"), 2).alias("revenue"), F.count("*").alias("lines"))
        .orderBy("order_date", "sku")
        .coalesce(1)
    )


def top_revenue(revenue: DataFrame, n: int = 3) -> list[Row]:
    return revenue.orderBy(F.desc("revenue")).limit(n).collect()


def csv_bytes(df: DataFrame) -> int:
    """Bytes of ``df`` as CSV, nested columns JSON-encoded the way the seed article did."""
    nested = {"address", "notes", "items"}
    flat = df.select(*[F.to_json(c).alias(c) if c in nested else F.col(c) for c in df.columns])
    target = tempfile.mkdtemp(prefix="parquetry-demo-csv-")
    try:
        flat.write.mode("overwrite").option("header", "true").csv(target)
        return sum(p.stat().st_size for p in Path(target).rglob("*.csv"))
    finally:
        shutil.rmtree(target, ignore_errors=True)
