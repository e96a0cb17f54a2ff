"""Snapshot datasets: spec 042's ``ParquetDatasetStore``, crash-safe, parallel and
range-reading, with remote-store 0.33.0's layout and manifest."""

from parquetry.snapshot.manifest import DatasetManifest, StagedPart, schema_hash
from parquetry.snapshot.store import ParquetDatasetStore

__all__ = ["DatasetManifest", "ParquetDatasetStore", "StagedPart", "schema_hash"]
