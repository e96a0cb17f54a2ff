"""Data source options parse once, round-trip, and name the bad option; task grouping."""

from __future__ import annotations

import datetime
import json
from dataclasses import fields
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

from parquetry.dataset.predicates import dnf_to_json
from parquetry.errors import InvalidArgument
from parquetry.spark.option_names import SPARK_KEYS, camel_case, field_option_names, known_names
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


# --- known option names, "did you mean", the path form, time travel (issue 12 §3) ---------

_KNOWN = known_names(SourceOptions, SPARK_KEYS)


def _base(**extra: str) -> dict[str, str]:
    return {"store": "memory://a", "dataset": "x", **extra}


@settings(max_examples=100, deadline=None)
@given(name=hs.sampled_from(sorted(_KNOWN)), flips=hs.lists(hs.booleans(), min_size=30))
def test_every_known_name_is_accepted_in_any_case(name: str, flips: list[bool]) -> None:
    """Spark lower-cases keys, users write camelCase: any casing of a known key parses."""
    cased = "".join(c.upper() if flip else c for c, flip in zip(name, flips, strict=False))
    cased += name[len(flips) :]
    raw = _base()
    field_of = {n.lower(): f.name for f in fields(SourceOptions) for n in field_option_names(f)}
    values = {
        "store_url": "memory://a",
        "store_options": "v",
        "layout": "dataset",
        "dataset": "x",
        "version": "3",
        "timestamp_as_of": "2026-11-24",
        "predicates": '[[["a", "==", 1]]]',
        "pushdown": "auto",
        "task_bytes": "3",
        "max_tasks": "3",
        "rows_per_file": "3",
        "merge_schema": "true",
        "overwrite_schema": "false",
        "replace_where": "a = 1",
        "partition_overwrite_mode": "dynamic",
        "save_mode": "ignore",
        "columns": "a",
        "parameters": '{"k": "v"}',
        "txn_version": "3",
        "auto_compact": "3",
    }
    by_key = {"path": "memory://a/x", "paths": '["a", "b"]'}
    # txnAppId and txnVersion go together: the other one is given too.
    partner = {"txn_app_id": ("txnVersion", "3"), "txn_version": ("txnAppId", "app")}
    if field_of.get(name) in partner:
        raw.setdefault(*partner[field_of[name]])
    raw[cased] = by_key.get(name) or values.get(field_of.get(name, ""), "v")
    if name == "paths":
        with pytest.raises(InvalidArgument, match="several paths"):
            SourceOptions.parse(raw)
        return
    SourceOptions.parse(raw)


@settings(max_examples=100, deadline=None)
@given(
    name=hs.sampled_from(sorted(n for n in _KNOWN if len(n) >= 8)),
    where=hs.integers(0, 100),
    edit=hs.sampled_from(["drop", "swap", "double"]),
)
def test_a_typo_of_a_known_name_is_refused_with_a_suggestion(
    name: str, where: int, edit: str
) -> None:
    """One dropped, swapped or doubled letter in a long name: refused, never ignored, and the
    suggestion is a known option that sets the same field as the name meant."""
    i = where % (len(name) - 1)
    if edit == "drop":
        typo = name[:i] + name[i + 1 :]
    elif edit == "swap":
        typo = name[:i] + name[i + 1] + name[i] + name[i + 2 :]
    else:
        typo = name[:i] + name[i] + name[i:]
    if typo in _KNOWN:  # e.g. swapping two equal letters
        return
    with pytest.raises(InvalidArgument) as info:
        SourceOptions.parse(_base(**{typo: "1"}))
    message = str(info.value)
    assert message.startswith(f"unknown option {typo!r} for format parquetry; did you mean ")
    suggested = message.split("did you mean ")[1].rstrip("?").strip("'")
    assert suggested.lower() in _KNOWN


