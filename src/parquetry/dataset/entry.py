"""Format-2 entries: what one commit changed, stored as ``_versions/<n>.json``.

An entry body (the value of ``"parquetry_entry"``)::

    {"format": 2, "version": <VersionInfo>, "replace_all": bool,
     "remove": [label, ...], "add": [[label, {table: key}, "<FileInfo JSON>"], ...],
     "set": {"schema": b64, "partition_keys": [...], "metadata": {...}, "encryption": ...,
             "metadata_format": "json", "indices": {column: {"pieces": [footer], "dead": []}},
             "txns": {app_id: version}}}

``set`` holds only the fields that changed (each replaces the old value; ``txns`` merges:
each application listed replaces its own version, the others stay); ``replace_all``
empties the state first (create, overwrite) and then lists no removes. A commit's entry is
built from the change it applied (:class:`Change`, recorded by ``apply_change``), never by
diffing whole states. Applying an entry to a state costs O(change) (:meth:`Catalog.changed`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from parquetry.dataset.docschema import (
    _version,
    metadata_problems,
    raise_problems,
    stats_checkers,
)
from parquetry.dataset.indexwire import (
    PLACEHOLDER,
    apply_index_changes,
    parse_states,
    states_form,
    states_of,
)
from parquetry.dataset.metadata import DatasetDocument, FileInfo, FileInfos, VersionInfo
from parquetry.dataset.schema import schema_from_b64, schema_to_b64
from parquetry.dataset.state import Catalog, InfosView, PartitionsView, Record
from parquetry.errors import MetadataCorrupted
from parquetry.store import Store

__all__ = [
    "ENTRY_KEY",
    "Change",
    "apply_entry",
    "catalog_of",
    "decode_entry",
    "encode_entry",
    "entry_of",
    "indices_form",
    "info_text",
    "with_catalog",
]

ENTRY_KEY = "parquetry_entry"
FORMAT = 2


@dataclass(frozen=True, slots=True)
class Change:
    """What a commit did to its base's files (recorded on the new document)."""

    remove: tuple[str, ...] = ()
    add: Mapping[str, Record] = field(default_factory=dict)
    replace_all: bool = False
    #: The entry's ``index`` deltas (column -> inline pairs or a piece written first).
    index: Mapping[str, Any] = field(default_factory=dict)
    #: The entry's ``set.indices`` (column -> root form) when the index map is replaced.
    index_set: Mapping[str, Any] | None = None


def info_text(info: Any) -> str | None:
    if info is None or isinstance(info, str):
        return info
    if isinstance(info, FileInfo):
        info = info.to_json()
    return json.dumps(info)


def catalog_of(doc: DatasetDocument) -> Catalog:
    """The catalog behind ``doc`` (built once from the dicts of a format-1 document)."""
    if isinstance(doc.partitions, PartitionsView):
        return doc.partitions.catalog
    raw = doc.files._entries
    return Catalog.of_dicts(doc.partitions, raw)


def with_catalog(doc: DatasetDocument, catalog: Catalog, **changes: Any) -> DatasetDocument:
    """``doc`` evolved to show ``catalog`` (and ``changes``)."""
    schema = changes.get("schema", doc.schema)
    files = FileInfos(
        InfosView(catalog),
        owned=True,
        key=f"dataset {doc.uuid!r}",
        checks=stats_checkers(schema) if schema is not None else None,
    )
    return doc.evolve(partitions=PartitionsView(catalog), files=files, **changes)


def indices_form(doc: DatasetDocument, store: Store | None = None) -> dict[str, Any]:
    """The index states of ``doc`` as an entry's ``set.indices`` / a root stores them."""
    return states_form(states_of(store, doc))


def _sets(base: DatasetDocument | None, doc: DatasetDocument) -> dict[str, Any]:
    """The fields of ``doc`` that differ from ``base`` (all of them without a base)."""
    out: dict[str, Any] = {}
    b = base if base is not None and base.version is not None else None
    if doc.schema is not None and (
        b is None or b.schema is None or not b.schema.equals(doc.schema)
    ):
        out["schema"] = schema_to_b64(doc.schema)
    if b is None or b.partition_keys != doc.partition_keys:
        out["partition_keys"] = list(doc.partition_keys)
    if b is None or dict(b.metadata) != dict(doc.metadata):
        out["metadata"] = dict(doc.metadata)
    if b is None or b.encryption != doc.encryption:
        out["encryption"] = dict(doc.encryption) if doc.encryption is not None else None
    if b is None or b.metadata_format != doc.metadata_format:
        out["metadata_format"] = doc.metadata_format
    if doc.settings and (b is None or dict(b.settings) != dict(doc.settings)):
        out["settings"] = dict(doc.settings)
    # ``txns`` merges (each listed application's version replaces its old one): an entry
    # lists the applications whose version it sets, never the whole map again.
    old = b.txns if b is not None else {}
    txns = {app: v for app, v in doc.txns.items() if old.get(app) != v}
    if txns:
        out["txns"] = txns
    return out


