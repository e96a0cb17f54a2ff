"""ObjectStore specifics: secrets stay secret, unreachable endpoints fail fast and clearly."""

from __future__ import annotations

import base64
import pickle
import socket
import time
from collections.abc import Iterator
from datetime import timedelta

import pytest
from error_text import all_text

from parquetry.errors import InvalidArgument, NotFound, ParquetryError, StoreUnavailable
from parquetry.store import ObjectStore, open_store
from parquetry.store.objectstore import is_secret_option
from parquetry.testing.moto import MotoServer

SECRET = "SUPERSECRET-d0n7-l34k-m3"
KEY_ID = "AKIDSECRETID42"


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A loopback port with nothing listening: bound but not listening for the whole test,
    so connections are refused and no other process can take the port meanwhile."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        yield int(s.getsockname()[1])


def assert_no_secret(text: str) -> None:
    assert SECRET not in text
    assert KEY_ID not in text


def test_secret_option_names() -> None:
    for name in [
        "secret_access_key",
        "AWS_SECRET_ACCESS_KEY",
        "session_token",
        "sas_key",
        "account_key",
        "access_key_id",
        "client_secret",
        "bearer_token",
    ]:
        assert is_secret_option(name), name
    for name in ["endpoint", "region", "bucket", "allow_http", "timeout"]:
        assert not is_secret_option(name), name


@pytest.mark.s3
def test_secrets_stay_out_of_repr_url_and_errors(moto_server: MotoServer) -> None:
    store = open_store(
        moto_server.url(prefix="p"),
        endpoint=moto_server.endpoint,
        region="us-east-1",
        aws_access_key_id=KEY_ID,
        aws_secret_access_key=SECRET,
    )
    assert_no_secret(repr(store) + str(store) + store.url + repr(store.options))
    with pytest.raises(NotFound) as info:
        store.get("missing/key")
    assert_no_secret(all_text(info.value))
    # moto accepts any credentials: the store really works with them.
    store.put("k", b"v")
    assert store.get("k") == b"v"
    clone = pickle.loads(pickle.dumps(store))
    assert clone == store
    assert_no_secret(repr(clone))


def test_unreachable_endpoint_is_store_unavailable_and_fast(closed_port: int) -> None:
    endpoint = f"http://127.0.0.1:{closed_port}"
    store = open_store(
        "s3://bucket/prefix",
        endpoint=endpoint,
        region="us-east-1",
        access_key_id=KEY_ID,
        secret_access_key=SECRET,
    )
    start = time.monotonic()
    with pytest.raises(StoreUnavailable, match="s3://bucket/prefix") as info:
        store.get("some/key")
    elapsed = time.monotonic() - start
    assert elapsed < 15, f"default retries took {elapsed:.1f}s"
    assert info.value.key == "some/key"
    assert_no_secret(all_text(info.value))
    for call in (lambda: store.put("k", b"1"), lambda: list(store.list("a"))):
        with pytest.raises(StoreUnavailable) as info:
            call()
        assert_no_secret(all_text(info.value))


def test_retry_config_option_is_used(closed_port: int) -> None:
    """The option reaches the client: one retry after a 3 s backoff takes at least 3 s, no
    retry with the same backoff takes less (a refused loopback connect fails at once). A
    lower bound on the retried call, so a loaded machine cannot fail it."""
    backoff = {"init_backoff": timedelta(seconds=3), "max_backoff": timedelta(seconds=3)}

    def seconds_to_fail(retries: int) -> tuple[float, object]:
        store = open_store(
            "s3://bucket",
            endpoint=f"http://127.0.0.1:{closed_port}",
            region="us-east-1",
            skip_signature=True,
            retry_config={
                "max_retries": retries,
                "retry_timeout": timedelta(seconds=60),
                "backoff": backoff,
            },
            connect_timeout="1s",
        )
        start = time.monotonic()
        with pytest.raises(StoreUnavailable):
            store.head("k")
        return time.monotonic() - start, store

    retried, store = seconds_to_fail(1)
    assert retried >= 3
    assert "connect_timeout" in repr(store)
    once, _ = seconds_to_fail(0)
    assert once < 3


def test_bad_configuration_is_invalid_argument_without_secrets() -> None:
    with pytest.raises(InvalidArgument, match="bogus_option") as info:
        open_store("s3://bucket", bogus_option="x", secret_access_key=SECRET)
    assert_no_secret(all_text(info.value))
    with pytest.raises(InvalidArgument, match="az://container"):
        open_store("az://container")  # Azure needs an account name
    with pytest.raises(InvalidArgument, match="scheme"):
        ObjectStore("ftp", "bucket")
    with pytest.raises(InvalidArgument, match="bucket"):
        ObjectStore("s3", "")


def test_other_clouds_construct() -> None:
    gcs = open_store("gs://bucket/some/prefix")
    assert isinstance(gcs, ObjectStore)
    assert (gcs.scheme, gcs.bucket, gcs.prefix, gcs.url) == (
        "gs",
        "bucket",
        "some/prefix",
        "gs://bucket/some/prefix",
    )
    azure_key = base64.b64encode(SECRET.encode()).decode()
    azure = open_store("az://container/p", account_name="acct", account_key=azure_key)
    assert azure.url == "az://container/p"
    assert azure_key not in repr(azure)
    assert pickle.loads(pickle.dumps(azure)) == azure
    assert open_store("gcs://bucket").url == "gs://bucket"
    assert open_store("abfs://c", account_name="a").url == "az://c"


