"""compute_stats on string columns holding values that are not UTF-8 (a foreign file, an
Arrow array built without validation): a ParquetryError naming the column (and the file
when known), never a raw UnicodeDecodeError from decoding the minimum or maximum."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parquetry.dataset.stats import compute_stats
from parquetry.errors import InvalidArgument, InvalidFormat


def _strings(values: list[bytes]) -> pa.Array:
    """A string array holding ``values`` as they are (no UTF-8 validation)."""
    offsets = [0]
    for v in values:
        offsets.append(offsets[-1] + len(v))
    return pa.Array.from_buffers(
        pa.string(),
        len(values),
        [None, pa.array(offsets, pa.int32()).buffers()[1], pa.py_buffer(b"".join(values))],
    )


@pytest.mark.parametrize("shape", ["string", "large_string", "dictionary"])
def test_a_bad_string_bound_names_the_column_and_file(shape: str) -> None:
    s = _strings([b"ok", b"\xff\xfe", b"zz"])
    column = {
        "string": s,
        "large_string": s.cast(pa.large_string(), safe=False),
        "dictionary": pa.DictionaryArray.from_arrays(pa.array([0, 1, 2], pa.int32()), s),
    }[shape]
    table = pa.table({"n": [1, 2, 3], "s": column})
    with pytest.raises(InvalidArgument, match=r"column 's'.*UTF-8.*row 1"):
        compute_stats(table)
    with pytest.raises(InvalidFormat, match=r"^t/f\.parquet: column 's'.*UTF-8") as info:
        compute_stats(table, source="t/f.parquet")
    assert info.value.key == "t/f.parquet"


@settings(max_examples=80, deadline=None)
@given(values=st.lists(st.one_of(st.none(), st.binary(max_size=5)), min_size=1, max_size=8))
def test_stats_of_any_bytes_are_exact_or_a_clear_error(values: list[bytes | None]) -> None:
    # Oracle: decodable bytes give the statistics of the decoded strings; otherwise a
    # ParquetryError (the bad value may be the minimum or maximum) or the same statistics
    # (a bad value strictly inside the bounds is never decoded).
    arr = pa.array([None if v is None else v for v in values], pa.binary()).cast(
        pa.string(), safe=False
    )
    table = pa.table({"s": arr})
    decoded: list[str] = []
    ok = True
    for v in values:
        if v is None:
            continue
        try:
            decoded.append(v.decode("utf-8"))
        except UnicodeDecodeError:
            ok = False
    if not ok and any(v is not None and not _decodes(v) for v in _bounds(values)):
        with pytest.raises(InvalidArgument, match="column 's'"):
            compute_stats(table)
        return
    got = compute_stats(table)
    nulls = sum(v is None for v in values)
    if ok:
        lo = min(decoded, key=lambda x: x.encode()) if decoded else None
        hi = max(decoded, key=lambda x: x.encode()) if decoded else None
        assert got == {"s": [lo, hi, nulls]}
    else:
        good = [v for v in values if v is not None and _decodes(v)]
        assert got["s"][2] == nulls
        assert got["s"][0] in (None, *[g.decode() for g in good])


def _bounds(values: list[bytes | None]) -> list[bytes]:
    """The byte-wise minimum and maximum (what Arrow's min_max returns for strings)."""
    present = [v for v in values if v is not None]
    return [min(present), max(present)] if present else []


def _decodes(b: bytes) -> bool:
    try:
        b.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
