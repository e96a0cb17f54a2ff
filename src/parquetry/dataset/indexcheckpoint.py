"""Checkpointing one column's index (format 2): the tail becomes a piece (or stays inline),
small pieces merge, everything is rewritten when too many labels are dead. Streams: the
pieces merged are read one row group at a time into a
:class:`~parquetry.dataset.indexspill.PairSink` (see :mod:`parquetry.dataset.indexstate`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from parquetry.dataset.indexfile import IndexFooter
from parquetry.dataset.indexpieces import piece_pairs, read_piece
from parquetry.dataset.indexrecords import CarriedRecords
from parquetry.dataset.indexspill import PIECE_MAX_PAIRS, PairSink
from parquetry.dataset.naming import is_index_piece_key
from parquetry.store import Store

if TYPE_CHECKING:  # indexstate imports this module
    from parquetry.dataset.indexstate import IndexState

__all__ = [
    "DEAD_REWRITE_FLOOR",
    "DEAD_REWRITE_MAX",
    "DEAD_REWRITE_SHARE",
    "DEFAULT_POLICY",
    "MAX_SMALL_PIECES",
    "ROOT_INLINE_PAIRS",
    "SMALL_PIECE_RATIO",
    "MergePolicy",
    "checkpoint_index",
]

#: More than this many pieces each < 1/8 of the biggest merge into one at a checkpoint.
MAX_SMALL_PIECES = 8
SMALL_PIECE_RATIO = 8
#: A checkpoint keeps up to this many tail pairs inline in the root (~20 KB of JSON for
#: labels "p=<n>/<32 hex>") instead of writing a tiny piece: with a checkpoint every 100
#: 1-row appends a piece per checkpoint would make every string point lookup cost one
#: more GET per checkpoint (up to MAX_SMALL_PIECES + 1 GETs); inline pairs cost none.
ROOT_INLINE_PAIRS = 512
#: Everything is rewritten when the dead labels exceed min(MAX, max(FLOOR, SHARE * pairs)).
#: The design said max(10,000, 10 % of the pairs), but dead labels live in the checkpoint
#: root (~47 JSON bytes each for "p=12345/<32 hex>"): 10 % of a 10M-pair index would put
#: 1M labels (47 MB) in a root that must stay <= ~1 MiB. Capped at 10,000 (~470 KB) the
#: rewrite of such an index (~150 MB) is amortised over at least 10,000 removals; below
#: 100,000 pairs the share rule rewrites after 10 % (>= 100) removals, O(1) per removal.
DEAD_REWRITE_FLOOR = 100
DEAD_REWRITE_MAX = 10_000
DEAD_REWRITE_SHARE = 0.10


@dataclass(frozen=True, slots=True, kw_only=True)
class MergePolicy:
    """When a checkpoint merges pieces (the defaults are the format's; tests shrink them)."""

    max_small_pieces: int = MAX_SMALL_PIECES
    small_ratio: int = SMALL_PIECE_RATIO
    dead_floor: int = DEAD_REWRITE_FLOOR
    dead_share: float = DEAD_REWRITE_SHARE
    dead_max: int = DEAD_REWRITE_MAX
    inline_pairs: int = ROOT_INLINE_PAIRS
    #: Pairs a merge holds in memory and writes per piece (indexspill.PIECE_MAX_PAIRS).
    piece_pairs: int = PIECE_MAX_PAIRS

    def too_dead(self, dead: int, pairs: int) -> bool:
        return dead > min(self.dead_max, max(self.dead_floor, self.dead_share * pairs))


#: The format's merge policy.
DEFAULT_POLICY = MergePolicy()


def checkpoint_index(
    state: IndexState,
    store: Store,
    uuid: str,
    *,
    policy: MergePolicy = MergePolicy(),
    files: Callable[[], pa.Table | None] | None = None,
) -> IndexState:
    """This state with no tail pieces: tail pairs become one piece (or stay inline in
    the root while they are at most ``policy.inline_pairs``); small pieces merge; a full
    rewrite when ``dead`` passes :meth:`MergePolicy.too_dead`. A piece written keeps
    the file records of the pieces it merges; ``files`` gives those of tail labels."""
    records = CarriedRecords(state, store, files)
    counts = [piece_pairs(f) for f in state.pieces]
    footers = [*state.pieces, *(tp.footer for tp in state.tail_pieces)]
    sizes = [*counts, *(tp.pairs for tp in state.tail_pieces)]
    inline = state.tail.num_rows <= policy.inline_pairs
    if not inline:
        sizes.append(state.tail.num_rows)  # the tail as a new piece, index len(footers)
    total = sum(sizes) + (state.tail.num_rows if inline else 0)
    if policy.too_dead(len(state.dead), total) or _revived(state, store, tail=not inline):
        return _rewrite(state, store, uuid, records, policy)
    # Pieces written from spilled pairs hold about PIECE_MAX_PAIRS each: measured
    # against that (not a bigger piece's size) they are not small, or the first
    # checkpoint after a large rewrite would merge all of them again.
    biggest = min(max(sizes, default=0), policy.piece_pairs)
    small = {i for i, n in enumerate(sizes) if n * policy.small_ratio < biggest}
    merge = small if len(small) > policy.max_small_pieces else set()
    # Legacy (format-1) index files join the next merge: kartothek's GC may delete them.
    merge |= {i for i, f in enumerate(footers) if not is_index_piece_key(uuid, f.key)}
    if not inline:
        merge.add(len(footers))
    if sizes and len(merge) == len(sizes):
        return _rewrite(state, store, uuid, records, policy)
    chosen = [footers[i] for i in sorted(merge) if i < len(footers)]
    dead = {tp.footer.key: tp.dead for tp in state.tail_pieces}
    kept = tuple(f for i, f in enumerate(footers) if i not in merge)
    with PairSink(state.type, run_pairs=policy.piece_pairs) as sink:
        for f in chosen:
            for part in records.stream(f, dead.get(f.key, state.dead)):
                sink.add(_without(part, state.dead))
        if not inline:
            sink.add(state.tail)
        written = sink.write(
            store, uuid, state.column, records.table(not inline), max_pairs=policy.piece_pairs
        )
    kept = (*kept, *(piece for piece, _ in written))
    tail = state.tail if inline else state.tail.slice(0, 0)
    return replace(state.reset(), pieces=kept, dead=state.dead, tail=tail)


def _rewrite(
    state: IndexState,
    store: Store,
    uuid: str,
    records: CarriedRecords | None = None,
    policy: MergePolicy = MergePolicy(),
) -> IndexState:
    """Every live pair as new pieces, in the memory of one run (indexspill.py)."""
    records = records or CarriedRecords(state, store, None)
    sources = [(f, state.dead) for f in state.pieces]
    sources += [(tp.footer, tp.dead) for tp in state.tail_pieces]
    with PairSink(state.type, run_pairs=policy.piece_pairs) as sink:
        for footer, dead in sources:
            for part in records.stream(footer, dead):
                sink.add(_without(part, dead))
        sink.add(state.tail)
        written = sink.write(
            store, uuid, state.column, records.table(True), max_pairs=policy.piece_pairs
        )
    return replace(state.reset(), pieces=tuple(piece for piece, _ in written))


def _revived(state: IndexState, store: Store, *, tail: bool = True) -> bool:
    """Do tail pairs (when they become a piece) or tail pieces re-add a label of
    ``dead``? After the checkpoint ``dead`` applies to every piece, so such a label
    forces a full rewrite (rare: labels are unique names; restores reset instead)."""
    if not state.dead:
        return False
    if (
        tail
        and state.tail.num_rows
        and pc.any(pc.is_in(state.tail.column("label"), pa.array(list(state.dead)))).as_py()
    ):
        return True
    for tp in state.tail_pieces:
        earlier = state.dead - tp.dead
        if earlier and earlier & _piece_labels(state, store, tp.footer):
            return True
    return False


def _piece_labels(state: IndexState, store: Store, footer: IndexFooter) -> set[str]:
    return read_piece(store, state.column, footer, state.type).all_labels()


def _without(pairs: pa.Table, dead: frozenset[str]) -> pa.Table:
    if not dead or pairs.num_rows == 0:
        return pairs
    return pairs.filter(pc.invert(pc.is_in(pairs.column("label"), pa.array(list(dead)))))
