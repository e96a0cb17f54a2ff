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

import pyarrow as pa

from parquetry.dataset.dataset import Dataset
from parquetry.errors import SchemaMismatch

__all__ = ["EvolvedDataset", "evolved_for_write", "origin_of"]


def evolved_for_write(ds: Dataset, target: pa.Schema) -> Dataset:
    """``ds`` (same version, nothing committed) seen with schema ``target``, which must be
    ``ds``'s schema with nullable columns added and/or columns widened.

    Raises:
        SchemaMismatch / InvalidArgument: ``target`` is not such an evolution (as
            :meth:`Dataset.evolve_schema` would refuse it), naming the column.
    """
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
    origin = origin_of(ds)
    return EvolvedDataset(origin, evolved_schema(origin, added, widen))


def origin_of(ds: Dataset) -> Dataset:
    """The committed dataset an evolved handle stands for (``ds`` itself if not evolved):
    a commit through an evolved handle diffs its new version against this one, so that
    the version records the schema change."""
    return ds.origin if isinstance(ds, EvolvedDataset) else ds


class EvolvedDataset(Dataset):
    """A committed version seen with an evolved schema (not committed): reads cast old
    files to it, writes use it; :attr:`origin` is the version a commit builds on."""

    def __init__(self, origin: Dataset, schema: pa.Schema) -> None:
        state = origin._state()
        doc = state.doc.evolve(schema=schema)
        super().__init__(origin.store, replace(state, doc=doc), decryption=origin._decryption)
        self.origin = origin
