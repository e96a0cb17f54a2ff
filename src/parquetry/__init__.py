"""parquetry: consistent, fast, easy-to-query Parquet datasets on local disks and object stores."""

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
from parquetry.store import Capability, LocalStore, MemoryStore, ObjectStore, PutMode, Store, open_store

__version__ = "0.1.0"

__all__ = [
    "AlreadyExists",
    "Capability",
    "CapabilityNotSupported",
    "CommitConflict",
    "DatasetIncomplete",
    "InvalidKey",
    "LocalStore",
    "ManifestCorrupted",
    "MemoryStore",
    "NotFound",
    "ObjectStore",
    "ParquetryError",
    "PreconditionFailed",
    "PredicateError",
    "PutMode",
    "Store",
    "__version__",
    "open_store",
]
