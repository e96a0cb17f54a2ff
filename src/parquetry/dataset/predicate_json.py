"""The JSON form of kartothek DNF predicates: how a predicate travels as text (Spark's
``predicates`` option, ``parquetry scan --json``). Values JSON lacks are tagged:
``{"bytes": base64}``, ``{"decimal": "1.50"}``, ``{"datetime": iso}``, ``{"date": iso}``.
Part of :mod:`parquetry.dataset.predicates`, which re-exports these names.
"""

from __future__ import annotations

import base64
import datetime as dt
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

from parquetry.errors import PredicateError

__all__ = ["dnf_from_json", "dnf_to_json", "json_value", "value_from_json"]


def json_value(v: Any) -> Any:
    if isinstance(v, bool | int | float | str) or v is None:
        return v
    if isinstance(v, bytes):
        return {"bytes": base64.b64encode(v).decode("ascii")}
    if isinstance(v, Decimal):
        return {"decimal": str(v)}
    if isinstance(v, dt.datetime):
        return {"datetime": v.isoformat()}
    if isinstance(v, dt.date):
        return {"date": v.isoformat()}
    if isinstance(v, list | tuple):
        return [json_value(x) for x in v]
    raise PredicateError(f"predicate value {v!r} of type {type(v).__name__} is not supported")


def value_from_json(v: Any) -> Any:
    if isinstance(v, list):
        return [value_from_json(x) for x in v]
    if isinstance(v, dict):
        ((kind, text),) = v.items()
        decoders: dict[str, Callable[[str], Any]] = {
            "bytes": base64.b64decode,
            "decimal": Decimal,
            "datetime": dt.datetime.fromisoformat,
            "date": dt.date.fromisoformat,
        }
        return decoders[kind](text)
    return v


def dnf_to_json(predicates: Sequence[Sequence[Sequence[Any]]]) -> list[list[list[Any]]]:
    """Raw DNF predicates as JSON-able lists (typed values tagged: bytes, date, ...)."""
    return [[[t[0], t[1], json_value(t[2] if len(t) > 2 else None)] for t in c] for c in predicates]


def dnf_from_json(doc: Any) -> list[list[tuple[str, str, Any]]]:
    try:
        return [[(t[0], t[1], value_from_json(t[2])) for t in c] for c in doc]
    except (TypeError, IndexError, KeyError, ValueError) as exc:
        raise PredicateError(f"invalid predicates document: {exc}") from None
