"""Test helpers shipped with the package, for parquetry's tests and its users' tests.

- :class:`CountingStore` counts requests and bytes by kind.
- :class:`FaultyStore` fails the Nth call, or every call of a kind, with a chosen error.
- :class:`LimitedStore` claims fewer capabilities than the store it wraps.
- :class:`parquetry.testing.conformance.StoreConformance` is the conformance suite every
  Store backend runs (a separate module: it imports pytest).
- :mod:`parquetry.testing.processes` runs store races across spawned processes.
"""

from parquetry.testing.stores import CountingStore, FaultyStore, InjectedFault, LimitedStore

__all__ = ["CountingStore", "FaultyStore", "InjectedFault", "LimitedStore"]
