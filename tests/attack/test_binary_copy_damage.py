"""Attacks on compact(binary_copy=...) with damaged inputs: a damaged input must stop the
compaction with an error naming it, commit nothing, and never spread its damage to the
rows of other files (pages of small row groups are concatenated across files)."""

from __future__ import annotations

import struct
from collections import Counter
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from parquetry.dataset import Dataset
from parquetry.errors import InvalidFormat
from parquetry.parquet import WriteOptions
from parquetry.parquet.footer import footer_from_bytes
from parquetry.store import MemoryStore


def _rows(start: int) -> pa.Table:
    ids = range(start, start + 50)
    return pa.table({"id": pa.array(ids, pa.int64()), "s": [f"v{i}" for i in ids]})


def _dataset(opts: WriteOptions, files: int = 4) -> Dataset:
    ds = Dataset.create(MemoryStore(), "c", _rows(0), write_options=opts)
    for k in range(1, files):
        ds = ds.append(_rows(50 * k), write_options=opts)
    return ds


def _chunk(ds: Dataset, column: int) -> tuple[str, bytearray, dict[int, Any]]:
    f = ds.plan().files[0]
    data = bytearray(ds.store.get(f.key))
    meta = footer_from_bytes(bytes(data), f.key).metadata
    assert meta is not None
    return f.key, data, meta[4][0][1][column][3]


def _bag(table: pa.Table) -> Counter[str]:
    # As bytes: a flipped bit may leave invalid UTF-8, which pyarrow reads without checking.
    return Counter(
        map(repr, table.cast(pa.schema([("id", pa.int64()), ("s", pa.binary())])).to_pylist())
    )


def _refused(ds: Dataset, key: str, mode: Any) -> None:
    with pytest.raises(InvalidFormat) as info:
        ds.compact(target_file_size=1 << 20, binary_copy=mode)
    assert info.value.key == key
    assert key in str(info.value)
    assert Dataset.open(ds.store, "c").version == ds.version


@pytest.mark.parametrize("mode", [True, "auto"])
def test_a_page_failing_its_crc_stops_the_compaction(mode: Any) -> None:
    # Snappy accepts the flipped byte and pyarrow does not check CRCs: before the fix the
    # compaction committed the wrong values silently.
    ds = _dataset(
        WriteOptions(dictionary=False, compression="snappy", extra={"write_page_checksum": True})
    )
    key, data, cmd = _chunk(ds, 0)
    data[cmd[9] + cmd[7] - 3] ^= 0xFF
    ds.store.put(key, bytes(data))
    _refused(ds, key, mode)


@pytest.mark.parametrize("compression", ["zstd", "gzip"])
def test_a_page_that_does_not_decompress_stops_the_compaction(compression: str) -> None:
    # Dictionary-encoded row groups are copied whole under True: before the fix the damaged
    # page went into the output and the error named the output, not the damaged input.
    ds = _dataset(WriteOptions(dictionary=True, compression=compression))
    key, data, cmd = _chunk(ds, 0)
    data[cmd[9] + cmd[7] - 3] ^= 0xFF
    ds.store.put(key, bytes(data))
    _refused(ds, key, True)


@pytest.mark.parametrize("mode", [True, "auto"])
def test_a_page_that_does_not_decode_is_not_merged_with_other_files(mode: Any) -> None:
    ds = _dataset(WriteOptions(dictionary=False, compression="none"))
    key, data, cmd = _chunk(ds, 1)
    end = cmd[9] + cmd[7]
    data[end - 7 : end - 3] = struct.pack("<i", 10**6)  # the last string's length prefix
    ds.store.put(key, bytes(data))
    healthy = ds.read(columns=["s"], predicates=[[("id", ">=", 50)]])
    assert healthy.num_rows == 150  # the other files' rows read before the compaction
    # Before the fix: committed, and the merged chunk made all 200 rows of "s" unreadable.
    _refused(ds, key, mode)


@pytest.mark.parametrize("mode", [True, "auto"])
def test_a_string_that_is_not_utf8_stops_the_merge(mode: Any) -> None:
    """A string value turned into bytes that are not UTF-8 (no CRC, uncompressed: nothing
    else notices; hypothesis found it with one flipped bit). Before the fix its pages were
    concatenated with the other files' (``binary_copy=True``) and committed: the output,
    and so every healthy file's rows in it, failed the read path's UTF-8 check."""
    ds = _dataset(WriteOptions(dictionary=False, compression="none"))
    key, data, _ = _chunk(ds, 1)
    first = pq.read_table(pa.BufferReader(bytes(data)))["id"][0].as_py()
    at = data.index(f"v{first + 7}".encode())
    data[at + 1] = 0xFF  # "v57" -> b"v\xff7": a byte never valid in UTF-8
    ds.store.put(key, bytes(data))
    with pytest.raises(InvalidFormat, match="UTF-8"):
        ds.read()
    _refused(ds, key, mode)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    compression=st.sampled_from(["none", "snappy", "zstd", "gzip"]),
    crc=st.booleans(),
    mode=st.sampled_from([True, "auto"]),
    where=st.floats(0.0, 0.999),
    bit=st.integers(0, 7),
)
def test_one_flipped_bit_is_refused_or_changes_nothing_the_inputs_did_not(
    compression: str, crc: bool, mode: Any, where: float, bit: int
) -> None:
    """Oracle: the dataset read before the compaction. Either the compaction refuses with
    InvalidFormat naming the damaged file and commits nothing, or it commits an output
    whose rows are exactly what the inputs read as (dictionary-free inputs: every small
    row group's pages are concatenated with other files')."""
    opts = WriteOptions(
        dictionary=False, compression=compression, extra={"write_page_checksum": crc}
    )
    ds = _dataset(opts, files=3)
    key, data, _ = _chunk(ds, 0)
    meta = footer_from_bytes(bytes(data), key).metadata
    assert meta is not None
    chunks = [c[3] for g in meta[4] for c in g[1]]
    lo = min(c.get(11) or c[9] for c in chunks)
    hi = max(c[9] + c[7] for c in chunks)
    data[lo + int(where * (hi - lo))] ^= 1 << bit
    ds.store.put(key, bytes(data))
    try:
        before = _bag(ds.read())
    except InvalidFormat:
        before = None
    try:
        out = ds.compact(target_file_size=1 << 20, binary_copy=mode)
    except InvalidFormat as exc:
        refused: InvalidFormat | None = exc
    else:
        refused = None
    if refused is not None:
        assert refused.key == key
        assert Dataset.open(ds.store, "c").version == ds.version
        return
    assert before is not None, "a file that does not read was compacted"
    assert _bag(out.read()) == before


@pytest.mark.parametrize("compression", ["none", "snappy"])
def test_reading_a_page_failing_its_crc_raises_naming_the_file(compression: str) -> None:
    # pyarrow does not check CRCs unless asked: the damaged value was read silently.
    opts = WriteOptions(
        dictionary=False, compression=compression, extra={"write_page_checksum": True}
    )
    ds = _dataset(opts, files=2)
    key, data, cmd = _chunk(ds, 0)
    data[cmd[9] + cmd[7] - 3] ^= 0xFF
    ds.store.put(key, bytes(data))
    with pytest.raises(InvalidFormat, match="CRC") as info:
        Dataset.open(ds.store, "c").read()
    assert key in str(info.value)
