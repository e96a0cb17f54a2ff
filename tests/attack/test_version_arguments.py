"""Version numbers given to time travel and the change feed as the wrong kind of value.

``Dataset.open(version="1")`` reached a ``{:020d}`` format string: a raw ``ValueError``
("Unknown format code 'd' for object of type 'str'"), as did a float; a list a raw
``TypeError``; ``version=True`` silently opened version 1. ``ds.changes("4")`` raised a raw
``TypeError`` from a comparison. ``restore`` already refused these with InvalidArgument:
every entry point taking a version number now does, naming the argument; numpy integers
(as read from a DataFrame) keep working. Likewise ``history(limit="3")`` (a raw TypeError)
and ``parquetry gc --retention`` beyond the calendar ("internal error: OverflowError").
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from typer.testing import CliRunner

from parquetry.cli.app import app
from parquetry.dataset import Dataset
from parquetry.errors import InvalidArgument
from parquetry.store import LocalStore, MemoryStore

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
    # restore refused them ("version must be an integer, got np.int64(0)").
    back = ds.restore(np.int64(0))
    assert back.read().column("k").to_pylist() == [1]
    info = back.info
    assert info is not None
    assert info.parameters == {"version": "0"}


@pytest.mark.parametrize("bad", ["3", 1.5, True, -1], ids=repr)
def test_history_refuses_a_limit_that_is_not_a_count(bad: Any) -> None:
    # "3" and 1.5 were compared with 0: a raw TypeError; True read as 1.
    with pytest.raises(InvalidArgument, match=r"limit must be an integer >= 0"):
        _dataset().history(limit=bad)
    assert len(_dataset().history(limit=np.int64(1))) == 1


@pytest.mark.parametrize("retention", [1e11, dt.timedelta(days=10**6)], ids=repr)
def test_gc_with_a_retention_beyond_the_calendar(retention: Any) -> None:
    ds = _dataset()
    try:
        ds.garbage_collect(retention=retention)
    except InvalidArgument:
        return  # refused, naming the retention: fine
    # or kept everything
    assert Dataset.open(ds.store, "v", version=0).read().num_rows == 1


@pytest.mark.parametrize("text", ["1000000w", "99999999999w"])
def test_cli_gc_refuses_a_retention_beyond_the_calendar(text: str, tmp_path: Path) -> None:
    # Both were "internal error: OverflowError" (the second in parse_duration itself).
    store = LocalStore(str(tmp_path))
    Dataset.create(store, "v", pa.table({"k": [1]}))
    result = CliRunner().invoke(app, ["gc", str(tmp_path), "v", "--retention", text])
    assert result.exit_code == 1, result.output
    assert "longer than the calendar holds" in result.output
    assert "internal error" not in result.output
    assert Dataset.open(store, "v").read().num_rows == 1


def test_upsert_on_none_is_refused() -> None:
    ds = _dataset()
    with pytest.raises(InvalidArgument):
        ds.upsert(pa.table({"k": [3]}), on=None)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        ds.upsert(pa.table({"k": [3]}), on=[3])  # type: ignore[list-item]
