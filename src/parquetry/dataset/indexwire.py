"""Format-2 secondary indices wired into states, entries, checkpoints and the pointer.

A format-2 state keeps one :class:`~parquetry.dataset.indexstate.IndexState` per indexed
column (``DatasetDocument.index_states``); its ``indices`` then maps each column to an
empty placeholder (``{}``) and only the kartothek pointer names real index files, written
from the full state when the pointer is written (:func:`pointer_document`). A format-1
document has no states: :func:`index_state` adopts its index file as a legacy state (no
request when the document caches the file's footer).

An entry's ``"index"`` holds one delta per column (inline pairs or a piece written first);
``set.indices`` replaces the index map by root forms (build_index, restore, a new layout).
Applying an entry: ``replace_all`` resets every index, removed labels leave every index,
then ``set.indices`` replaces the map, then the deltas add their pairs.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any

import pyarrow as pa

from parquetry.dataset.indexexport import write_kartothek_index
from parquetry.dataset.indexpieces import normalise_pairs, write_piece
from parquetry.dataset.indexstate import INLINE_INDEX_PAIRS, IndexState
from parquetry.dataset.metadata import FileInfo
from parquetry.dataset.piecefiles import encode_record, record_table
from parquetry.dataset.schema import normalise_type
from parquetry.errors import MetadataCorrupted
from parquetry.store import Store

__all__ = [
    "PLACEHOLDER",
    "apply_index_changes",
    "checkpointed_states",
    "entry_piece_keys",
    "index_state",
    "parse_states",
    "pointer_document",
    "root_piece_keys",
    "state_of_pairs",
    "states_form",
    "states_of",
]

#: ``DatasetDocument.indices[col]`` of a column whose index is an IndexState.
PLACEHOLDER: Mapping[str, list[str]] = {}


def column_type(schema: pa.Schema | None, column: str, key: str = "") -> pa.DataType:
    if schema is None or column not in schema.names:
        raise MetadataCorrupted(f"{key or 'dataset'}: index column {column!r} is not in the schema")
    return normalise_type(schema.field(column).type)


def index_state(store: Store | None, doc: Any, column: str) -> IndexState:
    """The state of ``column``'s index in ``doc`` (a format-1 index file adopted lazily)."""
    got = doc.index_states.get(column)
    if got is not None:
        return got  # type: ignore[no-any-return]
    ref = doc.indices[column]
    footer = doc.index_footers.get(column)
    t = column_type(doc.schema, column)
    if store is None:
        if not isinstance(ref, str) or (footer is not None and footer.key == ref):
            return IndexState.legacy(None, column, ref, footer, t)  # type: ignore[arg-type]
        raise MetadataCorrupted(f"index {column!r}: no store to read {ref!r}")
    return IndexState.legacy(store, column, ref, footer, t)


def states_of(store: Store | None, doc: Any) -> dict[str, IndexState]:
    return {col: index_state(store, doc, col) for col in sorted(doc.indices)}


def state_of_pairs(
    store: Store,
    uuid: str,
    column: str,
    t: pa.DataType,
    pairs: pa.Table,
    files: Callable[[], pa.Table | None] | None = None,
) -> IndexState:
    """A whole state holding ``pairs``: one piece beyond INLINE_INDEX_PAIRS (an entry's
    ``set.indices`` stays small), else inline pairs. ``files``: the labels' file records
    for that piece."""
    state = IndexState.empty(column, t)
    pairs = normalise_pairs(pairs, state.type)
    if pairs.num_rows > INLINE_INDEX_PAIRS:
        piece = write_piece(store, uuid, column, pairs, files() if files else None)
        return replace(state, pieces=(piece,))
    return state.with_pairs(pairs)


def states_form(states: Mapping[str, IndexState]) -> dict[str, Any]:
    return {col: states[col].to_root() for col in sorted(states)}


def parse_states(forms: Any, schema: pa.Schema | None, key: str) -> dict[str, IndexState]:
    if not isinstance(forms, Mapping):
        raise MetadataCorrupted(f"{key}: indices must be an object", key=key)
    return {
        str(col): IndexState.from_root(str(col), column_type(schema, col, key), form, key=key)
        for col, form in forms.items()
    }


def apply_index_changes(
    store: Store | None, doc: Any, body: Mapping[str, Any], schema: pa.Schema | None, key: str
) -> dict[str, Any]:
    """The ``indices`` / ``index_states`` fields after entry ``body`` on ``doc``."""
    sets = body.get("set", {})
    deltas = body.get("index", {})
    if not doc.indices and "indices" not in sets and not deltas:
        return {}
    if "indices" in sets:
        states = parse_states(sets["indices"], schema, key)
    else:
        states = states_of(store, doc)
        if body.get("replace_all"):
            states = {c: s.reset() for c, s in states.items()}
        elif body.get("remove"):
            states = {c: s.without_labels(body["remove"]) for c, s in states.items()}
    if not isinstance(deltas, Mapping):
        raise MetadataCorrupted(f"{key}: index must be an object", key=key)
    for col, delta in deltas.items():
        if col not in states:
            raise MetadataCorrupted(f"{key}: index delta for unindexed column {col!r}", key=key)
        states[col] = states[col].with_delta(delta, key=key)
    return {
        "indices": dict.fromkeys(states, PLACEHOLDER),
        "index_footers": {},
        "index_states": states,
    }


