"""What a log or traceback could show about an error: the text secret checks search."""

from __future__ import annotations

import traceback


def all_text(err: BaseException) -> str:
    """Everything a log or traceback could show about an error, chained ones included."""
    parts = ["".join(traceback.format_exception(err))]
    seen: BaseException | None = err
    while seen is not None:
        parts += [str(seen), repr(seen), repr(seen.args), repr(getattr(seen, "__dict__", {}))]
        seen = seen.__cause__ or seen.__context__
    return "\n".join(parts)
