"""Kartothek-format datasets (format v4) with versioned, conflict-safe commits.

``Dataset`` is the facade; ``write_files`` + ``Dataset.commit_files`` split writing from
committing for distributed writers (Spark executors write, the driver commits).
"""

from parquetry.dataset.dataset import Dataset
from parquetry.dataset.gc import GCReport
from parquetry.dataset.history import DatasetDetail, HistoryEntry
from parquetry.dataset.metadata import DatasetDocument, FileInfo, VersionInfo
from parquetry.dataset.plan import PlannedFile, PrunedPartition, ScanPlan
from parquetry.dataset.write import FileDescription, write_files

__all__ = [
    "Dataset",
    "DatasetDetail",
    "DatasetDocument",
    "FileDescription",
    "FileInfo",
    "GCReport",
    "HistoryEntry",
    "PlannedFile",
    "PrunedPartition",
    "ScanPlan",
    "VersionInfo",
    "write_files",
]
