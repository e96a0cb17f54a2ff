"""A store wrapper that SIGKILLs its own process at the K-th mutating request.

Mutating requests are ``put``, ``delete``, ``copy`` and ``move`` (``delete_many`` is one
``delete`` per key through the wrapper). The process dies right *before* the K-th one is
sent, or right *after* it succeeded and before the caller sees the result: the two moments
a crash can split a protocol at. With ``trace``, every mutating request is first logged
(``n kind key`` per line), which is how a sweep learns how many requests an operation makes.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from parquetry.store import ObjectMeta, PutMode, Store, WrapperStore

__all__ = ["KillSwitch", "KillSwitchStore", "read_trace"]


class KillSwitch:
    """Counts mutating requests across every store wrapped with it; kills at ``kill_at``."""

    def __init__(self, *, kill_at: int | None = None, when: str = "before", trace: Path | None):
        if when not in ("before", "after"):
            raise ValueError(f"when must be 'before' or 'after', got {when!r}")
        self.kill_at = kill_at
        self.when = when
        self.calls = 0
        self._lock = threading.Lock()
        self._trace_fd = (
            os.open(trace, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644) if trace else None
        )

    def wrap(self, store: Store) -> KillSwitchStore:
        return KillSwitchStore(store, self)

    def mutate(self, kind: str, key: str, perform: Callable[[], Any]) -> Any:
        with self._lock:
            self.calls += 1
            n = self.calls
        if self._trace_fd is not None:
            os.write(self._trace_fd, f"{n} {kind} {key}\n".encode())
        fire = n == self.kill_at
        if fire and self.when == "before":
            os.kill(os.getpid(), signal.SIGKILL)
        result = perform()
        if fire:
            os.kill(os.getpid(), signal.SIGKILL)
        return result


class KillSwitchStore(WrapperStore):
    """A store whose mutating requests go through ``switch`` (which may kill the process)."""

    def __init__(self, inner: Store, switch: KillSwitch):
        super().__init__(inner)
        self.switch = switch

    def _mutate(self, kind: str, key: str, perform: Callable[[], Any]) -> Any:
        return self.switch.mutate(kind, key, perform)

    def _put(
        self, key: str, data: bytes | memoryview, mode: PutMode, expected_version: str | None
    ) -> ObjectMeta:
        return self._mutate(  # type: ignore[no-any-return]
            "put", key, lambda: self.inner._put(key, data, mode, expected_version)
        )

    def _delete(self, key: str, missing_ok: bool) -> None:
        self._mutate("delete", key, lambda: self.inner._delete(key, missing_ok))

    def _copy(self, src: str, dst: str) -> None:
        self._mutate("copy", dst, lambda: self.inner._copy(src, dst))

    def _move(self, src: str, dst: str) -> None:
        self._mutate("move", dst, lambda: self.inner._move(src, dst))

    def __getstate__(self) -> dict[str, Any]:
        raise TypeError("KillSwitchStore stays in the process it may kill")


def read_trace(path: Path) -> list[tuple[str, str]]:
    """The mutating requests a traced run made, in order: ``(kind, key)``."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        parts = line.split(" ", 2)
        if len(parts) == 3:
            out.append((parts[1], parts[2]))
    return out
