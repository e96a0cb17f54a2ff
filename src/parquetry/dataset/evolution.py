"""Schema evolution without writing data: ``Dataset.evolve_schema(add=..., widen=...)``.

A metadata-only commit (no data file is read or rewritten), under the rules ``merge_schema``
applies on write (:mod:`parquetry.dataset.evolve`): added columns must be nullable, and a
column may only be widened where every old value is exactly a value of the new type
(:func:`~parquetry.dataset.evolve.widens`). Old files keep their types; readers cast each
file to the version's schema, so they read nulls for the added columns and widened values.

Refused as well: partition keys and indexed columns cannot be widened (their values live in
paths and index files typed by the old type), and a new name may not differ from an existing
one only in case (Spark could not read both).

A concurrent commit that changed the schema meanwhile is merged with the evolution (as two
``merge_schema`` appends would be); a concurrent change the evolution does not fit raises
CommitConflict.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from parquetry.dataset.evolve import case_clashes, widens
from parquetry.dataset.schema import normalise_type
from parquetry.dataset.transact import commit_change
from parquetry.dataset.versions import LoadedState
from parquetry.dataset.write import storage_schema
from parquetry.errors import InvalidArgument, SchemaMismatch, UnknownColumn

if TYPE_CHECKING:
    from parquetry.dataset.dataset import Dataset

__all__ = ["evolve_schema", "evolved_schema"]


def _added(ds: Dataset, add: Sequence[pa.Field]) -> list[pa.Field]:
    out: list[pa.Field] = []
    for f in add:
        if not isinstance(f, pa.Field):
            raise InvalidArgument(f"evolve_schema(add=...) takes pyarrow Fields, got {f!r}")
        if f.name in ds.schema.names or f.name in [o.name for o in out]:
            raise InvalidArgument(
                f"cannot add column {f.name!r} to dataset {ds.uuid!r}: it already exists"
            )
        if not f.nullable:
            raise InvalidArgument(
                f"cannot add column {f.name!r} to dataset {ds.uuid!r} as non-nullable: its "
                "existing rows have no value for it (add it nullable)"
            )
        if f.name == "partition":
            raise InvalidArgument("a column named 'partition' is reserved (kartothek format)")
        out.append(storage_schema(pa.schema([f])).field(0))
    return out


def _widened(ds: Dataset, widen: Mapping[str, pa.DataType]) -> dict[str, pa.DataType]:
    out: dict[str, pa.DataType] = {}
    for col, new in widen.items():
        if col not in ds.schema.names:
            raise UnknownColumn(
                f"cannot widen column {col!r}: not in dataset {ds.uuid!r}", column=col
            )
        if not isinstance(new, pa.DataType):
            raise InvalidArgument(
                f"evolve_schema(widen={{{col!r}: ...}}) takes a pyarrow type, got {new!r}"
            )
        old = ds.schema.field(col).type
        new = storage_schema(pa.schema([pa.field(col, new)])).field(0).type
        if old == new:
            continue
        if not widens(old, new):
            raise SchemaMismatch(
                f"cannot widen column {col!r} of dataset {ds.uuid!r} from {old} to {new}: not "
                f"every {old} value is exactly a {new} value (only lossless widening is allowed)"
            )
        if col in ds.partition_keys or (
            col in ds.secondary_indices and normalise_type(old) != normalise_type(new)
        ):
            what = "a partition key" if col in ds.partition_keys else "indexed"
            raise InvalidArgument(
                f"cannot widen column {col!r} of dataset {ds.uuid!r}: it is {what}, and its "
                f"values in {'partition paths' if what != 'indexed' else 'index files'} are "
                f"typed {old}"
            )
        out[col] = new
    return out


def evolved_schema(
    ds: Dataset, add: Sequence[pa.Field], widen: Mapping[str, pa.DataType]
) -> pa.Schema:
    """``ds``'s schema with ``add`` appended and ``widen`` applied (checked, see the module
    doc); equal to it when nothing changes."""
    added = _added(ds, add)
    widened = _widened(ds, widen)
    fields = [f.with_type(widened[f.name]) if f.name in widened else f for f in ds.schema]
    schema = pa.schema(fields + added)
    clashes = case_clashes(ds.schema, pa.schema(added))
    if clashes:
        have, got = clashes[0]
        raise SchemaMismatch(
            f"cannot add column {got!r} to dataset {ds.uuid!r}: it differs from {have!r} only "
            "in case (Spark resolves names case-insensitively)"
        )
    return schema


def evolve_schema(
    ds: Dataset,
    add: Sequence[pa.Field],
    widen: Mapping[str, pa.DataType],
    parameters: Mapping[str, Any] | None = None,
) -> LoadedState | None:
    """Commit the evolved schema (operation ``evolve_schema``); None if nothing changes."""
    schema = evolved_schema(ds, add, widen)
    if schema.equals(ds.schema):
        return None
    params: dict[str, Any] = {}
    new = [f for f in schema if f.name not in ds.schema.names]
    if new:
        params["add"] = ", ".join(f"{f.name} {f.type}" for f in new)
    changed = {f.name: f.type for f in schema if f.name in ds.schema.names}
    widened = {c: t for c, t in changed.items() if t != ds.schema.field(c).type}
    if widened:
        params["widen"] = ", ".join(
            f"{c} {ds.schema.field(c).type} -> {t}" for c, t in widened.items()
        )
    params.update(parameters or {})
    return commit_change(
        ds.store,
        ds._state(),
        [],
        operation="evolve_schema",
        parameters=params,
        written_schema=schema,
        merge_schema=True,
    )
