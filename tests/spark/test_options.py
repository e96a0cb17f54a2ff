"""Data source options parse once, round-trip, and name the bad option; task grouping."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

from parquetry.dataset.predicates import dnf_to_json
from parquetry.errors import InvalidArgument
from parquetry.spark.options import SourceOptions
from parquetry.spark.reader import group_by_size

_names = hs.lists(hs.from_regex(r"[a-z][a-z0-9_]{0,6}", fullmatch=True), max_size=3, unique=True)


@settings(max_examples=60, deadline=None)
@given(
    layout=hs.sampled_from(["dataset", "snapshot"]),
    partition_on=_names,
    indices=_names,
    version=hs.none() | hs.integers(0, 10**6),
    endpoint=hs.none() | hs.just("http://127.0.0.1:9000"),
    extra=hs.dictionaries(hs.sampled_from(["virtual_hosted_style_request", "token"]), hs.text(
        alphabet="abc123", min_size=1, max_size=5), max_size=2),
)  # fmt: skip
def test_options_round_trip(
    layout: str,
    partition_on: list[str],
    indices: list[str],
    version: int | None,
    endpoint: str | None,
    extra: dict[str, str],
) -> None:
    raw = {
        "store": "s3://bucket/lake",
        "LAYOUT": layout,
        "dataset": "orders",
        "key": "snap/a",
        "partition_on": " , ".join(partition_on),
        "secondary_indices": ",".join(indices),
    }
    if version is not None and layout == "dataset":  # a snapshot has no versions: refused
        raw["version"] = str(version)
    if endpoint:
        raw["endpoint"] = endpoint
    raw.update({f"store.{k}": v for k, v in extra.items()})
    parsed = SourceOptions.parse(raw)
    assert parsed.partition_on == tuple(partition_on)
    assert parsed.secondary_indices == tuple(indices)
    assert parsed.version == (version if layout == "dataset" else None)
    assert parsed.store_options == ({"endpoint": endpoint} if endpoint else {}) | extra
    assert SourceOptions.parse(parsed.to_spark()) == parsed


@pytest.mark.parametrize(
    ("raw", "named"),
    [
        ({"dataset": "x"}, "'store'"),
        ({"store": "memory://a"}, "'dataset'"),
        ({"store": "memory://a", "layout": "snapshot"}, "'key'"),
        ({"store": "memory://a", "dataset": "x", "layout": "delta"}, "'layout'"),
        ({"store": "memory://a", "dataset": "x", "version": "latest"}, "'version'"),
        ({"store": "memory://a", "dataset": "x", "pushdown": "maybe"}, "'pushdown'"),
        ({"store": "memory://a", "dataset": "x", "predicates": "[[["}, "'predicates'"),
        ({"store": "memory://a", "dataset": "x", "predicates": "[]"}, "'predicates'"),
        ({"store": "memory://a", "dataset": "x", "predicates": '[[["a", "=="]]]'}, "'predicates'"),
        (
            {"store": "memory://a", "layout": "snapshot", "key": "k", "predicates": '[[["a"]]]'},
            "'predicates'",
        ),
    ],
)
def test_bad_options_name_the_option(raw: dict[str, str], named: str) -> None:
    with pytest.raises(InvalidArgument, match=named):
        SourceOptions.parse(raw)


_VALUES = (
    hs.integers(-(10**12), 10**12)
    | hs.text(max_size=5)
    | hs.dates()
    | hs.datetimes()
    | hs.binary(max_size=4)
    | hs.decimals(allow_nan=False, allow_infinity=False, places=3)
)
_TERMS = hs.tuples(
    hs.sampled_from(["a", "b"]), hs.sampled_from(["==", "<", ">=", "!="]), _VALUES
) | hs.tuples(hs.sampled_from(["a", "b"]), hs.just("in"), hs.lists(_VALUES, min_size=1, max_size=3))


@settings(max_examples=60, deadline=None)
@given(hs.lists(hs.lists(_TERMS, min_size=1, max_size=3), min_size=1, max_size=3))
def test_predicates_option_round_trips_typed_values(
    predicates: list[list[tuple[str, str, Any]]],
) -> None:
    raw = json.dumps(dnf_to_json(predicates))
    parsed = SourceOptions.parse({"store": "memory://a", "dataset": "x", "predicates": raw})
    assert parsed.predicates is not None
    back = [
        [(c, op, list(v) if op == "in" else v) for c, op, v in conj] for conj in parsed.predicates
    ]
    assert back == [
        [(c, op, list(v) if op == "in" else v) for c, op, v in conj] for conj in predicates
    ]
    assert SourceOptions.parse(parsed.to_spark()) == parsed


@settings(max_examples=80, deadline=None)
@given(hs.lists(hs.integers(1, 10**9), max_size=60), hs.integers(1, 8))
def test_grouping_keeps_every_file_once_in_at_most_n_balanced_tasks(
    sizes: list[int], tasks: int
) -> None:
    groups = group_by_size(sizes, tasks)
    assert sorted(i for g in groups for i in g) == list(range(len(sizes)))
    assert len(groups) <= tasks
    assert all(g == sorted(g) and g for g in groups)
    if groups:
        loads = [sum(sizes[i] for i in g) for g in groups]
        # LPT bound: no task exceeds the average by more than the largest file.
        assert max(loads) <= sum(sizes) / len(groups) + max(sizes)
