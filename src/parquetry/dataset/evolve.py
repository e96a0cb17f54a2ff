"""Schema on write: which data a dataset accepts, and how ``merge_schema`` evolves it.

One set of rules for every write (``Dataset.append``/``update``, ``commit_files``, the Spark
data source and its helpers), checked before anything is written:

- a column of the data matches a dataset column when its type holds the same values
  (string/binary kinds, dictionaries, timestamp units of one zone), widens losslessly into
  it (an ``int32`` column into an ``int64`` dataset), or is the same kind but wider
  (``int64`` into ``int32``, ``double`` into ``float``): then every value is checked when it
  is written and one that cannot be stored exactly is refused (:func:`cast_to_schema`);
- anything else is a difference: a column of another kind (``double`` into ``string``),
  a column the dataset lacks, a dataset column the data lacks. Differences fail with
  :class:`SchemaMismatch` naming each of them, unless
- ``merge_schema``: new top-level columns and new struct fields are added as nullable, a
  dataset column whose type the data's widens losslessly (:func:`widens`) takes the wider
  type, and a nullable dataset column the data lacks reads as null for the new rows.
  Every other difference is still refused.

Old files keep their types; readers cast each file to the schema of the version they read
(nulls for added columns and fields, widened values).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa

from parquetry.errors import SchemaMismatch

__all__ = [
    "Difference",
    "case_clashes",
    "compare",
    "merged_schema",
    "mismatch_message",
    "resolve_write_schema",
    "same_values",
    "storable",
    "widens",
]

_SIGNED = [pa.int8(), pa.int16(), pa.int32(), pa.int64()]
_UNSIGNED = [pa.uint8(), pa.uint16(), pa.uint32(), pa.uint64()]
_FLOATS = [pa.float16(), pa.float32(), pa.float64()]
#: Bits of mantissa (+1): integers of up to this many bits convert to the float exactly.
_FLOAT_EXACT_BITS = {pa.float16(): 11, pa.float32(): 24, pa.float64(): 53}


def _int_bits(t: pa.DataType) -> tuple[bool, int]:
    return pa.types.is_signed_integer(t), t.bit_width


def same_values(a: pa.DataType, b: pa.DataType) -> bool:
    """Whether ``a`` and ``b`` are one logical type (string kinds, dictionaries, ts units)."""
    if a == b:
        return True
    a, b = _plain(a), _plain(b)
    if a == b:
        return True
    if not (pa.types.is_timestamp(a) and pa.types.is_timestamp(b)):
        return False
    # Units of one clock; any two zones name the same instants (stored as UTC).
    return a.tz == b.tz or (a.tz is not None and b.tz is not None)


def _plain(t: pa.DataType) -> pa.DataType:
    if pa.types.is_dictionary(t):
        return _plain(t.value_type)
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return pa.string()
    if pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return pa.binary()
    return t


def widens(old: pa.DataType, new: pa.DataType) -> bool:
    """Whether every value of ``old`` is exactly a value of ``new`` (lossless widening).

    int8→16→32→64, uintN→uintM and uintN→intM (M > N), small integers into floats wide
    enough to hold them, float16→32→64, decimal precision up at the same scale (128→256
    bits too), lists of widening elements, and the null type into anything. Dates stay
    dates; nothing widens to a string.
    """
    old, new = _plain(old), _plain(new)
    if old == new or pa.types.is_null(old):  # a column of nulls fits any type
        return True
    if pa.types.is_integer(old) and pa.types.is_integer(new):
        (os_, ob), (ns, nb) = _int_bits(old), _int_bits(new)
        if os_ == ns:
            return nb >= ob
        return ns and nb > ob  # unsigned into a strictly wider signed type
    if pa.types.is_integer(old) and pa.types.is_floating(new):
        os_, ob = _int_bits(old)
        return ob - int(os_) <= _FLOAT_EXACT_BITS[new]
    if pa.types.is_floating(old) and pa.types.is_floating(new):
        return _FLOATS.index(new) >= _FLOATS.index(old)
    if pa.types.is_decimal(old) and pa.types.is_decimal(new):
        return bool(new.scale == old.scale and new.precision >= old.precision)
    if pa.types.is_list(old) and pa.types.is_list(new):
        return widens(old.value_type, new.value_type)
    return False


def _narrows_checked(dataset: pa.DataType, data: pa.DataType) -> bool:
    """Same kind, the data wider: accepted value by value when written (range checked)."""
    dataset, data = _plain(dataset), _plain(data)
    if pa.types.is_integer(dataset) and pa.types.is_integer(data):
        return True
    if pa.types.is_decimal(dataset) and pa.types.is_decimal(data):
        return bool(dataset.scale == data.scale)
    if pa.types.is_list(dataset) and pa.types.is_list(data):
        return _narrows_checked(dataset.value_type, data.value_type)
    return bool(pa.types.is_floating(dataset) and pa.types.is_floating(data))


@dataclass(frozen=True, slots=True)
class Difference:
    """One way the data's schema differs from the dataset's.

    ``kind``: ``"type"`` (both types), ``"extra"`` (only the data has it), ``"missing"``
    (only the dataset has it). ``column`` is a dotted path for struct fields.
    """

    column: str
    kind: str
    dataset_type: pa.DataType | None
    data_type: pa.DataType | None
    #: ``merge_schema`` can resolve it (an added nullable field, a lossless widening).
    mergeable: bool
    #: A type of the same kind, wider than the dataset's: without ``merge_schema`` each
    #: value is checked when written (``int64`` data into an ``int32`` column).
    checked: bool = False

    def describe(self) -> str:
        if self.kind == "extra":
            return f"column {self.column!r} is not in the dataset (data has {self.data_type})"
        if self.kind == "missing":
            return (
                f"column {self.column!r} is missing from the data (dataset has {self.dataset_type})"
            )
        how = " (a lossless widening)" if self.mergeable else ""
        return (
            f"column {self.column!r}: dataset has {self.dataset_type}, data has "
            f"{self.data_type}{how}"
        )


def _compare_fields(
    dataset: Sequence[pa.Field], data: Sequence[pa.Field], prefix: str
) -> list[Difference]:
    theirs = {f.name: f for f in data}
    ours = {f.name for f in dataset}
    out: list[Difference] = []
    for f in dataset:
        path = prefix + f.name
        other = theirs.get(f.name)
        if other is None:
            out.append(Difference(path, "missing", f.type, None, f.nullable))
            continue
        out += _compare_types(f.type, other.type, path)
    out += [
        Difference(prefix + f.name, "extra", None, f.type, True) for f in data if f.name not in ours
    ]
    return out


def _compare_types(have: pa.DataType, got: pa.DataType, path: str) -> list[Difference]:
    if pa.types.is_struct(have) and pa.types.is_struct(got):
        return _compare_fields(list(have), list(got), path + ".")
    if pa.types.is_list(have) and pa.types.is_list(got):
        inner = _compare_types(have.value_type, got.value_type, path + ".element")
        if all(d.kind == "type" for d in inner) and inner:
            mergeable = all(d.mergeable for d in inner)
            return [Difference(path, "type", have, got, mergeable, all(d.checked for d in inner))]
        return inner
    if same_values(have, got) or widens(got, have):
        return []
    checked = _narrows_checked(have, got)
    return [Difference(path, "type", have, got, widens(have, got), checked)]


def compare(dataset: pa.Schema, data: pa.Schema) -> list[Difference]:
    """Every difference of ``data`` from ``dataset`` (nullability is checked per value)."""
    return _compare_fields(list(dataset), list(data), "")


def _blocking(diffs: Sequence[Difference], merge: bool) -> list[Difference]:
    """Differences that refuse the write: everything but value-checked narrowing, and with
    ``merge`` only what merging cannot resolve."""
    out = []
    for d in diffs:
        if d.checked:
            continue  # widened by merge, value-checked otherwise
        if merge and d.mergeable:
            continue
        out.append(d)
    return out


def _merge_type(have: pa.DataType, got: pa.DataType) -> pa.DataType:
    if pa.types.is_struct(have) and pa.types.is_struct(got):
        return pa.struct(_merge_fields(list(have), list(got)))
    if pa.types.is_list(have) and pa.types.is_list(got):
        return pa.list_(pa.field("element", _merge_type(have.value_type, got.value_type)))
    if widens(have, got) and not widens(got, have):
        return got
    return have


def _merge_fields(dataset: Sequence[pa.Field], data: Sequence[pa.Field]) -> list[pa.Field]:
    theirs = {f.name: f for f in data}
    out = [
        f.with_type(_merge_type(f.type, theirs[f.name].type)) if f.name in theirs else f
        for f in dataset
    ]
    ours = {f.name for f in dataset}
    out += [f.with_nullable(True) for f in data if f.name not in ours]
    return out


def merged_schema(dataset: pa.Schema, data: pa.Schema) -> pa.Schema:
    """``dataset`` with the data's new columns and fields (nullable) and widened types."""
    return pa.schema(_merge_fields(list(dataset), list(data)))


