"""Compaction decodes its inputs' footers through templates (``footer_memo``): the same
footers as the Thrift reader's, and the same ``pyarrow_hazard`` verdicts."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from parquetry.dataset import Dataset
from parquetry.parquet.footer import RawFooter, footer_from_bytes
from parquetry.parquet.footer_check import pyarrow_hazard
from parquetry.parquet.footer_memo import FooterMemo
from parquetry.store import MemoryStore


def _appended(n: int) -> Dataset:
    def rows(k: int) -> pa.Table:
        rng = np.random.default_rng(k)
        return pa.table(
            {
                "p": pa.array([k % 2] * 40, pa.int64()),
                "id": pa.array(np.arange(40 * k, 40 * k + 40), pa.int64()),
                "v": pa.array(rng.random(40)),
                "s": pa.array(["a", "b", "c", "d"]).take(pa.array(rng.integers(0, 4, 40))),
            }
        )

    ds = Dataset.create(MemoryStore(), "m", rows(0), partition_on=["p"])
    for k in range(1, n):
        ds = ds.append(rows(k))
    return ds


@pytest.mark.parametrize("binary_copy", ["auto", True])
def test_every_footer_a_compaction_decodes_equals_the_thrift_readers(
    monkeypatch: pytest.MonkeyPatch, binary_copy: Any
) -> None:
    """Oracle: ``footer_from_bytes`` on the same bytes, checked inside a real compaction
    (so the memo is what the compaction uses, and it is used)."""
    ds = _appended(12)
    before = ds.read().sort_by("id")
    hits: list[bool] = []
    original = FooterMemo.checked_footer

    def checked(self: FooterMemo, data: bytes, name: str) -> tuple[RawFooter, str | None]:
        was = self.hits
        got, verdict = original(self, data, name)
        expected = footer_from_bytes(data, name)
        assert verdict == pyarrow_hazard(expected)  # the template's verdict, when reused
        assert (got.metadata, got.tail, got.footer_length, got.dropped_fields) == (
            expected.metadata,
            expected.tail,
            expected.footer_length,
            expected.dropped_fields,
        )
        hits.append(self.hits > was)
        return got, verdict

    monkeypatch.setattr(FooterMemo, "checked_footer", checked)
    out = ds.compact(target_file_size=1 << 20, binary_copy=binary_copy)
    assert out.read().sort_by("id").equals(before)
    assert len(out.plan().files) == 2
    assert len(hits) == 12
    assert sum(hits) >= 6  # files written alike: most footers came from a template
