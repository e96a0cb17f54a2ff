"""``merge_schema=True`` for operations that rewrite files (``upsert``): the schema a source
adds to or widens, committed by the operation's own commit.

:func:`evolved_for_write` gives a handle on the same version whose schema is the evolved
one, without committing anything: reads through it cast old files to the new schema (nulls
for added columns, widened values), writes through it use the new schema, and the rewrite
engine's commit records it with the operation's files, in one commit. The rules are those of
:meth:`Dataset.evolve_schema` (:mod:`parquetry.dataset.evolution`): added columns nullable,
lossless widening only, no widening of partition keys or indexed columns.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import pyarrow as pa

from parquetry.errors import SchemaMismatch

if TYPE_CHECKING:
    from parquetry.dataset.dataset import Dataset

__all__ = ["evolved_for_write"]


def evolved_for_write(ds: Dataset, target: pa.Schema) -> Dataset:
    """``ds`` (same version, nothing committed) seen with schema ``target``, which must be
    ``ds``'s schema with nullable columns added and/or columns widened.

    Raises:
        SchemaMismatch / InvalidArgument: ``target`` is not such an evolution (as
            :meth:`Dataset.evolve_schema` would refuse it), naming the column.
    """
    from parquetry.dataset.dataset import Dataset
    from parquetry.dataset.evolution import evolved_schema

    if target.equals(ds.schema):
        return ds
    old = ds.schema
    missing = [n for n in old.names if n not in target.names]
    if missing:
        raise SchemaMismatch(
            f"dataset {ds.uuid!r}: the schema written would lose column {missing[0]!r}"
        )
    added = [f for f in target if f.name not in old.names]
    widen = {
        f.name: f.type for f in target if f.name in old.names and f.type != old.field(f.name).type
    }
    schema = evolved_schema(ds, added, widen)
    state = ds._state()
    doc = state.doc.evolve(schema=schema)
    return Dataset(ds.store, replace(state, doc=doc), decryption=ds._decryption)