def mismatch_message(name: str, diffs: Sequence[Difference], merge: bool) -> str:
    lines = [f"A schema mismatch detected when writing to dataset '{name}':"]
    lines += [f"- {d.describe()}" for d in diffs]
    if merge:
        lines.append(
            "mergeSchema (merge_schema=True) only adds nullable columns and struct fields and "
            "widens types losslessly; to replace the schema, overwrite with "
            "overwriteSchema=true (overwrite_schema=True)."
        )
    else:
        lines.append(
            "To add the new columns or widen types losslessly, write with mergeSchema=true "
            "(merge_schema=True); to replace the schema, overwrite with overwriteSchema=true "
            "(overwrite_schema=True)."
        )
    return "\n".join(lines)


def resolve_write_schema(
    name: str,
    dataset: pa.Schema,
    data: pa.Schema,
    *,
    merge: bool = False,
    partition_on: Sequence[str] = (),
) -> pa.Schema:
    """The dataset schema after writing ``data`` (``dataset`` itself unless merging).

    Raises:
        SchemaMismatch: the data differs in a way the rules above refuse; the message names
            every differing column with both types and says how to proceed.
    """
    twice = sorted({n for n in data.names if data.names.count(n) > 1})
    if twice:
        # Which of two same-named columns would be the dataset's? Neither: refuse.
        raise SchemaMismatch(
            f"A schema mismatch detected when writing to dataset '{name}': column "
            f"{twice[0]!r} appears more than once in the data"
            + (f" (also {twice[1:]})" if len(twice) > 1 else "")
        )
    clashes = case_clashes(dataset, data)
    if clashes:
        raise SchemaMismatch(_clash_message(name, clashes))
    diffs = compare(dataset, data)
    blocking = _blocking(diffs, merge)
    # Partition values live in paths: a partition column must be in the data.
    blocking += [
        d for d in diffs if d.kind == "missing" and d.column in partition_on and d not in blocking
    ]
    if blocking:
        raise SchemaMismatch(mismatch_message(name, blocking, merge))
    if not merge:
        return dataset
    return merged_schema(dataset, data)


