"""Hostile names harness (issue 11, section 6.4): hostile keys, dataset uuids, partition and
index column names, partition values and CLI arguments, on a store whose root holds links
to the outside. Every call works (and round-trips) or raises a ParquetryError; the CLI
prints one ``error:`` line and exits 1, never 70 or a traceback; nothing outside the root
is ever read, written or deleted.

The Store methods themselves are driven by :class:`~parquetry.testing.conformance.
HostileKeyChecks` (part of the conformance suite every backend runs); here it also runs on
a local store whose root is booby-trapped with links.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from typer.testing import CliRunner, Result

from parquetry import Dataset, ParquetDatasetStore
from parquetry.cli.app import app
from parquetry.errors import ParquetryError, UnsafePath
from parquetry.store import LocalStore, MemoryStore, Store
from parquetry.testing._conformance_keys import HostileKeyChecks

# --- fixtures: a root with links to the outside ---------------------------------------------


def tree(path: Path) -> dict[str, bytes]:
    """Every file under ``path`` with its content (links not followed)."""
    out: dict[str, bytes] = {}
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            full = Path(dirpath) / name
            out[str(full.relative_to(path))] = b"<link>" if full.is_symlink() else full.read_bytes()
    return out


TABLE = pa.table({"p": ["a", "b", "a"], "v": [1, 2, 3]})


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory outside every store root, holding a real dataset and a snapshot."""
    path = tmp_path / "outside"
    store = LocalStore(path, fsync=False)
    Dataset.create(store, "victim", TABLE, partition_on=["p"], secondary_indices=["v"])
    ParquetDatasetStore(store).write_dataset(TABLE, "snap/victim")
    (path / "secret.txt").write_bytes(b"do not touch")
    return path


