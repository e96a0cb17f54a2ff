"""Helpers shared by the snapshot tests (imported by module name; no package)."""

from __future__ import annotations

from parquetry.store import Store


def keys_under(store: Store, prefix: str) -> list[str]:
    """Every object key under ``prefix``, sorted."""
    return sorted(meta.key for meta in store.list(prefix))
