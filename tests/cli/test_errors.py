"""Bad input gives one readable line and exit 1 (2 for usage), never a traceback."""

from __future__ import annotations

import subprocess
import sys

import pytest
from cli_helpers import Lake, invoke, one_error_line

from parquetry.dataset.naming import metadata_key

COMMANDS = [
    ["show"],
    ["history"],
    ["scan"],
    ["validate"],
    ["repair"],
    ["gc", "--dry-run"],
    ["report", "--json"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_missing_dataset(lake: Lake, command: list[str]) -> None:
    result = lake.run(command[0], "nope", *command[1:])
    assert result.exit_code == 1
    assert "no dataset 'nope'" in one_error_line(result)


@pytest.mark.parametrize("command", COMMANDS[:3], ids=lambda c: c[0])
def test_corrupt_metadata(lake: Lake, command: list[str]) -> None:
    """An unreadable pointer beside intact version documents: the command works from the
    newest readable version and says so in one warning line."""
    lake.store.put(metadata_key("orders"), b"{not json")
    result = lake.run(command[0], "orders", *command[1:])
    assert result.exit_code == 0, result.stderr
    (warning,) = result.stderr.splitlines()
    assert warning.startswith("warning: the metadata file orders.by-dataset-metadata.json")


@pytest.mark.parametrize("command", COMMANDS[:3], ids=lambda c: c[0])
def test_corrupt_metadata_without_versions(lake: Lake, command: list[str]) -> None:
    """Nothing to fall back to (no version documents): one error line naming the dataset."""
    for prefix in ("orders/_versions", "orders/_checkpoints"):
        for meta in list(lake.store.list(prefix)):
            lake.store.delete(meta.key)
    lake.store.delete("orders/_head.json", missing_ok=True)  # format 2's head
    lake.store.put(metadata_key("orders"), b"{not json")
    result = lake.run(command[0], "orders", *command[1:])
    assert result.exit_code == 1
    assert "orders" in one_error_line(result)


def test_corrupt_metadata_in_ls_keeps_the_others(lake: Lake) -> None:
    lake.store.put("daily/summary/manifest.json", b"[]")
    result = lake.run("ls")
    assert result.exit_code == 1
    assert "orders" in result.stdout
    assert one_error_line(result).startswith("error: daily/summary: ")


def test_corrupt_metadata_in_validate_is_a_problem_line(lake: Lake) -> None:
    lake.store.put(metadata_key("orders"), b"{not json")
    result = lake.run("validate", "orders")
    assert result.exit_code == 1
    assert len(result.stdout.splitlines()) == 1
    assert "orders" in result.stdout


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ("country = )", "expected a value after '=', found ')' at column 11"),
        ("nope = 1", "unknown column 'nope'"),
        ("product_id = 'x'", "cannot be compared with column 'product_id'"),
    ],
)
def test_bad_where(lake: Lake, where: str, message: str) -> None:
    result = lake.run("scan", "orders", "--where", where)
    assert result.exit_code == 1
    assert "Traceback" not in result.stderr
    first = result.stderr.splitlines()[0]
    assert first.startswith("error: ")
    assert message in first


def test_bad_where_points_at_the_token(local: Lake) -> None:
    result = local.run("scan", "orders", "--where", "country = 'DE' and or")
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        "error: expected a column name (quote it as \"or\" if it is a column), found 'or' at "
        "column 20",
        "  country = 'DE' and or",
        "                     ^",
    ]


def test_bad_where_fails_before_any_store_access(closed_port: int) -> None:
    result = invoke(
        "scan",
        "s3://bucket",
        "orders",
        "--where",
        "a = ",
        "--endpoint",
        f"http://127.0.0.1:{closed_port}",
    )
    assert result.exit_code == 1
    assert "expected a value" in result.stderr.splitlines()[0]


@pytest.mark.parametrize(
    "command", [["ls"], ["show", "orders"], ["scan", "orders"]], ids=lambda c: c[0]
)
def test_unreachable_endpoint(closed_port: int, command: list[str]) -> None:
    env = {
        "AWS_ACCESS_KEY_ID": "testing-key",
        "AWS_SECRET_ACCESS_KEY": "testing-secret",
        "AWS_REGION": "us-east-1",
    }
    result = invoke(
        command[0],
        "s3://bucket/prefix",
        *command[1:],
        "--endpoint",
        f"http://127.0.0.1:{closed_port}",
        env=env,
    )
    assert result.exit_code == 1
    line = one_error_line(result)
    assert "s3://bucket/prefix" in line
    assert "testing-secret" not in result.stderr


def test_missing_local_store(tmp_path: object) -> None:
    result = invoke("ls", f"{tmp_path}/nowhere")
    assert result.exit_code == 1
    assert "does not exist" in one_error_line(result)


def test_snapshot_has_no_versions(local: Lake) -> None:
    result = local.run("scan", "daily/summary", "--version", "1")
    assert result.exit_code == 1
    assert "keeps no versions" in one_error_line(result)


@pytest.mark.parametrize(
    "args",
    [
        ["scan"],
        ["ls", "--bogus"],
        ["scan", "x", "y", "--format", "xml"],
        ["gc", "x", "y", "--retention"],
        ["nosuchcommand"],
    ],
)
def test_usage_errors_exit_2(args: list[str]) -> None:
    result = invoke(*args)
    assert result.exit_code == 2
    assert "--help" in one_error_line(result)


def test_bad_option_values_exit_1(local: Lake) -> None:
    for args, message in (
        (["gc", "orders", "--retention", "soon"], "is not a duration"),
        (["scan", "orders", "--format", "parquet"], "needs --output"),
        (["scan", "orders", "--columns", "a,,b"], "empty column name"),
        (["scan", "orders", "--columns", "country,nope"], "'nope'"),
    ):
        result = local.run(*args)
        assert result.exit_code == 1, args
        assert message in one_error_line(result)


def test_verbose_shows_the_traceback(local: Lake) -> None:
    result = invoke("--verbose", "show", local.url, "nope")
    assert result.exit_code == 1
    assert "Traceback" in result.stderr
    assert result.stderr.rstrip().splitlines()[-1].startswith("error: no dataset 'nope'")


def test_installed_command_end_to_end(local: Lake) -> None:
    """The real console script in a subprocess: exit codes and streams as a shell sees them."""
    exe = [sys.executable, "-c", "from parquetry.cli import main; main()"]
    ok = subprocess.run(
        [*exe, "scan", local.url, "orders", "-w", "country = 'FR'", "-f", "csv"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.splitlines()[0] == '"country","product_id","day","amount"'
    assert len(ok.stdout.splitlines()) == 3
    bad = subprocess.run(
        [*exe, "show", local.url, "nope"], capture_output=True, text=True, timeout=120, check=False
    )
    assert bad.returncode == 1
    assert bad.stdout == ""
    assert bad.stderr.count("\n") == 1
    assert bad.stderr.startswith("error: no dataset")
    usage = subprocess.run([*exe, "scan"], capture_output=True, text=True, timeout=120, check=False)
    assert usage.returncode == 2
    version = subprocess.run(
        [*exe, "--version"], capture_output=True, text=True, timeout=120, check=False
    )
    assert version.returncode == 0
    assert version.stdout.startswith("parquetry ")
