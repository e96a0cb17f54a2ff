"""Planning a compaction: which small files of each partition become which output files.

Pure over the version document (one HEAD per file only for files whose size the document
does not record, i.e. files kartothek wrote). Per partition, the files smaller than the
target are bin-packed first-fit-decreasing into bins of at most the target size; a bin that
would hold a single file is dropped (rewriting one file gains nothing), and so is a
partition with fewer than ``min_files`` small files. Files at or above the target are never
touched. Each bin becomes one output file of about the sum of its inputs' sizes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from parquetry.dataset.plan import PlannedFile
from parquetry.dataset.predicates import validate_predicates
from parquetry.errors import InvalidArgument, PredicateError

if TYPE_CHECKING:
    from parquetry.dataset.dataset import Dataset

__all__ = ["CompactionBin", "CompactionPlan", "DEFAULT_TARGET_SIZE", "pack", "plan_compaction"]

DEFAULT_TARGET_SIZE = 128 << 20
#: Smallest target accepted: below it a "compaction" would only churn files.
MIN_TARGET_SIZE = 1 << 10


@dataclass(frozen=True, slots=True)
class CompactionBin:
    """Input files of one partition that become one output file."""

    partition: tuple[tuple[str, Any], ...]
    files: tuple[PlannedFile, ...]

    @property
    def bytes(self) -> int:
        return sum(f.size or 0 for f in self.files)

    @property
    def rows(self) -> int | None:
        counts = [f.rows for f in self.files]
        return None if any(c is None for c in counts) else sum(c for c in counts if c)


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionPlan:
    """What a compaction of one version would do (``compact(dry_run=True)``)."""

    version: int
    target_file_size: int
    bins: tuple[CompactionBin, ...]
    #: Files the compaction considered (in the selected partitions) and their bytes.
    files_considered: int
    bytes_considered: int

    @property
    def files_removed(self) -> int:
        return sum(len(b.files) for b in self.bins)

    @property
    def files_added(self) -> int:
        return len(self.bins)

    @property
    def bytes_compacted(self) -> int:
        return sum(b.bytes for b in self.bins)

    @property
    def files_after(self) -> int:
        """Files of the considered partitions after the compaction."""
        return self.files_considered - self.files_removed + self.files_added

    @property
    def labels(self) -> frozenset[str]:
        return frozenset(f.label for b in self.bins for f in b.files)

    def summary(self) -> dict[str, int]:
        return {
            "files_before": self.files_considered,
            "files_after": self.files_after,
            "files_compacted": self.files_removed,
            "files_added": self.files_added,
            "bytes_compacted": self.bytes_compacted,
            "partitions": len({b.partition for b in self.bins}),
        }


def pack(sizes: Sequence[int], target: int) -> list[list[int]]:
    """First-fit-decreasing bins (as index lists into ``sizes``) of at most ``target`` bytes
    each, only of sizes below ``target``; bins of a single file are left out."""
    order = sorted((i for i, s in enumerate(sizes) if s < target), key=lambda i: -sizes[i])
    bins: list[list[int]] = []
    room: list[int] = []
    for i in order:
        for b, free in enumerate(room):
            if sizes[i] <= free:
                bins[b].append(i)
                room[b] -= sizes[i]
                break
        else:
            bins.append([i])
            room.append(target - sizes[i])
    return [sorted(b) for b in bins if len(b) > 1]


def check_target(target_file_size: int) -> int:
    if isinstance(target_file_size, bool) or not isinstance(target_file_size, int):
        raise InvalidArgument(f"target_file_size must be an integer, got {target_file_size!r}")
    if target_file_size < MIN_TARGET_SIZE:
        raise InvalidArgument(
            f"target_file_size must be at least {MIN_TARGET_SIZE} bytes, got {target_file_size}"
        )
    return target_file_size


def _partition_predicates(ds: Dataset, partitions: Any) -> Any:
    """``partitions`` validated: a DNF over partition keys only (a compaction selects whole
    partitions; a predicate on another column would select rows, which it cannot)."""
    dnf = validate_predicates(partitions, ds.schema)
    for conj in dnf or ():
        for lit in conj:
            if lit.column not in ds.partition_keys:
                raise PredicateError(
                    f"compact(partitions=...) selects partitions: column {lit.column!r} is not "
                    f"a partition key of dataset {ds.uuid!r} {list(ds.partition_keys)}",
                    column=lit.column,
                    op=lit.op,
                )
    return partitions if dnf else None


def _sized(ds: Dataset, files: Sequence[PlannedFile]) -> list[PlannedFile]:
    """Files with their sizes (a HEAD for those the document does not record)."""
    from dataclasses import replace

    unknown = [f for f in files if f.size is None]
    if not unknown:
        return list(files)
    sizes = dict(
        zip(
            unknown,
            ds.store.map_concurrent(lambda f: ds.store.head(f.key).size, unknown),
            strict=True,
        )
    )
    return [replace(f, size=sizes[f]) if f.size is None else f for f in files]


def plan_compaction(
    ds: Dataset,
    *,
    target_file_size: int = DEFAULT_TARGET_SIZE,
    partitions: Any = None,
    min_files: int = 2,
) -> CompactionPlan:
    """The bins a compaction of ``ds`` writes (see the module doc); reads no data."""
    target = check_target(target_file_size)
    if isinstance(min_files, bool) or not isinstance(min_files, int) or min_files < 2:
        raise InvalidArgument(f"min_files must be an integer >= 2, got {min_files!r}")
    files = _sized(ds, ds.plan(_partition_predicates(ds, partitions)).files)
    groups: dict[tuple[tuple[str, Any], ...], list[PlannedFile]] = {}
    for f in files:
        groups.setdefault(f.partition, []).append(f)
    bins: list[CompactionBin] = []
    for partition, members in groups.items():
        members.sort(key=lambda f: f.label)
        sizes = [f.size or 0 for f in members]
        if sum(1 for s in sizes if s < target) < min_files:
            continue
        for idx in pack(sizes, target):
            bins.append(CompactionBin(partition, tuple(members[i] for i in idx)))
    return CompactionPlan(
        version=ds.version,
        target_file_size=target,
        bins=tuple(bins),
        files_considered=len(files),
        bytes_considered=sum(f.size or 0 for f in files),
    )
