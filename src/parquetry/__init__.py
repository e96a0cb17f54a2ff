"""parquetry: consistent, fast, easy-to-query Parquet datasets on local disks and object stores.

Importing ``parquetry`` is light: the dataset layers load on first use of their names.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from parquetry.errors import (
    AlreadyExists,
    CapabilityNotSupported,
    CommitConflict,
    DatasetIncomplete,
    InvalidKey,
    ManifestCorrupted,
    NotFound,
    ParquetryError,
    PreconditionFailed,
    PredicateError,
)
from parquetry.store import (
    Capability,
    LocalStore,
    MemoryStore,
    ObjectStore,
    PutMode,
    Store,
    open_store,
)

if TYPE_CHECKING:
    from parquetry.dataset import Dataset, ScanPlan
    from parquetry.parquet import WriteOptions
    from parquetry.snapshot import DatasetManifest, ParquetDatasetStore

__version__ = "0.1.0"

# Names served lazily from the layers above the store (module path per name).
_LAZY = {
    "ParquetDatasetStore": "parquetry.snapshot",
    "DatasetManifest": "parquetry.snapshot",
    "Dataset": "parquetry.dataset",
    "ScanPlan": "parquetry.dataset",
    "WriteOptions": "parquetry.parquet",
}

__all__ = [
    "AlreadyExists",
    "Capability",
    "CapabilityNotSupported",
    "CommitConflict",
    "Dataset",
    "DatasetIncomplete",
    "DatasetManifest",
    "InvalidKey",
    "LocalStore",
    "ManifestCorrupted",
    "MemoryStore",
    "NotFound",
    "ObjectStore",
    "ParquetDatasetStore",
    "ParquetryError",
    "PreconditionFailed",
    "PredicateError",
    "PutMode",
    "ScanPlan",
    "Store",
    "WriteOptions",
    "__version__",
    "open_store",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'parquetry' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