def plant_links(root: Path, outside: Path) -> None:
    """Links inside ``root`` to everything of ``outside``, under names parquetry uses."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "evil").symlink_to(outside / "victim")
    (root / "evil.by-dataset-metadata.json").symlink_to(outside / "victim.by-dataset-metadata.json")
    (root / "snap").symlink_to(outside / "snap")
    (root / "a").symlink_to(outside)
    (root / "x=1").symlink_to(outside / "secret.txt")
    (root / "dangling").symlink_to(root.parent / "nowhere")


@pytest.fixture
def trapped(tmp_path: Path, outside: Path) -> Iterator[LocalStore]:
    """A local store with a real dataset, a real snapshot and links to the outside."""
    before = tree(outside)
    store = LocalStore(tmp_path / "root", fsync=False)
    Dataset.create(store, "orders", TABLE, partition_on=["p"], secondary_indices=["v"])
    ParquetDatasetStore(store).write_dataset(TABLE, "daily/summary")
    plant_links(tmp_path / "root", outside)
    yield store
    assert tree(outside) == before, "something outside the root changed"


def works_or_fails_cleanly(call: Callable[[], Any]) -> Any:
    """Run ``call``: it works, or raises a ParquetryError (anything else fails the test)."""
    try:
        return call()
    except ParquetryError as exc:
        return exc


# --- every Store method, through the conformance checks, on a booby-trapped root -------------


class TestHostileKeysOnATrappedRoot(HostileKeyChecks):
    """The hostile-key conformance checks on a local root full of links to the outside.

    Keys the checks generate ("a", "x=1"...) run into the links: those calls must raise
    UnsafePath (an InvalidKey); listings never show the links.
    """

    hostile_examples = 40

    @pytest.fixture
    def store(self, tmp_path: Path, outside: Path) -> Iterator[Store]:
        before = tree(outside)
        store = LocalStore(tmp_path / "root", fsync=False)
        plant_links(tmp_path / "root", outside)
        yield store
        assert tree(outside) == before

    @pytest.fixture
    def writer(self, store: Store) -> Store:
        return store


# --- dataset constructors ------------------------------------------------------------------

HOSTILE_UUIDS = [
    "", ".", "..", "a/b", "../outside", "/abs", "a\x00", "a\n", "\udc80", "x" * 300, "é",
    " ", "a b", "-", "+", "_versions", "evil", "a", "snap", "dangling", "orders/../evil",
]  # fmt: skip


@pytest.mark.parametrize("uuid", HOSTILE_UUIDS, ids=repr)
def test_dataset_create_with_hostile_uuids(trapped: LocalStore, uuid: str) -> None:
    got = works_or_fails_cleanly(lambda: Dataset.create(trapped, uuid, TABLE).read())
    if isinstance(got, pa.Table):
        assert got.sort_by("v").equals(TABLE.sort_by("v"))
        assert Dataset.open(trapped, uuid).read().num_rows == 3
        works_or_fails_cleanly(lambda: Dataset.open(trapped, uuid).delete())
    else:
        assert uuid not in ("-", "+", "_versions"), got  # plain valid uuids must work
    works_or_fails_cleanly(lambda: Dataset.open(trapped, uuid).read())
    works_or_fails_cleanly(lambda: Dataset.open(trapped, uuid).delete())
    assert Dataset.open(trapped, "orders").read().num_rows == 3


def test_a_linked_dataset_is_refused_and_its_delete_touches_nothing_outside(
    trapped: LocalStore, tmp_path: Path
) -> None:
    """The defect of issue 11: delete() on a linked dataset directory deleted outside files."""
    for call in (
        lambda: Dataset.open(trapped, "evil").read(),
        lambda: Dataset.open(trapped, "evil").delete(),
        lambda: Dataset.create(trapped, "evil", TABLE),
    ):
        with pytest.raises(ParquetryError):
            call()
    # A dataset opened before its directory was swapped for a link.
    ds = Dataset.open(trapped, "orders")
    root = tmp_path / "root"
    shutil.move(root / "orders", tmp_path / "moved-orders")
    (root / "orders").symlink_to(tmp_path / "moved-orders")
    before = tree(tmp_path / "moved-orders")
    with pytest.raises(UnsafePath):
        ds.delete()
    assert tree(tmp_path / "moved-orders") == before


HOSTILE_COLUMNS = ["a/b", "=", "%", "é", "a b", "x=y", "", "\n", "_versions", "x" * 300, "v\\w"]
#: Column names pyarrow's sort takes for nested field paths: create fails with a raw
#: ArrowInvalid (issue 11 section 4: "pass field refs, not strings"); owned by the
#: predicates helper.
DOT_COLUMNS = [".x", "..", ".hidden"]


def _column_case(kind: str, name: str) -> None:
    store = MemoryStore()
    table = pa.table({name: ["a", "b", "a"], "v2": [1, 2, 3]})
    option = {"partition_on": [name]} if kind == "partition" else {"secondary_indices": [name]}
    got = works_or_fails_cleanly(lambda: Dataset.create(store, "ds", table, **option))
    if isinstance(got, Dataset):
        back = Dataset.open(store, "ds").read().sort_by("v2")
        assert back.column(name).to_pylist() == ["a", "b", "a"]
        assert back.column("v2").to_pylist() == [1, 2, 3]


@pytest.mark.parametrize("kind", ["partition", "index"])
@pytest.mark.parametrize("name", HOSTILE_COLUMNS, ids=repr)
def test_hostile_column_names(kind: str, name: str) -> None:
    _column_case(kind, name)


@pytest.mark.parametrize("kind", ["partition", "index"])
@pytest.mark.parametrize("name", DOT_COLUMNS, ids=repr)
def test_dotted_column_names(kind: str, name: str) -> None:
    _column_case(kind, name)


HOSTILE_VALUES = [
    "a/b", "..", ".", "", "%", "%2F", "=", "x=y", "é", "e\u0301", "\x00", "\n", "a\\b",
    "x" * 300, "\U0001f600", " ", "/", "//", "-1",
]  # fmt: skip


@pytest.mark.parametrize("value", HOSTILE_VALUES, ids=repr)
def test_hostile_partition_values(trapped: LocalStore, value: str) -> None:
    table = pa.table({"p": [value, "z"], "v": [1, 2]})
    got = works_or_fails_cleanly(
        lambda: Dataset.create(trapped, "pv", table, partition_on=["p"]).read()
    )
    if isinstance(got, pa.Table):
        assert got.sort_by("v").column("p").to_pylist() == [value, "z"]
        hits = Dataset.open(trapped, "pv").read(predicates=[[("p", "==", value)]])
        assert hits.column("v").to_pylist() == [1]
    else:
        assert len(value.encode()) > 255, got  # only an overlong value may be refused
        assert not Dataset.exists(trapped, "pv")


HOSTILE_SNAPSHOT_KEYS = [
    "", ".", "..", "a/../b", "/a", "a/", "a//b", "a\x00", "a\n", "\udc80", "x" * 300,
    "é", "a b", "_staging", "manifest.json", "_SUCCESS", "k=v/%2F", "snap", "snap/x", "evil",
    "a", "a/b", "dangling/x", "daily/summary/part",
]  # fmt: skip


@pytest.mark.parametrize("key", HOSTILE_SNAPSHOT_KEYS, ids=repr)
def test_snapshot_write_with_hostile_keys(trapped: LocalStore, key: str) -> None:
    pds = ParquetDatasetStore(trapped)
    got = works_or_fails_cleanly(lambda: pds.write_dataset(TABLE, key, overwrite=True))
    if not isinstance(got, ParquetryError):
        assert pds.read_manifest(key).row_count == 3
    assert pds.read_manifest("daily/summary").row_count == 3


def test_snapshot_reserved_names_in_inner_segments() -> None:
    pds = ParquetDatasetStore(MemoryStore())
    nested = works_or_fails_cleanly(lambda: pds.write_dataset(TABLE, "a/_staging/keep"))
    pds.write_dataset(TABLE, "a")
    if not isinstance(nested, ParquetryError):
        assert pds.read_manifest("a/_staging/keep").row_count == 3


# --- the CLI -----------------------------------------------------------------------------

CLI_COMMANDS = [
    ["show"],
    ["history"],
    ["scan"],
    ["validate"],
    ["repair"],
    ["gc", "--retention", "0"],
    ["gc", "--dry-run"],
    ["report", "--json"],
]
CLI_NAMES = [
    "", ".", "..", "../outside", "/etc", "a/b", "\udc80", "x" * 300, "é", "evil", "a", "snap",
    "snap/victim", "dangling", "x=1", "orders/../evil", "orders\n", "-", "daily",
]  # fmt: skip


def clean_result(result: Result) -> None:
    """Exit 0, or exit 1 with exactly one ``error:`` line; never 70, never a traceback."""
    text = result.output + result.stderr
    assert result.exit_code in (0, 1), (result.exit_code, text)
    assert "Traceback" not in text
    assert "internal error" not in text
    if result.exit_code == 1:
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert len(lines) == 1, result.stderr
        assert lines[0].startswith("error: "), lines[0]


def run(*argv: str) -> Result:
    return CliRunner().invoke(app, list(argv))


@pytest.mark.parametrize("command", CLI_COMMANDS, ids=lambda c: " ".join(c))
def test_cli_commands_with_hostile_names(trapped: LocalStore, command: list[str]) -> None:
    url = str(trapped.root)
    for name in CLI_NAMES:
        result = run(command[0], url, name, *command[1:])
        clean_result(result)
        if name in ("evil", "a", "snap", "snap/victim", "dangling", "x=1", "orders/../evil"):
            assert result.exit_code == 1, (name, result.output)
    assert Dataset.open(trapped, "orders").read().num_rows == 3


def test_cli_ls_and_inspect_on_a_trapped_root(trapped: LocalStore, outside: Path) -> None:
    url = str(trapped.root)
    result = run("ls", url)
    clean_result(result)
    assert result.exit_code == 0
    assert "orders" in result.output
    assert "victim" not in result.output
    assert "evil" not in result.output
    for target in (
        f"{url}/x=1",
        f"{url}/evil/table/_common_metadata",
        f"{url}/dangling",
        f"{url}/\udc80",
        f"{url}/{'x' * 300}",
        f"file://{url}/a/secret.txt",
    ):
        clean_result(run("inspect", target))
    data = next(m.key for m in trapped.list("orders") if m.key.endswith(".parquet"))
    result = run("inspect", f"{url}/{data}")
    clean_result(result)
    assert result.exit_code == 0


def test_cli_inspect_follows_a_link_the_user_typed(trapped: LocalStore, tmp_path: Path) -> None:
    """A file path on the command line is the user's choice: its links are followed (only
    links *inside* a store's root are refused)."""
    data = next(m.key for m in trapped.list("orders") if m.key.endswith(".parquet"))
    (tmp_path / "shortcut.parquet").symlink_to(trapped.root / data)
    result = run("inspect", str(tmp_path / "shortcut.parquet"))
    clean_result(result)
    assert result.exit_code == 0, result.stderr


def test_a_data_file_swapped_for_a_link_is_never_read(tmp_path: Path) -> None:
    """Every read path, pyarrow's own file opening included, refuses a data file that a link
    inside the root takes outside it."""
    store = LocalStore(tmp_path / "root", fsync=False)
    Dataset.create(store, "ds", pa.table({"v": [1, 2]}))
    other = LocalStore(tmp_path / "other", fsync=False)
    Dataset.create(other, "x", pa.table({"v": [666, 777]}))
    key = next(m.key for m in store.list("ds") if m.key.endswith(".parquet"))
    planted = next(m.key for m in other.list("x") if m.key.endswith(".parquet"))
    (store.root / key).unlink()
    (store.root / key).symlink_to(other.root / planted)
    ds = Dataset.open(store, "ds")
    for read in (
        ds.read,
        lambda: list(ds.scan()),
        lambda: ds.to_pyarrow_dataset().to_table(),
    ):
        with pytest.raises(UnsafePath):
            read()