def test_unknown_option_messages() -> None:
    with pytest.raises(InvalidArgument) as info:
        SourceOptions.parse(_base(partiton_on="a"))
    assert str(info.value) == (
        "unknown option 'partiton_on' for format parquetry; did you mean 'partition_on'?"
    )
    with pytest.raises(InvalidArgument) as info:
        SourceOptions.parse(_base(timestampasoff="2026-01-01"))
    assert str(info.value).endswith("did you mean 'timestampAsOf'?")
    with pytest.raises(InvalidArgument) as info:
        SourceOptions.parse(_base(colour="red"))
    assert str(info.value).startswith(
        "unknown option 'colour' for format parquetry; known options: access_key_id, "
        "auto_compact, checkpointLocation, columns,"
    )
    assert str(info.value).endswith("versionAsOf, store.<name>")
    # store.<anything> reaches the store; a bare "store." is not an option
    assert SourceOptions.parse(_base(**{"store.token": "t"})).store_options == {"token": "t"}
    with pytest.raises(InvalidArgument, match=r"unknown option 'store\.'"):
        SourceOptions.parse(_base(**{"store.": "t"}))
    # the camelCase spelling of a field sets it (it used to be ignored silently)
    parsed = SourceOptions.parse(_base(partitionOn="a,b", secondaryIndices="c", maxTasks="2"))
    assert (parsed.partition_on, parsed.secondary_indices, parsed.max_tasks) == (
        ("a", "b"),
        ("c",),
        2,
    )
    with pytest.raises(InvalidArgument, match="disagree"):
        SourceOptions.parse(_base(partition_on="a", partitionOn="b"))


def test_field_option_names_follow_the_dataclass() -> None:
    """A field added to SourceOptions is a known option under its name and camelCase."""
    from dataclasses import dataclass, field

    @dataclass
    class More:
        merge_schema: bool = False
        partition_overwrite_mode: str = "static"
        replace_where: str | None = field(default=None, metadata={"options": ("replaceWhere",)})

    names = known_names(More, ())
    assert names == {
        "merge_schema": "merge_schema",
        "mergeschema": "merge_schema",
        "partition_overwrite_mode": "partition_overwrite_mode",
        "partitionoverwritemode": "partition_overwrite_mode",
        "replacewhere": "replaceWhere",
    }
    assert camel_case("partition_overwrite_mode") == "partitionOverwriteMode"
    assert next(field_option_names(f) for f in fields(More)) == ("merge_schema", "mergeSchema")


@pytest.mark.parametrize(
    ("raw", "store", "name"),
    [
        ({"path": "file:///tmp/lake/orders"}, "file:///tmp/lake", "orders"),
        ({"path": "file:///tmp/lake/orders/"}, "file:///tmp/lake", "orders"),
        ({"path": "s3://bucket/prefix/orders"}, "s3://bucket/prefix", "orders"),
        ({"path": "s3://bucket/orders", "dataset": "orders"}, "s3://bucket", "orders"),
        ({"path": "memory://m/orders"}, "memory://m", "orders"),
        ({"path": "orders", "store": "memory://m"}, "memory://m", "orders"),
        ({"path": "memory://m/orders", "store": "memory://m/"}, "memory://m", "orders"),
        (
            {"path": "s3://b/lake/daily/sum", "layout": "snapshot", "store": "s3://b/lake"},
            "s3://b/lake",
            "daily/sum",
        ),
        (
            {"path": "s3://b/lake/daily/sum", "layout": "snapshot", "key": "daily/sum"},
            "s3://b/lake",
            "daily/sum",
        ),
        ({"path": "s3://b/lake/daily/sum", "layout": "snapshot"}, "s3://b/lake/daily", "sum"),
    ],
)
def test_path_names_store_and_dataset(raw: dict[str, str], store: str, name: str) -> None:
    parsed = SourceOptions.parse(raw)
    assert parsed.store_url == store
    assert (parsed.key if parsed.layout == "snapshot" else parsed.dataset) == name
    assert SourceOptions.parse(parsed.to_spark()) == parsed


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"path": "file:///orders"}, "path 'file:///orders' names no store before the dataset"),
        ({"path": "orders"}, "path 'orders' has no store URL: give option 'store'"),
        (
            {"path": "memory://m/orders", "dataset": "other"},
            "path 'memory://m/orders' does not end with option 'dataset' 'other'",
        ),
        (
            {"path": "memory://m/orders", "store": "memory://n"},
            "path 'memory://m/orders' is not inside option 'store' 'memory://n'",
        ),
        (
            {"path": "orders", "store": "memory://m", "dataset": "other"},
            "path 'orders' names dataset 'orders' but option 'dataset' is 'other'",
        ),
        ({"dataset": "x", "uuid": "y", "store": "memory://m"}, "options ['dataset', 'uuid']"),
        (
            {"paths": '["a","b"]', "store": "memory://m"},
            'format parquetry reads one dataset: load() got several paths ["a","b"]',
        ),
        ({}, "option 'store' (a store URL such as file:///lake) or a path"),
    ],
)
def test_path_and_options_that_disagree(raw: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidArgument) as info:
        SourceOptions.parse(raw)
    assert str(info.value).startswith(message)


