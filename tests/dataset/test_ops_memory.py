"""delete_where / update_where stream file by file: they complete under an address-space
limit far below the dataset's decoded size (the engine's stated bound: a few times one
file). Before the engine, a row-level delete (``replace_where``) concatenated every kept
row and fails under the same limit."""

from __future__ import annotations

from pathlib import Path

from .ops_memory import ROW_BYTES, big_dataset, run_limited

FILES = 12
ROWS = 1_250_000  # per file: 30 MB decoded; the dataset: 360 MB
HEADROOM = 150 << 20


def test_delete_and_update_complete_under_an_address_space_limit(tmp_path: Path) -> None:
    big_dataset(tmp_path, FILES, ROWS)
    assert FILES * ROWS * ROW_BYTES > 2 * HEADROOM
    code = """
    out = ds.delete_where([[("v", "==", 7)]])
    out = out.update_where([[("part", ">=", 6), ("v", ">=", 990)]], set={"k": -1})
    history = out.history(limit=2)
    report(version=out.version, metrics=[dict(h.metrics) for h in history])
    """
    got = run_limited(tmp_path, code, HEADROOM)
    assert "failed" not in got, got
    assert got["version"] == 2
    update, delete = got["metrics"]
    assert delete["rows_deleted"] == FILES * ROWS // 1000
    assert delete["files_rewritten"] == FILES
    assert update["rows_updated"] == (FILES - 6) * ROWS // 100
    assert got["peak_growth"] < HEADROOM