@pytest.mark.s3
def test_prefix_isolates_stores(moto_server: MotoServer) -> None:
    bucket = moto_server.create_bucket()
    opts = moto_server.options()
    a = open_store(f"s3://{bucket}/a", **opts)
    ab = open_store(f"s3://{bucket}/ab", **opts)
    root = open_store(f"s3://{bucket}", **opts)
    a.put("k", b"1")
    ab.put("k", b"2")
    assert sorted(m.key for m in root.list()) == ["a/k", "ab/k"]
    assert [m.key for m in a.list()] == ["k"]
    assert root.list_dir("").prefixes == ("a", "ab")
    assert a.get("k") == b"1"


def test_errors_are_parquetry_errors() -> None:
    assert issubclass(StoreUnavailable, ParquetryError)
    assert issubclass(StoreUnavailable, OSError)


def test_backend_error_text_is_scrubbed() -> None:
    from obstore.exceptions import GenericError

    from parquetry.store.objectstore import _Translate

    store = open_store(
        "s3://bucket", access_key_id=KEY_ID, secret_access_key=SECRET, region="us-east-1"
    )
    assert isinstance(store, ObjectStore)
    with pytest.raises(StoreUnavailable) as info, _Translate(store, "k"):
        raise GenericError(f"signature mismatch for key {SECRET} in request")
    assert "signature mismatch" in str(info.value)
    assert_no_secret(all_text(info.value))


def test_missing_bucket_is_store_unavailable_naming_it(moto_server: MotoServer) -> None:
    """A 404 NoSuchBucket is not "no such key": every call names the bucket (an existing
    bucket's missing key stays NotFound)."""
    from parquetry.dataset import Dataset

    options = moto_server.options()
    store = open_store("s3://no-such-bucket-42/lake", **options)
    for call in (
        lambda: store.get("x"),
        lambda: store.put("x", b"1"),
        lambda: list(store.list("a/")),
        lambda: Dataset.open(store, "orders"),
    ):
        with pytest.raises(StoreUnavailable) as info:
            call()
        assert str(info.value).startswith("bucket 'no-such-bucket-42' does not exist (s3://")
        assert not isinstance(info.value, NotFound)
    existing = open_store(moto_server.url(), **options)
    with pytest.raises(NotFound, match="'x' not found"):
        existing.get("x")


def test_endpoint_from_environment_allows_http(
    moto_server: MotoServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """AWS_ENDPOINT_URL=http://... alone reaches the server (it failed with "builder error":
    allow_http was set only for an endpoint option)."""
    options = moto_server.options()
    monkeypatch.setenv("AWS_ENDPOINT_URL", options["endpoint"])
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", options["access_key_id"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", options["secret_access_key"])
    monkeypatch.setenv("AWS_REGION", options["region"])
    url = moto_server.url()
    store = open_store(url)
    store.put("from-env", b"hello")
    assert store.get("from-env") == b"hello"
    assert open_store(url, **options).get("from-env") == b"hello"


def _open_uploads(moto_server: MotoServer, bucket: str) -> list[str]:
    """Keys of the bucket's multipart uploads in progress (S3 ListMultipartUploads)."""
    import re
    import urllib.request

    with urllib.request.urlopen(f"{moto_server.endpoint}/{bucket}?uploads", timeout=60) as resp:
        body = resp.read().decode()
    return re.findall(r"<Key>([^<]*)</Key>", body)


@pytest.mark.s3
def test_large_streams_are_multipart_uploads_aborted_on_failure(moto_server: MotoServer) -> None:
    """A streamed object larger than one part is a multipart upload: invisible while it
    runs, completed at commit, aborted (no upload left in the bucket) on an exception or
    when a create-if-absent finds the key taken."""
    from parquetry.errors import AlreadyExists
    from parquetry.store import PutMode

    bucket = moto_server.create_bucket()
    store = open_store(moto_server.url(bucket, prefix="root"), **moto_server.options())
    data = bytes(range(256)) * (80 << 12)  # 20 MiB: three 8 MiB parts
    w = store.open_writer("mp/k")
    for at in range(0, len(data), 1 << 20):
        w.write(data[at : at + (1 << 20)])
    assert _open_uploads(moto_server, bucket) == ["root/mp/k"]
    assert not store.exists("mp/k")
    assert w.commit().size == len(data)
    assert store.get("mp/k") == data
    assert _open_uploads(moto_server, bucket) == []

    def fail_while_writing() -> None:
        with store.open_writer("mp/failed") as w:
            w.write(data)
            assert _open_uploads(moto_server, bucket) == ["root/mp/failed"]
            raise RuntimeError("the producer failed")

    def create_over(key: str, rival: bool) -> None:
        with store.open_writer(key, mode=PutMode.CREATE) as w:
            w.write(data[: 9 << 20])  # more than a part: the HEAD before it finds "mp/k"
            if rival:
                store.put(key, b"first")  # created while our upload runs: caught at commit
            w.write(data[9 << 20 :])

    with pytest.raises(RuntimeError, match="producer"):
        fail_while_writing()
    with pytest.raises(AlreadyExists, match="'mp/k'"):
        create_over("mp/k", rival=False)
    with pytest.raises(AlreadyExists, match="'mp/late'"):
        create_over("mp/late", rival=True)
    assert store.get("mp/late") == b"first"
    assert _open_uploads(moto_server, bucket) == []
    assert sorted(m.key for m in store.list()) == ["mp/k", "mp/late"]
