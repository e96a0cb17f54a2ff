"""Secrets never print; malformed endpoints are refused, never a Rust panic; S3 test clients
never walk the credential chain to a cloud metadata endpoint (issue 11, sections 3 and 6)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from error_text import all_text
from typer.testing import CliRunner

from parquetry.cli.app import app
from parquetry.errors import InvalidArgument, ParquetryError, StoreUnavailable
from parquetry.spark.options import SourceOptions
from parquetry.store import LocalStore, ObjectStore, Store, open_store
from parquetry.store.objectstore import _Translate, is_panic
from parquetry.store.secrets import is_secret_option, mask_options, redact_url
from parquetry.testing.moto import CREDENTIALS, NO_METADATA_ENV, MotoServer

SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYSECRET"
KEY_ID = "AKIAIOSFODNN7KEYID"


def assert_no_secret(text: str) -> None:
    assert SECRET not in text
    assert KEY_ID not in text
    assert "K7MDENG" not in text  # no fragment of a secret split at '/'


# --- option names and SourceOptions ------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "secret_access_key",
        "session_token",
        "password",
        "client_secret",
        "sas_token",
        "azure_storage_sas_key",
        "account_key",
        "azure_storage_account_key",
        "service_account_key",
        "application_credentials",
        "api_key",
        "private_key",
        "access_key_id",
    ],
)
def test_secret_option_names(name: str) -> None:
    assert is_secret_option(name)
    assert is_secret_option(name.upper())
    assert mask_options({name: SECRET}) == {name: "***"}


def test_source_options_repr_masks_secrets() -> None:
    options = SourceOptions.parse(
        {
            "store": "s3://bucket/lake",
            "dataset": "orders",
            "endpoint": "http://127.0.0.1:9000",
            "access_key_id": KEY_ID,
            "secret_access_key": SECRET,
            "session_token": SECRET + "-token",
            "store.client_secret": SECRET,
            "store.sas_token": SECRET,
            "store.password": SECRET,
        }
    )
    for text in (repr(options), str(options), f"{options}", repr([options])):
        assert_no_secret(text)
        assert "http://127.0.0.1:9000" in text  # non-secret options still show
        assert "'secret_access_key': '***'" in text
    assert options.store_options["secret_access_key"] == SECRET  # the value itself is kept
    assert SourceOptions.parse(options.to_spark()) == options


# --- credentials in URLs -----------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        f"s3://{KEY_ID}:{SECRET}@bucket/prefix",
        f"s3://{KEY_ID}@bucket",
        f"gs://{KEY_ID}:{SECRET}@bucket/p",
        f"az://{KEY_ID}:{SECRET}@container",
        f"memory://{KEY_ID}:{SECRET}@name",
        f"file://{KEY_ID}:{SECRET}@localhost/tmp/x",
        f"s3://{KEY_ID}:{SECRET.split('/')[0]}/",  # a secret cut at its '/': no '@' left
    ],
)
def test_credentials_in_urls_are_refused_without_echo(url: str) -> None:
    with pytest.raises(InvalidArgument) as info:
        open_store(url)
    assert_no_secret(all_text(info.value))
    assert "***" in str(info.value)


def test_redact_url() -> None:
    assert redact_url(f"s3://{KEY_ID}:{SECRET}@bucket/p") == "s3://***@bucket/p"
    assert redact_url("s3://bucket/p") == "s3://bucket/p"
    assert redact_url("/plain/path@x") == "/plain/path@x"


def test_at_sign_in_a_local_path_is_fine(tmp_path: os.PathLike[str]) -> None:
    path = os.path.join(tmp_path, "user@host")
    for url in (f"file://{path}", path):
        store = open_store(url)
        assert isinstance(store, LocalStore)
        assert store.root.name == "user@host"


# --- malformed endpoints -----------------------------------------------------------------

BAD_ENDPOINTS = [
    "http://[::1",
    "not a url",
    "http://host:99999",
    "http://host:port",
    "http://",
    "ftp://host",
    "http://a b",
    "http://host\n:1",
    "http://[zz::1]:9000",
    f"http://{KEY_ID}:{SECRET}@host:9000",
    "",
]


@pytest.mark.parametrize("endpoint", BAD_ENDPOINTS)
def test_malformed_endpoints_are_invalid_argument(endpoint: str) -> None:
    with pytest.raises(InvalidArgument, match="endpoint") as info:
        open_store(
            "s3://bucket",
            endpoint=endpoint,
            region="us-east-1",
            access_key_id=KEY_ID,
            secret_access_key=SECRET,
        )
    assert_no_secret(all_text(info.value))


def test_malformed_endpoint_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://[::1")
    with pytest.raises(InvalidArgument, match="AWS_ENDPOINT_URL"):
        open_store("s3://bucket", region="us-east-1", access_key_id="a", secret_access_key="b")


def test_valid_endpoints_pass() -> None:
    for endpoint in (
        "http://127.0.0.1:9000",
        "https://s3.eu-west-1.amazonaws.com",
        "http://[::1]:9000/",
    ):
        store = open_store("s3://bucket", endpoint=endpoint, region="us-east-1")
        assert isinstance(store, ObjectStore)


def _panic() -> BaseException:
    """A real pyo3 PanicException, raised by obstore on an endpoint that bypassed the check."""
    import obstore
    from obstore.store import S3Store

    client = S3Store(
        "bucket",
        config={"endpoint": "http://[::1", "region": "us-east-1", "access_key_id": "a",
                "secret_access_key": "b"},
        client_options={"allow_http": True},
    )  # fmt: skip
    try:
        obstore.head(client, "k")
    except BaseException as exc:  # PanicException derives from BaseException
        return exc
    raise AssertionError("obstore did not panic")


def test_panics_become_parquetry_errors() -> None:
    panic = _panic()
    assert is_panic(panic)
    assert not isinstance(panic, Exception)
    store = open_store(
        "s3://bucket", region="us-east-1", access_key_id=KEY_ID, secret_access_key=SECRET
    )
    assert isinstance(store, ObjectStore)
    with pytest.raises(StoreUnavailable, match="crashed") as info, _Translate(store, "k"):
        raise panic
    assert info.value.key == "k"
    assert_no_secret(all_text(info.value))
    for passthrough in (KeyboardInterrupt(), SystemExit(3)):
        with pytest.raises(type(passthrough)), _Translate(store, "k"):
            raise passthrough
    assert not is_panic(KeyboardInterrupt())


@pytest.mark.parametrize("endpoint", ["http://[::1", "not a url", "http://host:99999"])
def test_cli_prints_one_line_for_a_bad_endpoint(endpoint: str) -> None:
    result = CliRunner().invoke(app, ["ls", "s3://bucket", "--endpoint", endpoint])
    assert result.exit_code == 1, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: invalid endpoint"), lines[0]


def test_cli_subprocess_bad_endpoint_no_rust_traceback() -> None:
    """The real process: no Rust panic message or backtrace reaches stderr."""
    env = {**os.environ, **NO_METADATA_ENV, "AWS_REGION": "us-east-1"}
    code = "from parquetry.cli import main; main()"  # the program: ends by os._exit
    proc = subprocess.run(
        [sys.executable, "-c", code, "ls", "s3://bucket", "--endpoint", "http://[::1"],
        capture_output=True, text=True, timeout=120, env=env, check=False,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert "panicked" not in proc.stderr
    assert "Traceback" not in proc.stderr


def test_cli_refuses_credentials_in_the_url() -> None:
    result = CliRunner().invoke(app, ["ls", f"s3://{KEY_ID}:{SECRET}@bucket/lake"])
    assert result.exit_code == 1
    assert_no_secret(result.output + result.stderr)
    assert "s3://***@bucket/lake" in result.stderr


# --- no metadata endpoint probes -----------------------------------------------------------


@pytest.mark.s3
def test_s3_fixtures_use_explicit_credentials(
    s3_store: Store, moto_server: MotoServer, store_factory: object
) -> None:
    stores = [s3_store, store_factory("s3")]  # type: ignore[operator]
    for store in stores:
        assert isinstance(store, ObjectStore)
        for name in ("access_key_id", "secret_access_key", "region", "endpoint"):
            assert store._options.get(name), name
    assert moto_server.options()["access_key_id"] == CREDENTIALS["access_key_id"]
    env = moto_server.env()
    assert env["AWS_EC2_METADATA_DISABLED"] == "true"
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION"):
        assert env[name], name


def test_a_client_without_credentials_probes_only_loopback() -> None:
    """The test environment points the metadata endpoint at a closed loopback port: a client
    left without credentials fails there at once instead of reaching 169.254.169.254."""
    for name, value in NO_METADATA_ENV.items():
        assert os.environ.get(name) == value
    saved = {
        k: os.environ.pop(k)
        for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
        if k in os.environ
    }
    try:
        store = open_store(
            "s3://bucket",
            endpoint="http://127.0.0.1:9",
            region="us-east-1",
            retry_config={"max_retries": 0},
        )
        with pytest.raises(StoreUnavailable) as info:
            store.exists("k")
    finally:
        os.environ.update(saved)
    assert "169.254" not in str(info.value)
    assert isinstance(info.value, ParquetryError)