def entry_of(
    base: DatasetDocument | None, doc: DatasetDocument, store: Store | None = None
) -> dict[str, Any]:
    """The entry body committing ``doc`` on ``base`` (the whole state when no change was
    recorded or the base is not a parquetry version: a *self-contained* entry)."""
    assert doc.version is not None
    change: Change | None = doc.change
    full = base is None or base.version is None or change is None
    body: dict[str, Any] = {"format": FORMAT, "version": doc.version.to_json()}
    if full:
        body["replace_all"] = True
        body["remove"] = []
        body["add"] = [[lbl, dict(rec[0]), info_text(rec[1])] for lbl, rec in catalog_of(doc)]
    else:
        assert change is not None
        body["replace_all"] = change.replace_all
        body["remove"] = [] if change.replace_all else sorted(change.remove)
        body["add"] = [[lbl, dict(rec[0]), info_text(rec[1])] for lbl, rec in change.add.items()]
    body["set"] = _sets(None if full else base, doc)
    if full:
        if doc.indices:
            body["set"]["indices"] = indices_form(doc, store)
    else:
        assert change is not None
        if change.index_set is not None:
            body["set"]["indices"] = dict(change.index_set)
        if change.index:
            body["index"] = dict(change.index)
    return body


def self_contained(body: Mapping[str, Any]) -> bool:
    """Whether the entry alone is a whole state (a create, or a migration's first entry)."""
    sets = body.get("set", {})
    return bool(body.get("replace_all")) and "schema" in sets and "metadata" in sets


def encode_entry(body: Mapping[str, Any]) -> bytes:
    return json.dumps({ENTRY_KEY: body}, separators=(",", ":")).encode()


def decode_entry(raw: Any, key: str) -> dict[str, Any]:
    """The checked entry body of a decoded ``_versions`` object."""
    body = raw.get(ENTRY_KEY) if isinstance(raw, dict) else None
    try:
        if not isinstance(body, dict) or body.get("format") != FORMAT:
            raise ValueError("not a format-2 entry")
        VersionInfo.from_json(body["version"])
        for lbl in body["remove"]:
            if not isinstance(lbl, str):
                raise ValueError("remove: labels must be strings")
        for lbl, files, info in body["add"]:
            if not isinstance(lbl, str) or not isinstance(files, dict):
                raise ValueError("add: bad file entry")
            if info is not None and not isinstance(info, str):
                raise ValueError("add: bad statistics")
        if not isinstance(body.get("set", {}), dict):
            raise ValueError("set: expected an object")
    except (KeyError, TypeError, ValueError) as exc:
        raise MetadataCorrupted(f"{key}: invalid entry ({exc})", key=key) from None
    # Field by field, as a format-1 document's version and user metadata are checked.
    problems: list[str] = []
    _version(body["version"], problems)
    if "metadata" in body["set"]:
        problems += metadata_problems(body["set"]["metadata"], "set.metadata")
    raise_problems(problems, key)
    return body


def apply_sets(doc: DatasetDocument, sets: Mapping[str, Any], key: str) -> dict[str, Any]:
    """The DatasetDocument fields ``sets`` changes."""
    out: dict[str, Any] = {}
    try:
        if "schema" in sets:
            out["schema"] = schema_from_b64(sets["schema"])
        if "partition_keys" in sets:
            out["partition_keys"] = tuple(sets["partition_keys"])
        if "metadata" in sets:
            out["metadata"] = dict(sets["metadata"])
        if "encryption" in sets:
            out["encryption"] = sets["encryption"]
        if "metadata_format" in sets:
            out["metadata_format"] = str(sets["metadata_format"])
        if "settings" in sets:
            out["settings"] = dict(sets["settings"])
        if "txns" in sets:
            out["txns"] = {**doc.txns, **_txns(sets["txns"])}
        if "indices" in sets:
            states = parse_states(sets["indices"], out.get("schema", doc.schema), key)
            out["indices"] = dict.fromkeys(states, PLACEHOLDER)
            out["index_footers"] = {}
            out["index_states"] = states
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise MetadataCorrupted(f"{key}: invalid entry field ({exc})", key=key) from None
    return out


def _txns(raw: Any) -> dict[str, int]:
    """A checked ``txns`` map (TypeError/ValueError when malformed)."""
    if not isinstance(raw, dict):
        raise TypeError("txns: expected an object")
    for app, version in raw.items():
        if not isinstance(version, int) or isinstance(version, bool):
            raise ValueError(f"txns[{app!r}]: expected an integer version")
    return {str(app): int(version) for app, version in raw.items()}


def apply_entry(
    doc: DatasetDocument, body: Mapping[str, Any], key: str, store: Store | None = None
) -> DatasetDocument:
    """The state after entry ``body`` on state ``doc`` (``store``: to adopt a format-1
    index file whose footer ``doc`` does not cache)."""
    adds = {lbl: (files, info) for lbl, files, info in body["add"]}
    cat = catalog_of(doc).changed(
        body["remove"], adds, replace_all=bool(body["replace_all"]), trusted=True
    )
    sets = body.get("set", {})
    changes = apply_sets(doc, {k: v for k, v in sets.items() if k != "indices"}, key)
    changes.update(apply_index_changes(store, doc, body, changes.get("schema", doc.schema), key))
    changes["version"] = VersionInfo.from_json(body["version"])
    changes["explicit_partitions"] = True
    changes["change"] = None
    return with_catalog(doc, cat, **changes)


def empty_state(uuid: str) -> DatasetDocument:
    """The state a self-contained entry applies to."""
    return DatasetDocument(uuid=uuid, partitions={}, partition_keys=())
