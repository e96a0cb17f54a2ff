"""Building a secondary index over every file of a dataset (``Dataset.build_index``).

Values are read once per file and cached across commit retries, so a retry after a lost
race only reads the files other writers added meanwhile.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from parquetry.dataset.indices import IndexData, build_pairs, merge_index
from parquetry.dataset.metadata import DatasetDocument
from parquetry.dataset.schema import normalise_type
from parquetry.errors import CommitConflict, MetadataCorrupted, NotFound
from parquetry.parquet.encryption import DecryptionSettings
from parquetry.parquet.files import read_table
from parquetry.store import Store

if TYPE_CHECKING:
    from parquetry.dataset.dataset import Dataset

__all__ = ["build_on_newest", "index_builder"]


def index_builder(
    store: Store, schema: pa.Schema, column: str, decryption: DecryptionSettings | None = None
) -> Callable[[DatasetDocument], dict[str, IndexData]]:
    # Each file's distinct values as stored (cast per attempt: see build).
    cache: dict[str, pa.Array] = {}

    def values(label: str, key: str) -> pa.Array:
        if label not in cache:
            # Through the raw footer check: corrupt files raise InvalidFormat naming the key,
            # encrypted ones need ``decryption``.
            try:
                read = read_table(store.open(key), columns=[column], decryption=decryption)
            except NotFound:
                # Named like every missing data file, so build_index can tell a file garbage
                # collected under a stale version (it then runs on the newest) from a loss.
                raise MetadataCorrupted(
                    f"data file {key} of partition {label!r} is missing", key=key
                ) from None
            if column not in read.column_names:
                # A file written before the column was added (evolve_schema, merge_schema):
                # it reads as null there, and nulls are not indexed.
                cache[label] = pa.array([], pa.null())
                return cache[label]
            col = read.column(column).combine_chunks()
            cache[label] = pc.unique(col.drop_null())
        return cache[label]

    def build(base: DatasetDocument) -> dict[str, IndexData]:
        # The index is typed by the schema of the version it is committed on: a concurrent
        # evolve_schema may have widened the column since this build started (int32 to
        # double, with 1.5 in a new file: casting that to the old type raised ArrowInvalid).
        current = base.schema if base.schema is not None else schema
        if column not in current.names:
            raise CommitConflict(
                f"dataset {base.uuid!r}: a concurrent commit removed column {column!r}, "
                "which this build_index indexes; nothing is committed"
            )
        t = normalise_type(current.field(column).type)
        table = base.tables[0]
        todo = [(label, files[table]) for label, files in base.partitions.items()]
        store.map_concurrent(lambda item: values(*item), todo)
        pairs = build_pairs(((label, cache[label].cast(t)) for label, _ in todo), t)
        return {column: merge_index(column, None, pairs, set(), t)}

    return build


def build_on_newest(ds: Dataset, column: str) -> Dataset:
    """``ds.build_index(column)``: commits the index on ``ds``'s version, or, when a file of
    that (stale) version was garbage collected after a newer version dropped it, on the
    newest version: nothing was committed and the index covers every file of the version
    it commits on, so building it there is the same request. Only GC racing each retry
    again exhausts the attempts."""
    from parquetry.dataset.dataset import Dataset
    from parquetry.dataset.staleread import version_collected

    attempts = 10
    for _ in range(attempts):
        builder = index_builder(ds.store, ds.schema, column, ds._decryption)
        try:
            return ds._commit(
                [], operation="build_index", new_indices=[column], index_builder=builder
            )
        except MetadataCorrupted as exc:
            if version_collected(ds, exc) is None:
                raise
        ds = Dataset.open(ds.store, ds.uuid, decryption=ds._decryption)
    raise CommitConflict(
        f"dataset {ds.uuid!r}: build_index({column!r}) lost {attempts} races with garbage "
        "collection; nothing is committed"
    )
