"""Version numbers given to time travel and the change feed as the wrong kind of value.

``Dataset.open(version="1")`` reached a ``{:020d}`` format string: a raw ``ValueError``
("Unknown format code 'd' for object of type 'str'"), as did a float; a list a raw
``TypeError``; ``version=True`` silently opened version 1. ``ds.changes("4")`` raised a raw
``TypeError`` from a comparison. ``restore`` already refused these with InvalidArgument:
every entry point taking a version number now does, naming the argument; numpy integers
(as read from a DataFrame) keep working.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from parquetry.dataset import Dataset
from parquetry.errors import InvalidArgument
from parquetry.store import MemoryStore

BAD = ["1", 1.0, 0.5, True, False, [0], b"1"]


def _dataset() -> Dataset:
    store = MemoryStore()
    ds = Dataset.create(store, "v", pa.table({"k": [1]}))
    return ds.append(pa.table({"k": [2]}))


@pytest.mark.parametrize("bad", BAD, ids=repr)
def test_open_refuses_a_version_that_is_not_an_integer(bad: Any) -> None:
    ds = _dataset()
    with pytest.raises(InvalidArgument, match=r"version must be an integer"):
        Dataset.open(ds.store, "v", version=bad)


@pytest.mark.parametrize("bad", BAD, ids=repr)
@pytest.mark.parametrize("which", ["since", "until"])
def test_changes_refuses_bounds_that_are_not_integers(bad: Any, which: str) -> None:
    ds = _dataset()
    args = {"since": 0, "until": 1, which: bad}
    with pytest.raises(InvalidArgument, match=rf"{which} must be an integer"):
        ds.changes(args["since"], args["until"])
    with pytest.raises(InvalidArgument, match=r"version must be an integer"):
        ds.restore(bad)


def test_numpy_integers_still_name_versions() -> None:
    ds = _dataset()
    old = Dataset.open(ds.store, "v", version=np.int64(0))
    assert old.version == 0
    assert old.read().column("k").to_pylist() == [1]
    feed = ds.changes(np.int32(0), np.int64(1))
    assert feed.read_added().column("k").to_pylist() == [2]
