"""Attacks on streamed writes (``Store.open_writer``) beyond the conformance suite: a writer
SIGKILLed in the middle of its upload (local temporary file, S3 multipart upload), a large
create-if-absent racing another, an abort of a multipart upload (nothing left in flight),
a writer dropped without commit or abort, and listings taken while writes are open.
"""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import boto3
import pytest

from parquetry.errors import AlreadyExists
from parquetry.store import LocalStore, PutMode, Store, open_store
from parquetry.testing.moto import MotoServer

_MIB = 1 << 20

_KILLED_WRITER = textwrap.dedent(
    """
    import json, sys, time
    from parquetry.store import open_store, PutMode
    url, options, key, mib = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    store = open_store(url, **options)
    w = store.open_writer(key, mode=PutMode.CREATE)
    for _ in range(mib):
        w.write(b"x" * (1 << 20))
    print("written", flush=True)
    time.sleep(600)
    """
)


def _s3_uploads(server: MotoServer, url: str) -> list[dict[str, Any]]:
    """Multipart uploads still in flight in the bucket of ``url`` (boto3, the server's view)."""
    bucket = url.removeprefix("s3://").split("/")[0]
    client = boto3.client(
        "s3",
        endpoint_url=server.endpoint,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
    )
    return list(client.list_multipart_uploads(Bucket=bucket).get("Uploads", []))


def _kill_mid_write(url: str, options: dict[str, Any], key: str, mib: int) -> None:
    import json

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2] / "src")}
    with subprocess.Popen(
        [sys.executable, "-c", _KILLED_WRITER, url, json.dumps(options), key, str(mib)],
        stdout=subprocess.PIPE,
        env=env,
    ) as proc:
        try:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == b"written"
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)


@pytest.mark.parametrize("kind", ["local", "s3"])
@pytest.mark.parametrize("mib", [0, 3, 20])
def test_a_killed_writer_leaves_no_visible_object(
    kind: str, mib: int, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if kind == "local":
        url, options = (tmp_path / "s").as_uri(), {}
    else:
        server: MotoServer = request.getfixturevalue("moto_server")
        url, options = server.url(), server.options()
    store = open_store(url, **options)
    store.put("d/other", b"kept")
    _kill_mid_write(url, options, "d/new", mib)
    assert not store.exists("d/new")
    assert [m.key for m in store.list("")] == ["d/other"]
    assert store.list_dir("d").objects[0].key == "d/other"
    # The key is still free: a create-if-absent succeeds, and only once.
    store.put("d/new", b"after", mode=PutMode.CREATE)
    with pytest.raises(AlreadyExists):
        store.put("d/new", b"again", mode=PutMode.CREATE)
    assert store.get("d/new") == b"after"
    if kind == "local":
        # The killed writer's temporary file (written past the first piece) stays hidden.
        leftovers = [p.name for p in (tmp_path / "s" / "d").iterdir()]
        assert sorted(n for n in leftovers if not n.startswith(".parquetry-")) == ["new", "other"]


def test_an_aborted_multipart_upload_is_not_left_in_flight(moto_server: MotoServer) -> None:
    url = moto_server.url()
    store = open_store(url, **moto_server.options())
    w = store.open_writer("big/k")
    for _ in range(20):
        w.write(b"y" * _MIB)
    assert _s3_uploads(moto_server, url), "a 20 MiB object is a multipart upload"
    w.abort()
    assert _s3_uploads(moto_server, url) == []
    assert not store.exists("big/k")

    # Dropped without commit or abort (an interrupted frame): discarded when collected.
    def drop() -> None:
        w = store.open_writer("big/dropped")
        for _ in range(20):
            w.write(b"z" * _MIB)

    drop()
    gc.collect()
    assert _s3_uploads(moto_server, url) == []
    assert not store.exists("big/dropped")


def _race_create(store: Store, key: str, size: int, n: int = 2) -> list[object]:
    barrier = threading.Barrier(n)
    results: list[object] = [None] * n

    def run(i: int) -> None:
        piece = bytes([i]) * _MIB
        try:
            with store.open_writer(key, mode=PutMode.CREATE) as w:
                barrier.wait()
                for _ in range(size // _MIB):
                    w.write(piece)
            results[i] = i
        except BaseException as exc:
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


@pytest.mark.parametrize("mib", [1, 20])
def test_create_races_on_local_disk_have_one_winner(tmp_path: Path, mib: int) -> None:
    store = LocalStore(tmp_path / "s", fsync=False)
    for round_ in range(3):
        key = f"r/{round_}"
        results = _race_create(store, key, mib * _MIB)
        winners = [r for r in results if isinstance(r, int)]
        assert len(winners) == 1, results
        assert all(isinstance(r, AlreadyExists) for r in results if not isinstance(r, int))
        assert store.get(key) == bytes([winners[0]]) * (mib * _MIB)
    assert not [p for p in (tmp_path / "s" / "r").iterdir() if p.name.startswith(".parquetry")]


def test_s3_large_create_race_publishes_one_whole_object(moto_server: MotoServer) -> None:
    """A create-if-absent past one part is a multipart upload whose completion obstore makes
    unconditional: both racers may "win" (documented in store/objectstore.py; callers
    stream CREATEs to unique keys). What must hold: the object is one writer's whole bytes,
    never a mix of parts, and nothing stays in flight."""
    url = moto_server.url()
    store = open_store(url, **moto_server.options())
    size = 20 * _MIB
    results = _race_create(store, "r/k", size)
    winners = [r for r in results if isinstance(r, int)]
    assert winners, results
    assert all(isinstance(r, AlreadyExists) for r in results if not isinstance(r, int))
    data = store.get("r/k")
    assert data in {bytes([w]) * size for w in winners}
    assert _s3_uploads(moto_server, url) == []
