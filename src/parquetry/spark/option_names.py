"""Which option keys the ``parquetry`` format knows, "did you mean", and the path form.

Spark lower-cases every option key before a Python data source sees it, so a key is matched
case-insensitively against each :class:`~parquetry.spark.options.SourceOptions` field's names:
the field name itself, its camelCase spelling (Delta's style: ``merge_schema`` →
``mergeSchema``), and any extra names the field declares in its metadata (``options=(...)``).
A field added to ``SourceOptions`` is therefore a known option without further code here.
"""

from __future__ import annotations

import datetime
import difflib
from collections.abc import Iterable, Mapping
from dataclasses import Field, fields
from typing import Any

from parquetry.errors import InvalidArgument

__all__ = [
    "SPARK_KEYS",
    "camel_case",
    "check_known",
    "field_option_names",
    "parse_timestamp",
    "split_path",
]

# Keys Spark itself puts into the options map: load(path)/save(path)/LOCATION give "path",
# load(p1, p2, ...) gives "paths" (a JSON list).
SPARK_KEYS = ("path", "paths")


def camel_case(name: str) -> str:
    """``partition_overwrite_mode`` → ``partitionOverwriteMode``."""
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def field_option_names(f: Field[Any]) -> tuple[str, ...]:
    """The option keys that set field ``f``, as spelled in docs and messages: metadata
    ``options`` when declared (an empty tuple: no key of its own), else the field name and its
    camelCase spelling. Keys match case-insensitively."""
    declared = f.metadata.get("options")
    names = declared if declared is not None else (f.name, camel_case(f.name))
    return tuple(dict.fromkeys(str(n) for n in names))


def known_names(cls: type, extra: Iterable[str]) -> dict[str, str]:
    """Every option key a dataclass of options accepts: lower-case key → the spelling shown in
    messages (a declared key as declared; the camelCase spelling of an undeclared field shows
    as the field name, the documented one)."""
    names: dict[str, str] = {}
    for f in fields(cls):
        declared = f.metadata.get("options") is not None
        for name in field_option_names(f):
            names.setdefault(name.lower(), name if declared else f.name)
    for name in extra:
        names.setdefault(name.lower(), name)
    return names


def check_known(
    options: Mapping[str, str], known: Mapping[str, str], prefixes: Iterable[str] = ()
) -> None:
    """Refuse the first key that is neither known (lower-case keys of ``known``) nor under one
    of ``prefixes``.

    Raises:
        InvalidArgument: naming the key and, when one is close, the option meant.
    """
    prefixes = tuple(prefixes)
    for key in options:
        lowered = key.lower()
        under_prefix = any(lowered.startswith(p) and lowered != p for p in prefixes)
        if lowered in known or under_prefix:
            continue
        raise InvalidArgument(unknown_message(key, known))


def unknown_message(key: str, known: Mapping[str, str]) -> str:
    """``unknown option 'partiton_on' for format parquetry; did you mean 'partition_on'?``"""
    message = f"unknown option {key!r} for format parquetry"
    close = difflib.get_close_matches(key.lower(), list(known), n=1, cutoff=0.75)
    if close:
        return f"{message}; did you mean {known[close[0]]!r}?"
    shown = sorted(dict.fromkeys(known.values()), key=str.lower)
    return f"{message}; known options: {', '.join(shown)}, store.<name>"


def split_path(path: str, name: str | None, store: str | None, what: str) -> tuple[str, str]:
    """(store URL, name) from Spark's ``path`` option (``load(path)``/``save(path)``).

    The rule (docs/spark.md "Paths"):

    - a path without ``://`` is the dataset name (``what``) inside option ``store``;
    - with option ``store``, the path is ``<store>/<name>`` (the name may contain ``/``);
    - otherwise, with option ``dataset``/``key`` = ``name``, the path ends with ``/<name>``
      and the rest is the store;
    - otherwise the last path segment is the name and the rest is the store.

    Options given beside a path must agree with it.

    Raises:
        InvalidArgument: the path and the options disagree, or the path names no store.
    """
    trimmed = path.rstrip("/")
    if trimmed.startswith("file:/") and not trimmed.startswith("file://"):
        # Spark stores a table LOCATION file:///lake/orders as file:/lake/orders.
        trimmed = "file:///" + trimmed[len("file:/") :]
    if "://" not in trimmed:
        if not store:
            raise InvalidArgument(
                f"path {path!r} has no store URL: give option 'store' or a path such as "
                f"file:///lake/{trimmed or 'orders'}"
            )
        relative = trimmed.lstrip("/")
        if name is not None and name != relative:
            raise InvalidArgument(
                f"path {path!r} names {what} {relative!r} but option {what!r} is {name!r}"
            )
        return store, relative
    if store:
        base = store.rstrip("/")
        if not trimmed.startswith(base + "/") or len(trimmed) == len(base) + 1:
            raise InvalidArgument(
                f"path {path!r} is not inside option 'store' {store!r}: give "
                f"'<store>/<{what}>' or only one of them"
            )
        inner = trimmed[len(base) + 1 :]
        if name is not None and name != inner:
            raise InvalidArgument(
                f"path {path!r} names {what} {inner!r} but option {what!r} is {name!r}"
            )
        return base, inner
    if name is not None:
        if not trimmed.endswith("/" + name):
            raise InvalidArgument(
                f"path {path!r} does not end with option {what!r} {name!r}: give "
                f"'<store>/<{what}>' or only one of them"
            )
        prefix = trimmed[: -len(name) - 1]
    else:
        prefix, _, name = trimmed.rpartition("/")
    if prefix.endswith(":/") or prefix.endswith("://") or not name:
        raise InvalidArgument(
            f"path {path!r} names no store before the {what}: give '<store URL>/<{what}>' "
            f"such as file:///lake/orders"
        )
    return prefix, name


def parse_timestamp(raw: str) -> datetime.datetime:
    """Option ``timestampAsOf``: an ISO timestamp (naive = UTC) or a date (its midnight, UTC).

    Raises:
        InvalidArgument: naming the option and the value.
    """
    text = raw.strip()
    try:
        if len(text) == 10:
            day = datetime.date.fromisoformat(text)
            value = datetime.datetime(day.year, day.month, day.day)
        else:
            value = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidArgument(
            f"option 'timestampAsOf' must be an ISO timestamp or date such as "
            f"2026-11-24T08:00:00Z or 2026-11-24, got {raw!r}"
        ) from None
    if value.tzinfo is None:
        value = value.replace(tzinfo=datetime.UTC)
    return value.astimezone(datetime.UTC)
