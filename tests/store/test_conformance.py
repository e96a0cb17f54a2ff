"""Every backend and wrapper runs the one conformance suite."""

from __future__ import annotations

from pathlib import Path

import pytest

from parquetry.store import LocalStore, MemoryStore, ReadOnlyStore, Store, open_store
from parquetry.testing import CountingStore, FaultyStore
from parquetry.testing.conformance import StoreConformance
from parquetry.testing.moto import MotoServer


class TestMemoryStore(StoreConformance):
    @pytest.fixture
    def store(self) -> Store:
        return MemoryStore()


class TestLocalStore(StoreConformance):
    @pytest.fixture
    def store(self, tmp_path: Path) -> Store:
        return LocalStore(tmp_path / "root")


@pytest.mark.s3
class TestObjectStoreS3(StoreConformance):
    # moto answers one request at a time: keep the contended rounds modest.
    cas_rounds = 2

    @pytest.fixture
    def store(self, moto_server: MotoServer) -> Store:
        return open_store(moto_server.url(prefix="some/root"), **moto_server.options())


class TestReadOnlyStore(StoreConformance):
    many_keys = 1_000

    @pytest.fixture
    def writer(self) -> Store:
        return MemoryStore()

    @pytest.fixture
    def store(self, writer: Store) -> Store:
        return ReadOnlyStore(writer)


class TestCountingStore(StoreConformance):
    many_keys = 1_000  # the 10,000-key listing runs on the backends themselves

    @pytest.fixture
    def store(self, tmp_path: Path) -> Store:
        return CountingStore(LocalStore(tmp_path / "root", fsync=False))


class TestFaultyStoreWithoutFaults(StoreConformance):
    many_keys = 1_000

    @pytest.fixture
    def store(self) -> Store:
        return FaultyStore(MemoryStore())
