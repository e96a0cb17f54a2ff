"""Version numbers and counts given by callers, checked once at the API's edge.

A string or float reached a format string or a comparison and raised a raw
ValueError/TypeError, and ``True`` silently opened version 1; numpy integers (a version
read from a DataFrame) are integers and accepted.
"""

from __future__ import annotations

import operator
from typing import Any

from parquetry.errors import InvalidArgument

__all__ = ["as_count", "as_integer", "as_version"]


def as_integer(value: Any) -> int | None:
    """``value`` if it is an integer (numpy's too; not a bool), else None."""
    if isinstance(value, bool):
        return None
    try:
        return operator.index(value)
    except TypeError:
        return None


def as_version(value: Any, name: str) -> int:
    """``value`` as a version number, or InvalidArgument naming ``name``."""
    number = as_integer(value)
    if number is None:
        raise InvalidArgument(f"{name} must be an integer version number, got {value!r}")
    return number


def as_count(value: Any, name: str) -> int:
    """``value`` as an integer >= 0, or InvalidArgument naming ``name``."""
    count = as_integer(value)
    if count is None or count < 0:
        raise InvalidArgument(f"{name} must be an integer >= 0, got {value!r}")
    return count
