"""Incremental secondary indices (format 2): one column's index as pieces + tail + dead labels.

An :class:`IndexState` is what a version knows about one index without reading it:

* ``pieces``: immutable Parquet pieces written at checkpoints, each footer cached so a point
  lookup costs one ranged GET per piece whose statistics may hold the value;
* ``tail``: ``(value, label)`` pairs committed since the last checkpoint (inline in entries)
  and ``tail_pieces``: deltas too large to inline (written as pieces by the committer);
* ``dead``: labels removed since the pieces were written. Removing a label never rewrites a
  piece; pieces are filtered at lookup.

Lookup = union over pieces minus ``dead``, tail pieces minus the labels removed after each
was added, and the tail pairs (removal filters them directly). A checkpoint turns the tail
into one new piece, merges small pieces (tiered) and rewrites everything when ``dead``
passes a share, so its cost is O(tail) except for those amortised merges.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from parquetry.dataset.indexcheckpoint import (
    DEAD_REWRITE_FLOOR,
    DEAD_REWRITE_MAX,
    DEAD_REWRITE_SHARE,
    DEFAULT_POLICY,
    MAX_SMALL_PIECES,
    ROOT_INLINE_PAIRS,
    SMALL_PIECE_RATIO,
    MergePolicy,
    checkpoint_index,
)
from parquetry.dataset.indexdelta import (
    corrupt,
    decode_delta,
    decode_pairs,
    encode_pairs,
    parse_count,
    parse_footer,
    parse_labels,
    parse_list,
)
from parquetry.dataset.indexfile import IndexFooter, footer_of, may_hold
from parquetry.dataset.indexpieces import (
    check_foreign_footer,
    normalise_pairs,
    pairs_schema,
    piece_metadata,
    read_piece,
    search_piece,
    write_piece,
)
from parquetry.dataset.indexscan import SCAN_THREADS
from parquetry.dataset.indexspill import PairSink
from parquetry.dataset.indices import IndexData, load_index
from parquetry.dataset.predicates import Literal, eval_array
from parquetry.dataset.schema import normalise_type
from parquetry.errors import MetadataCorrupted, NotFound
from parquetry.store import Store

__all__ = [
    "DEAD_REWRITE_FLOOR",
    "DEAD_REWRITE_MAX",
    "DEAD_REWRITE_SHARE",
    "INLINE_INDEX_PAIRS",
    "MAX_SMALL_PIECES",
    "ROOT_INLINE_PAIRS",
    "SMALL_PIECE_RATIO",
    "IndexState",
    "MergePolicy",
    "TailPiece",
    "decode_delta",
]

#: An entry carries up to this many index pairs inline; more are written as a piece first.
INLINE_INDEX_PAIRS = 10_000


@dataclass(frozen=True, slots=True, kw_only=True)
class TailPiece:
    """A delta committed as a piece since the last checkpoint; ``dead`` = labels removed
    after it was added (labels removed before it do not apply: it may re-add them)."""

    footer: IndexFooter
    pairs: int
    dead: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class IndexState:
    """One column's index in a format-2 version (see the module docstring)."""

    column: str
    type: pa.DataType
    pieces: tuple[IndexFooter, ...] = ()
    tail: pa.Table = field(default_factory=lambda: pairs_schema(pa.null()).empty_table())
    tail_pieces: tuple[TailPiece, ...] = ()
    dead: frozenset[str] = frozenset()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, IndexState):
            return NotImplemented
        return (
            self.column == other.column
            and self.type == other.type
            and self.pieces == other.pieces
            and self.tail_pieces == other.tail_pieces
            and self.dead == other.dead
            and self.tail.equals(other.tail)
        )

    __hash__ = None  # type: ignore[assignment]

    # --- construction ----------------------------------------------------------------------

    @classmethod
    def empty(cls, column: str, t: pa.DataType) -> IndexState:
        t = normalise_type(t)
        return cls(column=column, type=t, tail=pairs_schema(t).empty_table())

    @classmethod
    def legacy(
        cls,
        store: Store,
        column: str,
        ref: str | Mapping[str, list[str]],
        footer: IndexFooter | None,
        t: pa.DataType,
    ) -> IndexState:
        """A format-1 index (file key, or kartothek's embedded ``{value: [labels]}``) as a
        state: the file is one piece (rewritten under ``_indices/`` at the first
        checkpoint, out of reach of kartothek's GC); embedded values become tail pairs."""
        state = cls.empty(column, t)
        if isinstance(ref, Mapping):
            return state.with_pairs(load_index(store, column, ref, state.type).pairs())
        if footer is None or footer.key != ref:
            try:
                data = store.get(ref)
            except NotFound:
                raise MetadataCorrupted(
                    f"index file {ref!r} of column {column!r} is missing", key=ref
                ) from None
            if len(data) < 12 or data[-4:] != b"PAR1":
                raise MetadataCorrupted(f"{ref}: not a Parquet index file", key=ref)
            footer = footer_of(ref, data)
        check_foreign_footer(footer)  # before pyarrow parses it (it may abort)
        piece_metadata(footer)  # validate now, not at the first lookup
        return replace(state, pieces=(footer,))

    # --- pure changes ----------------------------------------------------------------------

    def with_pairs(self, pairs: pa.Table) -> IndexState:
        """Add ``(value, label)`` rows (columns ``value`` and ``label``)."""
        pairs = normalise_pairs(pairs, self.type)
        if pairs.num_rows == 0:
            return self
        tail = pa.concat_tables([self.tail, pairs]) if self.tail.num_rows else pairs
        return replace(self, tail=tail)

    def with_piece(self, footer: IndexFooter, n_pairs: int) -> IndexState:
        """Add a delta already written as a piece (more than INLINE_INDEX_PAIRS pairs)."""
        tp = TailPiece(footer=footer, pairs=n_pairs)
        return replace(self, tail_pieces=(*self.tail_pieces, tp))

    def without_labels(self, labels: Iterable[str]) -> IndexState:
        """Remove every pair of these labels."""
        gone = frozenset(labels)
        if not gone:
            return self
        tail = self.tail
        if tail.num_rows:
            tail = tail.filter(pc.invert(pc.is_in(tail.column("label"), pa.array(list(gone)))))
        tps = tuple(replace(tp, dead=tp.dead | gone) for tp in self.tail_pieces)
        return replace(self, tail=tail, tail_pieces=tps, dead=self.dead | gone)

    def reset(self) -> IndexState:
        """No pairs at all (``replace_all``)."""
        return IndexState.empty(self.column, self.type)

    def with_delta(self, doc: Any, *, key: str) -> IndexState:
        """Apply an entry's delta for this column (see :meth:`encode_delta`)."""
        got = decode_delta(doc, self.type, key=key)
        if isinstance(got, pa.Table):
            return self.with_pairs(got)
        state = self
        for footer, n in got:
            state = state.with_piece(footer, n)
        return state

    # --- entry deltas ----------------------------------------------------------------------

    def encode_delta(
        self,
        store: Store,
        uuid: str,
        pairs: pa.Table,
        *,
        inline_max: int = INLINE_INDEX_PAIRS,
        files: Callable[[], pa.Table | None] | None = None,
    ) -> dict[str, Any]:
        """An entry's ``index`` value for ``pairs``: inline up to INLINE_INDEX_PAIRS pairs,
        else the pairs are written as a piece (create-if-absent) and the entry names it;
        ``files`` gives the added labels' file records for that piece."""
        pairs = normalise_pairs(pairs, self.type)
        if pairs.num_rows <= inline_max:
            return {"pairs": encode_pairs(pairs)}
        footer = write_piece(store, uuid, self.column, pairs, files() if files else None)
        return {"piece": footer.to_json(), "pairs": pairs.num_rows}

    def encode_sink(
        self,
        store: Store,
        uuid: str,
        sink: PairSink,
        *,
        inline_max: int = INLINE_INDEX_PAIRS,
        files: Callable[[], pa.Table | None] | None = None,
    ) -> dict[str, Any]:
        """:meth:`encode_delta` of the pairs a :class:`PairSink` collected, in bounded
        memory: a sink that spilled becomes ``{"pieces": [...]}``, pieces of disjoint value
        ranges (indexspill.py)."""
        # sink.table() holds only the pairs not spilled: a sink that spilled below
        # inline_max (run_pairs <= inline_max) must be written from its runs.
        if sink.total <= inline_max and not sink.spilled:
            return self.encode_delta(store, uuid, sink.table(), inline_max=inline_max)
        written = sink.write(store, uuid, self.column, files() if files else None)
        if len(written) == 1:
            return {"piece": written[0][0].to_json(), "pairs": written[0][1]}
        return {"pieces": [{"piece": f.to_json(), "pairs": n} for f, n in written]}

    # --- reading ---------------------------------------------------------------------------

    def lookup(self, store: Store, lit: Literal) -> set[str]:
        """Labels of partitions holding a value satisfying ``lit``."""
        return self.search(store, lit)[0]

    def search(self, store: Store, lit: Literal) -> tuple[set[str], list[str]]:
        """:meth:`lookup` and the keys of the GETs it made (one per request)."""
        labels, keys, _ = self.search_files(store, lit)
        return labels, keys

    def search_files(
        self, store: Store, lit: Literal
    ) -> tuple[set[str], list[str], dict[str, tuple[str, str]]]:
        """:meth:`search` plus the file records the pieces hold for the labels found, as
        label -> (``files`` text, piece key) (piecefiles.py; live labels only; tail pairs
        carry none)."""
        if lit.op == "is null":
            return set(), [], {}  # an index holds no nulls
        sources = [(f, self.dead) for f in self.pieces]
        sources += [(tp.footer, tp.dead) for tp in self.tail_pieces]
        # A large delta or rewrite is many pieces of disjoint value ranges: those whose
        # statistics exclude the value need no request, so no thread either.
        sources = [src for src in sources if may_hold(src[0], lit)]

        def one(
            src: tuple[IndexFooter, frozenset[str]],
        ) -> tuple[set[str], list[str], dict[str, tuple[str, str]]]:
            found, used, records = search_piece(store, self.column, src[0], lit, self.type)
            live = found - src[1]
            key = src[0].key
            return live, [key] * used, {x: (records[x], key) for x in live if x in records}

        labels: set[str] = set()
        keys: list[str] = []
        files: dict[str, tuple[str, str]] = {}
        # A scan (indexscan.py) holds a request and a row group per piece in flight.
        threads = 16 if lit.op in ("==", "in") else SCAN_THREADS
        for found, used_keys, records in store.map_concurrent(one, sources, max_workers=threads):
            labels |= found
            keys += used_keys
            files.update(records)
        if self.tail.num_rows:
            mask = eval_array(lit, self.tail.column("value").combine_chunks())
            labels |= set(self.tail.column("label").filter(mask).to_pylist())
        return labels, keys, files

    def all_labels(self, store: Store) -> set[str]:
        """Every live label (a scan: one row group at a time, not the whole index)."""
        every = Literal(column=self.column, op="is not null", value=None, type=self.type)
        return self.lookup(store, every)

    def full(self, store: Store) -> IndexData:
        """The whole index, merged, without removed labels (kartothek's index file)."""
        return _grouped(self.column, self.type, self._live_pairs(store))

    def _live_pairs(self, store: Store) -> pa.Table:
        parts = [_without(self._piece_pairs(store, f), self.dead) for f in self.pieces]
        parts += [_without(self._piece_pairs(store, tp.footer), tp.dead) for tp in self.tail_pieces]
        parts.append(self.tail)
        return pa.concat_tables(parts)

    def _piece_pairs(self, store: Store, footer: IndexFooter) -> pa.Table:
        return normalise_pairs(read_piece(store, self.column, footer, self.type).pairs(), self.type)

    def piece_keys(self) -> set[str]:
        """Every object this state needs (for GC)."""
        return {f.key for f in self.pieces} | {tp.footer.key for tp in self.tail_pieces}

    # --- checkpoint ------------------------------------------------------------------------

    def checkpoint(
        self,
        store: Store,
        uuid: str,
        *,
        policy: MergePolicy = DEFAULT_POLICY,
        files: Callable[[], pa.Table | None] | None = None,
    ) -> IndexState:
        """This state with no tail pieces: tail pairs become one piece (or stay inline in
        the root while they are at most ``policy.inline_pairs``); small pieces merge; a full
        rewrite when ``dead`` passes :meth:`MergePolicy.too_dead`. A piece written keeps
        the file records of the pieces it merges; ``files`` gives those of tail labels
        (:mod:`parquetry.dataset.indexcheckpoint`)."""
        return checkpoint_index(self, store, uuid, policy=policy, files=files)

    # --- root form -------------------------------------------------------------------------

    def to_root(self) -> dict[str, Any]:
        """``{"pieces": [footer...], "dead": [label...]}``; a state that was not
        checkpointed adds ``tail`` (b64 Arrow IPC) and ``tail_pieces``."""
        out: dict[str, Any] = {
            "pieces": [f.to_json() for f in self.pieces],
            "dead": sorted(self.dead),
        }
        if self.tail.num_rows:
            out["tail"] = encode_pairs(self.tail)
        if self.tail_pieces:
            out["tail_pieces"] = [
                {"piece": tp.footer.to_json(), "pairs": tp.pairs, "dead": sorted(tp.dead)}
                for tp in self.tail_pieces
            ]
        return out

    @classmethod
    def from_root(cls, column: str, t: pa.DataType, doc: Any, *, key: str) -> IndexState:
        """Parse :meth:`to_root` output; any defect raises MetadataCorrupted naming ``key``."""
        where = f"index {column!r}"
        if not isinstance(doc, Mapping):
            raise corrupt(key, where, "an object", doc)
        state = cls.empty(column, t)
        listed = parse_list(doc.get("pieces", []), key, f"{where}.pieces")
        pieces = tuple(parse_footer(p, key, f"{where}.pieces[{i}]") for i, p in enumerate(listed))
        dead = parse_labels(doc.get("dead", []), key, f"{where}.dead")
        tail = state.tail
        if "tail" in doc:
            tail = decode_pairs(doc["tail"], state.type, key, f"{where}.tail")
        tps = []
        for i, tp in enumerate(parse_list(doc.get("tail_pieces", []), key, f"{where}.tail_pieces")):
            at = f"{where}.tail_pieces[{i}]"
            if not isinstance(tp, Mapping):
                raise corrupt(key, at, "an object", tp)
            tps.append(
                TailPiece(
                    footer=parse_footer(tp.get("piece"), key, f"{at}.piece"),
                    pairs=parse_count(tp.get("pairs"), key, f"{at}.pairs"),
                    dead=parse_labels(tp.get("dead", []), key, f"{at}.dead"),
                )
            )
        return replace(state, pieces=pieces, dead=dead, tail=tail, tail_pieces=tuple(tps))


# --- helpers -----------------------------------------------------------------------------


def _without(pairs: pa.Table, dead: frozenset[str]) -> pa.Table:
    if not dead or pairs.num_rows == 0:
        return pairs
    return pairs.filter(pc.invert(pc.is_in(pairs.column("label"), pa.array(list(dead)))))


def _grouped(column: str, t: pa.DataType, pairs: pa.Table) -> IndexData:
    grouped = pairs.group_by("value", use_threads=False).aggregate([("label", "distinct")])
    return IndexData(
        column=column,
        values=grouped.column("value").combine_chunks().cast(t),
        labels=grouped.column("label_distinct").combine_chunks().cast(pa.list_(pa.string())),
    )
