"""Files kept / total for a read of the ``parquetry`` format, computed on the driver.

Spark (through 4.3) gives a Python data source no way to add text to ``explain()`` or to the
scan node (it prints ``BatchScan parquetry[...] (Python)`` and the read schema, nothing the
source returns), so the pruning numbers come from here: the same options, the same plan.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from parquetry.spark.options import SourceOptions

__all__ = ["ScanSummary", "scan_summary"]


@dataclass(frozen=True, slots=True)
class ScanSummary:
    """What a read with given options plans: files and bytes kept of the version's total."""

    dataset: str
    version: int
    files_kept: int
    files_total: int
    bytes_kept: int
    bytes_total: int
    pruned: dict[str, int]

    def __str__(self) -> str:
        pruned = ", ".join(f"{n} partitions by {why}" for why, n in sorted(self.pruned.items()))
        return (
            f"parquetry scan of {self.dataset!r} version {self.version}: "
            f"{self.files_kept} of {self.files_total} files kept "
            f"({self.bytes_kept:,} of {self.bytes_total:,} bytes)"
            + (f"; pruned {pruned}" if pruned else "")
        )


def scan_summary(options: Mapping[str, str]) -> ScanSummary:
    """Plan a read with the data source's ``options`` (as given to ``.options(...)``) and
    report files kept / total. ``version``/``versionAsOf``/``timestampAsOf`` are honoured.

    Raises:
        InvalidArgument: the options are invalid (as the data source would say), or they name
            a snapshot (a snapshot is read whole).
        DatasetNotFound: the dataset does not exist.
    """
    from parquetry.dataset import Dataset
    from parquetry.errors import InvalidArgument
    from parquetry.spark.source import _current_version

    parsed = SourceOptions.parse(options)
    if parsed.layout != "dataset":
        raise InvalidArgument("scan_summary needs layout=dataset: a snapshot is read whole")
    assert parsed.dataset is not None
    version = parsed.version if parsed.version is not None else _current_version(parsed)
    dataset = Dataset.open(parsed.open_store(), parsed.dataset, version=version)
    predicates = None
    if parsed.predicates is not None:
        predicates = [list(conj) for conj in parsed.predicates]
    kept = dataset.plan(predicates)
    total = dataset.plan(None) if predicates is not None else kept
    return ScanSummary(
        dataset=parsed.dataset,
        version=dataset.version,
        files_kept=len(kept.files),
        files_total=len(total.files),
        bytes_kept=sum(int(f.size or 0) for f in kept.files),
        bytes_total=sum(int(f.size or 0) for f in total.files),
        pruned=dict(kept.summary()["pruned"]),
    )