def case_clashes(dataset: pa.Schema, data: pa.Schema) -> list[tuple[str, str]]:
    """Pairs of column (or struct field) names that differ only in case: a data name and the
    dataset's, or two of the data's own. Spark resolves names case-insensitively by default
    and cannot read a dataset with both, so no write may bring a second spelling in."""
    return _clashes(list(dataset), list(data), "")


def _clashes(
    dataset: Sequence[pa.Field], data: Sequence[pa.Field], prefix: str
) -> list[tuple[str, str]]:
    exact = {f.name: f for f in dataset}
    folded = {f.name.lower(): f.name for f in dataset}
    out: list[tuple[str, str]] = []
    for f in data:
        ours = exact.get(f.name)
        if ours is not None:
            have, got = _struct_of(ours.type), _struct_of(f.type)
            if have is not None and got is not None:
                out += _clashes(have, got, f"{prefix}{f.name}.")
            continue
        other = folded.setdefault(f.name.lower(), f.name)  # a new name: the first one wins
        if other != f.name:
            out.append((prefix + other, prefix + f.name))
    return out


def _struct_of(t: pa.DataType) -> list[pa.Field] | None:
    """The fields of a struct, or of the structs a list holds (Spark's names inside)."""
    while pa.types.is_list(t) or pa.types.is_large_list(t):
        t = t.value_type
    return list(t) if pa.types.is_struct(t) else None


def _clash_message(name: str, clashes: Sequence[tuple[str, str]]) -> str:
    lines = [f"A schema mismatch detected when writing to dataset '{name}':"]
    lines += [
        f"- columns {have!r} and {got!r} differ only in case: Spark resolves column names "
        f"case-insensitively and could not read both; spell {got!r} as {have!r}"
        for have, got in clashes
    ]
    return "\n".join(lines)


def storable(have: pa.DataType, want: pa.DataType) -> bool:
    """May data of type ``have`` be written as ``want`` (values permitting)?

    True when nothing is lost by the type alone: the same values, a lossless widening, a
    same-kind narrowing (checked value by value), structs whose every field is storable and
    whose missing fields are nullable (filled with nulls). A field ``want`` lacks is not.
    """
    for d in _compare_types(want, have, ""):
        if d.checked:
            continue
        if d.kind == "missing" and d.mergeable:
            continue
        return False
    return True
