"""The Store layer: memory, local disk and object stores (S3, GCS, Azure) behind one API."""

from parquetry.store.base import (
    WRITE_CAPABILITIES,
    Capability,
    ListResult,
    ObjectMeta,
    PutMode,
    Store,
)
from parquetry.store.keys import join_key, validate_key
from parquetry.store.local import LocalStore
from parquetry.store.memory import MemoryStore
from parquetry.store.objectstore import ObjectStore
from parquetry.store.rangefile import StoreFile
from parquetry.store.url import open_store
from parquetry.store.wrappers import ReadOnlyStore, WrapperStore
from parquetry.store.writer import StoreWriter

__all__ = [
    "WRITE_CAPABILITIES",
    "Capability",
    "ListResult",
    "LocalStore",
    "MemoryStore",
    "ObjectMeta",
    "ObjectStore",
    "PutMode",
    "ReadOnlyStore",
    "Store",
    "StoreFile",
    "StoreWriter",
    "WrapperStore",
    "join_key",
    "open_store",
    "validate_key",
]
