"""Attacks on the CLI with hostile store URLs and dataset names: every one is a user error
(exit 1, one ``error:`` line), never an internal error (exit 70). A URL that urllib cannot
split ("s3://b[", "http://[::1": brackets are IPv6 hosts to it) exited 70 with a raw
ValueError because the CLI split it itself before the store layer validated it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from parquetry.cli.app import app
from parquetry.dataset import Dataset
from parquetry.store import LocalStore


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("hostile-lake")
    Dataset.create(LocalStore(root), "ds", pa.table({"a": [1, 2, 3]}), secondary_indices=["a"])
    return str(root)


def _user_error(result: Any, what: str) -> None:
    assert result.exit_code == 1, (what, result.exit_code, result.output[-2000:])
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.stderr[-2000:]
    assert "internal error" not in errors[0], errors[0]


@pytest.mark.parametrize(
    "url", ["s3://b[", "http://[::1", "https://[zz]/b", "s3://[/x", "gs://a]b[", "az://[::1]x"]
)
def test_malformed_store_urls_are_user_errors(url: str) -> None:
    for args in (["show", url, "ds"], ["ls", url], ["scan", url, "ds"]):
        _user_error(CliRunner().invoke(app, args), " ".join(args))


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    scheme=st.sampled_from(["", "s3://", "file://", "memory://", "gs://", "az://", "http://"]),
    rest=st.text(st.sampled_from("[]:/@%?#.é\\ab0-_ "), max_size=12),
)
def test_any_store_url_is_opened_or_a_user_error(lake: str, scheme: str, rest: str) -> None:
    url = scheme + rest if scheme else str(Path(lake) / rest)
    if scheme in ("s3://", "gs://", "az://") and rest[:1].isalnum():
        return  # a well-formed bucket: the command would go to the network
    result = CliRunner().invoke(app, ["show", url, "ds"])
    if result.exit_code != 0:
        _user_error(result, url)


@pytest.mark.parametrize("name", ["../ds", "ds/..", "é", "a/b", "", " ", "ds\x00", "x" * 5000, "."])
def test_hostile_dataset_names_are_user_errors(lake: str, name: str) -> None:
    for args in (["show", lake, name], ["scan", lake, name], ["history", lake, name]):
        _user_error(CliRunner().invoke(app, args), repr(args))