def entry_piece_keys(body: Mapping[str, Any]) -> set[str]:
    """Index pieces an entry references (its deltas' and its ``set.indices``' pieces)."""
    keys: set[str] = set()
    for delta in (body.get("index") or {}).values():
        if not isinstance(delta, Mapping):
            continue
        listed = delta.get("pieces")
        for p in listed if isinstance(listed, list) else [delta]:
            if isinstance(p, Mapping) and isinstance(p.get("piece"), Mapping):
                keys.add(str(p["piece"].get("key")))
    keys |= root_piece_keys(body.get("set", {}).get("indices") or {})
    return keys


def root_piece_keys(forms: Any) -> set[str]:
    """Index pieces named by the root forms ``{column: form}`` (a root or ``set.indices``)."""
    keys: set[str] = set()
    if not isinstance(forms, Mapping):
        return keys
    for form in forms.values():
        if not isinstance(form, Mapping):
            continue
        for p in form.get("pieces") or []:
            if isinstance(p, Mapping) and "key" in p:
                keys.add(str(p["key"]))
        for tp in form.get("tail_pieces") or []:
            if isinstance(tp, Mapping) and isinstance(tp.get("piece"), Mapping):
                keys.add(str(tp["piece"].get("key")))
    return keys


def checkpointed_states(store: Store, doc: Any) -> dict[str, IndexState]:
    """Every index of ``doc`` checkpointed (tail pieces folded, small pieces merged); a
    piece written from the tail gets the file records of the labels added since the last
    checkpoint (in memory: no segment is read)."""
    return {
        c: s.checkpoint(store, doc.uuid, files=lambda: added_records(doc))
        for c, s in states_of(store, doc).items()
    }


def added_records(doc: Any) -> pa.Table | None:
    """File records (piecefiles.py) of the labels the catalog holds in memory (added since
    its checkpoint); None when ``doc`` has no such catalog."""
    catalog = getattr(doc.partitions, "catalog", None)
    adds = getattr(catalog, "adds", None)
    if not isinstance(adds, Mapping):
        return None
    return _records(doc.uuid, adds.items())


def all_records(doc: Any) -> pa.Table:
    """File records of every label of ``doc`` (loads every segment: for O(table) work such
    as ``build_index``, whose piece then equals the one a commit of the same files wrote)."""
    catalog = getattr(doc.partitions, "catalog", None)
    if catalog is not None:
        return _records(doc.uuid, iter(catalog))
    infos = doc.files
    return _records(
        doc.uuid, ((lbl, (keys, infos.get(lbl))) for lbl, keys in doc.partitions.items())
    )


def _records(uuid: str, items: Iterable[tuple[str, tuple[Mapping[str, str], Any]]]) -> pa.Table:
    out: dict[str, str | None] = {}
    for label, (keys, info) in items:
        try:
            if isinstance(info, str):
                info = json.loads(info)
            if isinstance(info, list):
                info = FileInfo.from_json(info)
        except (ValueError, TypeError):
            continue  # no record: a lookup of this label reads its segment
        if isinstance(info, FileInfo):
            out[label] = encode_record(uuid, label, keys, info.rows, info.size)
    return record_table(out)


def pointer_document(store: Store, doc: Any) -> Any:
    """``doc`` naming full kartothek index files (written now from its states) in
    ``indices``: what the kartothek pointer shows, and the marker of the version shown in
    its user metadata (kartothek keeps it). Only when the pointer is written."""
    from parquetry.dataset.metadata import POINTER_MARKER

    if doc.version is not None:
        doc = doc.evolve(metadata={**doc.metadata, POINTER_MARKER: doc.version.number})
    if not doc.index_states:
        return doc
    indices: dict[str, Any] = {}
    footers = {}
    for col, state in sorted(doc.index_states.items()):
        only = state.pieces[0] if len(state.pieces) == 1 else None
        if (
            only is not None
            and not state.tail_pieces
            and not state.dead
            and not state.tail.num_rows
            and only.key.startswith(f"{doc.uuid}/indices/")
        ):
            footers[col] = only  # an adopted kartothek file, still whole
        else:
            footers[col] = write_kartothek_index(store, doc.uuid, state)
        indices[col] = footers[col].key
    return doc.evolve(indices=indices, index_footers=footers)
