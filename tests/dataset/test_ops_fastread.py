"""A corrupted input of ``delete_where`` / ``update_where`` (the rewrite engine's reads) fails
with InvalidFormat naming the file, and nothing is committed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest

from parquetry.dataset import Dataset
from parquetry.errors import InvalidFormat
from parquetry.store import MemoryStore


def _dataset(store: MemoryStore) -> Dataset:
    ds = Dataset.create(
        store,
        "fr",
        pa.table({"p": [1, 1, 2, 2], "k": [1, 2, 3, 4], "s": ["a", "b", "c", "d"]}),
        partition_on=["p"],
        secondary_indices=["k"],
    )
    return ds.append(pa.table({"p": [1, 2], "k": [5, 6], "s": ["e", "f"]}))


def _zero_body(data: bytes) -> bytes:
    return data[:8] + b"\x00" * (len(data) - 16) + data[-8:]  # footer length and magic kept


def _bad_footer(data: bytes) -> bytes:
    return data[:-12] + b"\xff" * 4 + data[-8:]  # footer bytes garbage, length kept


OPS: dict[str, Callable[[Dataset], Any]] = {
    "delete": lambda ds: ds.delete_where([[("k", ">", 0)], [("s", "==", "x")]]),
    "update": lambda ds: ds.update_where([[("k", ">", 0)]], set={"s": "z"}),
}


@pytest.mark.parametrize("corrupt", [_zero_body, _bad_footer])
@pytest.mark.parametrize("op", sorted(OPS))
def test_a_corrupt_input_fails_naming_it_and_commits_nothing(
    op: str, corrupt: Callable[[bytes], bytes]
) -> None:
    store = MemoryStore()
    ds = _dataset(store)
    before = {m.key for m in store.list("fr/table/")}
    victim = ds.plan().files[1]
    store.put(victim.key, corrupt(store.get(victim.key)))
    with pytest.raises(InvalidFormat, match=victim.key):
        OPS[op](ds)
    assert Dataset.open(store, "fr").version == ds.version
    assert {m.key for m in store.list("fr/table/")} == before  # outputs written are deleted


def test_a_delete_over_the_fast_read_path_is_exact_and_indexed() -> None:
    store = MemoryStore()
    ds = _dataset(store)
    new = ds.delete_where([[("k", "in", [2, 5])]])
    got = new.read().sort_by("k").to_pydict()
    assert got == {"p": [1, 2, 2, 2], "k": [1, 3, 4, 6], "s": ["a", "c", "d", "f"]}
    assert new.read(predicates=[[("k", "==", 3)]]).column("s").to_pylist() == ["c"]
