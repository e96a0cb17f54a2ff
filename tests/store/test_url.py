"""open_store: the one place a store URL is parsed."""

from __future__ import annotations

from pathlib import Path

import pytest

from parquetry.errors import InvalidArgument
from parquetry.store import LocalStore, MemoryStore, ObjectStore, open_store


def test_file_urls_and_plain_paths(tmp_path: Path) -> None:
    by_url = open_store((tmp_path / "a b").as_uri())
    assert isinstance(by_url, LocalStore)
    assert by_url.root == tmp_path / "a b"
    assert open_store(str(tmp_path / "a b")) == by_url
    assert open_store(f"file://localhost{tmp_path}/x").root == tmp_path / "x"  # type: ignore[attr-defined]
    assert open_store(by_url.url) == by_url
    relative = open_store("rel/dir")
    assert isinstance(relative, LocalStore)
    assert relative.root == Path("rel/dir").absolute()


def test_file_options(tmp_path: Path) -> None:
    assert open_store(str(tmp_path), fsync=False).fsync is False  # type: ignore[attr-defined]
    assert open_store(str(tmp_path), fsync="false").fsync is False  # type: ignore[attr-defined]
    assert open_store(str(tmp_path), fsync="1").fsync is True  # type: ignore[attr-defined]
    with pytest.raises(InvalidArgument, match="fsync"):
        open_store(str(tmp_path), fsync="maybe")
    with pytest.raises(InvalidArgument, match="endpoint"):
        open_store(str(tmp_path), endpoint="http://x")
    with pytest.raises(InvalidArgument, match="local"):
        open_store("file://otherhost/data")


def test_memory_urls() -> None:
    a = open_store("memory://shared-name")
    assert isinstance(a, MemoryStore)
    a.put("k", b"1")
    assert open_store("memory://shared-name").get("k") == b"1"
    assert open_store("memory://shared-name") == a
    assert open_store("memory://").url == "memory://default"
    assert a.url == "memory://shared-name"
    with pytest.raises(InvalidArgument, match="region"):
        open_store("memory://x", region="eu")


def test_object_store_urls() -> None:
    s3 = open_store("s3://my-bucket/deep/prefix/", region="eu-west-1", endpoint_url=None)
    assert isinstance(s3, ObjectStore)
    assert (s3.scheme, s3.bucket, s3.prefix) == ("s3", "my-bucket", "deep/prefix")
    assert s3.url == "s3://my-bucket/deep/prefix"
    assert s3.options["region"] == "eu-west-1"
    assert "endpoint" not in s3.options  # None options are ignored
    assert open_store("S3://my-bucket").url == "s3://my-bucket"
    assert open_store("s3://b", aws_endpoint_url="http://h:1").options["endpoint"] == "http://h:1"
    assert isinstance(open_store("gs://bucket"), ObjectStore)
    assert isinstance(open_store("az://container", account_name="a"), ObjectStore)


@pytest.mark.parametrize(
    ("url", "match"),
    [
        ("s3://", "bucket"),
        ("s3:///prefix", "bucket"),
        ("gs://", "bucket"),
        ("ftp://host/x", "scheme"),
        ("http://host/x", "scheme"),
        ("", "non-empty"),
    ],
)
def test_bad_urls(url: str, match: str) -> None:
    with pytest.raises(InvalidArgument, match=match):
        open_store(url)


def test_non_string_url() -> None:
    with pytest.raises(InvalidArgument):
        open_store(None)  # type: ignore[arg-type]