def test_version_as_of_and_timestamp_as_of() -> None:
    utc = datetime.UTC
    assert SourceOptions.parse(_base(versionAsOf="4")).version == 4
    assert SourceOptions.parse(_base(versionasof="4", version="4")).version == 4
    cases = {
        "2026-11-24": datetime.datetime(2026, 11, 24, tzinfo=utc),
        "2026-11-24T08:30:00Z": datetime.datetime(2026, 11, 24, 8, 30, tzinfo=utc),
        "2026-11-24 08:30:00.250": datetime.datetime(2026, 11, 24, 8, 30, 0, 250000, tzinfo=utc),
        "2026-11-24T10:30:00+02:00": datetime.datetime(2026, 11, 24, 8, 30, tzinfo=utc),
    }
    for raw, expected in cases.items():
        parsed = SourceOptions.parse(_base(timestampAsOf=raw))
        assert parsed.timestamp_as_of == expected
        assert SourceOptions.parse(parsed.to_spark()) == parsed
    bad = [
        (_base(version="1", versionAsOf="2"), "disagree"),
        (_base(version="-1"), "must be 0 or more"),
        (_base(versionAsOf="one"), "must be an integer"),
        (_base(timestampAsOf="2026-13-01"), "option 'timestampAsOf' must be an ISO"),
        (_base(timestampAsOf="2026-11-24", versionAsOf="1"), "exclude each other"),
        (
            {"store": "memory://a", "layout": "snapshot", "key": "k", "versionAsOf": "1"},
            "need layout=dataset",
        ),
    ]
    for raw, message in bad:
        with pytest.raises(InvalidArgument, match=message):
            SourceOptions.parse(raw)


def test_txn_and_streaming_options() -> None:
    parsed = SourceOptions.parse(_base(txnappid="job", txnversion="0", autocompact="5"))
    assert parsed.txn == ("job", 0)
    assert parsed.auto_compact == 5
    assert SourceOptions.parse(parsed.to_spark()) == parsed
    assert SourceOptions.parse(_base()).txn is None
    for bad in [{"txnappid": "job"}, {"txnversion": "1"}, {"txnappid": "j", "txnversion": "-1"}]:
        with pytest.raises(InvalidArgument, match="txnAppId"):
            SourceOptions.parse(_base(**bad))
    with pytest.raises(InvalidArgument, match="autoCompact"):
        SourceOptions.parse(_base(autocompact="0"))
    # Spark's own streaming options reach the sink and are accepted.
    opts = SourceOptions.parse(_base(checkpointlocation="/tmp/c", queryname="q"))
    assert (opts.checkpoint_location, opts.query_name) == ("/tmp/c", "q")
