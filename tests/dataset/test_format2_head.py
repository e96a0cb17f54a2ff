"""Format 2's head at scale: when checkpoints are due, roots kept out of the head, and the
open that reads such a root (docs/format.md, "Head" and "Checkpoints")."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parquetry.dataset import Dataset, pointer
from parquetry.dataset import head as head_module
from parquetry.dataset.checkpoint import checkpoint_key, list_checkpoints
from parquetry.dataset.head import Lineage, decode_head, head_key, root_bytes
from parquetry.dataset.naming import version_key
from parquetry.store import MemoryStore
from parquetry.testing import CountingStore


def _root(size: int) -> dict[str, str]:
    root = {"pad": ""}
    root["pad"] = "x" * (size - len(json.dumps(root, separators=(",", ":"))))
    assert root_bytes(root) == size
    return root


@settings(max_examples=60, deadline=None)
@given(
    root_size=st.integers(10, 400_000),
    entry=st.integers(200, 5_000),
)
def test_a_checkpoint_is_due_once_the_tail_has_cost_a_root(root_size: int, entry: int) -> None:
    """Rent or buy: the first tail length k at which the tail bytes rewritten by the heads
    since the checkpoint (~ k(k+1)/2 entries) reach the checkpoint's cost, capped by the
    entry and tail-byte bounds."""
    lineage = Lineage(7, _root(root_size))
    cost = max(root_size, head_module.CHECKPOINT_MIN_COST)
    for k in range(1, head_module.CHECKPOINT_ENTRIES + 1):
        lineage = lineage.extended({"version": {"number": 7 + k}}, entry)
        want = (
            k >= head_module.CHECKPOINT_ENTRIES
            or k * entry >= head_module.CHECKPOINT_TAIL_BYTES
            or k * entry * (k + 1) >= 2 * cost
        )
        assert lineage.checkpoint_due() == want, k
        if want:
            break
    assert want


def _table(n: int, start: int = 0) -> pa.Table:
    return pa.table(
        {"p": [i % 500 for i in range(start, start + n)], "v": list(range(start, start + n))}
    )


def test_heads_stay_small_when_the_root_is_not_inline(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the root out of the head (as at 100k partitions), what a 1-row append writes
    to the head and the checkpoints stays a fraction of the tail bound: checkpoints come
    every ~sqrt(2 C / e) commits, not after 100 entries or 32-64 KiB of tail (format 2 as
    first merged averaged ~half its 64 KiB tail bound per head)."""
    monkeypatch.setattr(head_module, "ROOT_INLINE_BYTES", 0)
    monkeypatch.setattr(pointer, "POINTER_EVERY_COMMIT_BYTES", 0)  # pointer at checkpoints
    inner = MemoryStore()
    ds = Dataset.create(inner, "ds", _table(1000), partition_on=["p"])
    store = CountingStore(inner)
    ds = Dataset.open(store, "ds")
    heads, checkpoints = [], 0
    n = 60
    for i in range(n):
        store.reset()
        ds = ds.append(_table(1, 10_000 + i))
        written = [k for kind, k in store.log if kind == "put"]
        heads.append(len(inner.get(head_key("ds"))))
        checkpoints += any("/_checkpoints/" in k for k in written)
        head = decode_head(inner.get(head_key("ds")), "h")
        assert head["root"] is None
        assert len(json.dumps(head["tail"])) <= head_module.CHECKPOINT_TAIL_BYTES + 4096
    entry = len(inner.get(version_key("ds", ds.version)))
    assert sum(heads) / n < 12 * entry, (heads, entry)
    assert checkpoints >= n // 12, checkpoints
    assert Dataset.open(inner, "ds").read().num_rows == 1000 + n


def test_open_reads_an_out_of_line_root_and_the_probe_together(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Head, then root and probe (in parallel): 3 requests; a commit the head does not show
    is found through that probe, and the roll forward goes on from there."""
    monkeypatch.setattr(head_module, "ROOT_INLINE_BYTES", 0)
    monkeypatch.setattr(pointer, "POINTER_EVERY_COMMIT_BYTES", 0)  # no pointer HEAD on open
    inner = MemoryStore()
    ds = Dataset.create(inner, "ds", _table(200), partition_on=["p"])
    ds = ds.append(_table(1, 500))  # the first checkpoint: its root is out of the head
    head = decode_head(inner.get(head_key("ds")), "h")
    assert head["root"] is None
    assert inner.exists(checkpoint_key("ds", head["checkpoint"]))
    counting = CountingStore(inner)
    opened = Dataset.open(counting, "ds")
    assert opened.version == ds.version
    assert counting.total == 3, counting.log
    assert opened.read().num_rows == 201

    # Two commits whose head update was lost: the prefetched probe finds the first.
    stale = inner.get(head_key("ds"))
    ds.append(_table(1, 600)).append(_table(1, 700))
    inner.put(head_key("ds"), stale)
    counting = CountingStore(inner)
    opened = Dataset.open(counting, "ds")
    assert opened.version == ds.version + 2
    gets = [k for kind, k in counting.log if kind == "get"]
    assert gets.count(version_key("ds", ds.version + 1)) == 1  # read once, not re-probed
    assert counting.total == 5, counting.log  # head, root, 3 probes (2 hits, 1 miss)
    assert opened.read().num_rows == 203


def test_a_head_written_the_previous_way_still_opens(monkeypatch: pytest.MonkeyPatch) -> None:
    """Heads of format 2 as first merged (roots up to 64 KiB inline, checkpoints only by
    100 entries or 64 KiB of tail) open, and the next commits follow the current rules."""
    monkeypatch.setattr(head_module, "ROOT_INLINE_BYTES", 64 * 1024)
    monkeypatch.setattr(head_module, "CHECKPOINT_TAIL_BYTES", 64 * 1024)
    monkeypatch.setattr(head_module, "CHECKPOINT_MIN_COST", 1 << 40)
    store = MemoryStore()
    ds = Dataset.create(store, "ds", _table(300), partition_on=["p"]).checkpoint()
    for i in range(30):
        ds = ds.append(_table(1, 1000 + i))
    old = decode_head(store.get(head_key("ds")), "h")
    assert old["root"] is not None
    assert len(old["tail"]) >= 20, old["checkpoint"]
    monkeypatch.undo()
    opened = Dataset.open(store, "ds")
    assert opened.version == ds.version
    assert sorted(opened.read(columns=["v"]).column("v").to_pylist()) == sorted(
        list(range(300)) + list(range(1000, 1030))
    )
    opened = opened.append(_table(1, 2000))
    assert list_checkpoints(store, "ds")[-1] == opened.version  # the rent is long paid
    assert Dataset.open(store, "ds").read().num_rows == 331
