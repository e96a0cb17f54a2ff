"""Building a secondary index over every file of a dataset (``Dataset.build_index``).

Values are read once per file and cached across commit retries, so a retry after a lost
race only reads the files other writers added meanwhile.
"""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
import pyarrow.compute as pc

from parquetry.dataset.indices import IndexData, build_pairs, merge_index
from parquetry.dataset.metadata import DatasetDocument
from parquetry.dataset.schema import normalise_type
from parquetry.parquet.encryption import DecryptionSettings
from parquetry.parquet.files import read_table
from parquetry.store import Store

__all__ = ["index_builder"]


def index_builder(
    store: Store, schema: pa.Schema, column: str, decryption: DecryptionSettings | None = None
) -> Callable[[DatasetDocument], dict[str, IndexData]]:
    t = normalise_type(schema.field(column).type)
    cache: dict[str, pa.Array] = {}

    def values(label: str, key: str) -> pa.Array:
        if label not in cache:
            # Through the raw footer check: corrupt files raise InvalidFormat naming the key,
            # encrypted ones need ``decryption``.
            read = read_table(store.open(key), columns=[column], decryption=decryption)
            if column not in read.column_names:
                # A file written before the column was added (evolve_schema, merge_schema):
                # it reads as null there, and nulls are not indexed.
                cache[label] = pa.array([], t)
                return cache[label]
            col = read.column(column).combine_chunks()
            cache[label] = pc.unique(col.drop_null()).cast(t)
        return cache[label]

    def build(base: DatasetDocument) -> dict[str, IndexData]:
        table = base.tables[0]
        todo = [(label, files[table]) for label, files in base.partitions.items()]
        store.map_concurrent(lambda item: values(*item), todo)
        pairs = build_pairs(((label, cache[label]) for label, _ in todo), t)
        return {column: merge_index(column, None, pairs, set(), t)}

    return build
