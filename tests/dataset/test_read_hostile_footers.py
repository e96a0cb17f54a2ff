"""Every read path checks a committed file's footer before pyarrow sees it.

pyarrow ``std::terminate``s on some footers (``parquetry.parquet.footer_check``) and raises
raw errors on others. Each hazard of ``tests/parquet/test_footer_check.py`` (HAZARDS) and
``tests/cli/test_unsafe_footers.py`` (DAMAGE) is put in a committed file of a dataset (and a
part of a snapshot dataset), then every read path runs in a child process (an abort kills
only the child): each must raise InvalidFormat naming the file (EncryptionError for the
encrypted damages), and the child must exit 0.

Before the check ran on these paths, ``to_pyarrow_dataset`` with a filter aborted the
process (SIGABRT) on statistics, chunk-type and histogram damage, and raised raw OSErrors
otherwise; snapshot reads raised a raw UnicodeDecodeError on a non-UTF-8 column name, read
a footer missing a column chunk when the chunk was not projected, and named no part; reads
of a dataset returned rows from a file whose chunk type contradicts the schema or whose
statistics have the wrong width; ``commit_files`` without a schema raised a raw
UnicodeDecodeError on a non-UTF-8 column name.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

TESTS = Path(__file__).parent.parent

_CHILD = """
import dataclasses, sys
import pyarrow as pa
import pyarrow.dataset as pads
sys.path[:0] = [sys.argv[1] + "/parquet", sys.argv[1] + "/cli"]
from test_footer_check import HAZARDS, TABLE
from test_unsafe_footers import DAMAGE, _patched
from parquetry.dataset import Dataset, write_files
from parquetry.dataset.read import read_row_groups
from parquetry.errors import EncryptionError, InvalidFormat
from parquetry.parquet.files import read_table_from_store
from parquetry.parquet.options import WriteOptions
from parquetry.snapshot import ParquetDatasetStore
from parquetry.store import MemoryStore

kind = sys.argv[2]
if kind in HAZARDS:
    damage = lambda data: _patched(data, HAZARDS[kind])
    expected = (InvalidFormat,)
else:
    damage = DAMAGE[kind]
    expected = (EncryptionError,) if kind.startswith("encrypted") else (InvalidFormat,)

def attempt(path, key, action):
    try:
        action()
    except expected as exc:
        assert key in str(exc), (path, str(exc))
        print("named", path, flush=True)
    except Exception as exc:
        print("WRONG", path, type(exc).__name__, str(exc)[:200], flush=True)
    else:
        print("WRONG", path, "no error", flush=True)

# A dataset whose one committed file has the damaged footer; the version records the
# damaged file's size (a size mismatch would be refused for another reason).
store = MemoryStore()
table = TABLE.append_column("p", pa.array([0, 0, 0]))
files = write_files(
    store, "c", table, partition_on=["p"], write_options=WriteOptions(row_group_size=2)
)
(described,) = files
data = damage(store.get(described.key))
store.put(described.key, data)
ds = Dataset.commit_files(
    store, "c", [dataclasses.replace(described, size=len(data))], mode="create",
    schema=table.schema, partition_on=["p"],
)
key = described.key
attempt("read", key, ds.read)
attempt("read-predicates", key, lambda: ds.read(predicates=[[("i", ">", 1)]]))
attempt("read-columns", key, lambda: ds.read(columns=["i"]))
attempt("scan", key, lambda: list(ds.scan()))
attempt("scan-predicates", key, lambda: list(ds.scan(predicates=[[("i", ">", 1)]])))
attempt("read-file", key, lambda: [ds.read_file(f) for f in ds.plan().files])
attempt(
    "read-row-groups", key,
    lambda: [list(read_row_groups(store, ds.schema, f, ["i"])) for f in ds.plan().files],
)
attempt("read-table-from-store", key, lambda: read_table_from_store(store, key))
attempt(
    "pyarrow-dataset", key,
    lambda: ds.to_pyarrow_dataset().to_table(filter=pads.field("i") > 1),
)

if kind in HAZARDS:  # a dataset created from the file takes its schema from the footer
    (other,) = write_files(store, "d", table, partition_on=["p"])
    data = damage(store.get(other.key))
    store.put(other.key, data)
    attempt(
        "commit-files-schema", other.key,
        lambda: Dataset.commit_files(
            store, "d", [dataclasses.replace(other, size=len(data))], mode="create",
            partition_on=["p"],
        ),
    )
else:
    print("named commit-files-schema")

snap = ParquetDatasetStore(store, max_rows_per_file=2)
snap.write_dataset(TABLE, "s/ds")
part = "s/ds/part-00000.parquet"
store.put(part, damage(store.get(part)))
attempt("snapshot", part, lambda: snap.read_dataset("s/ds"))
attempt("snapshot-columns", part, lambda: snap.read_dataset("s/ds", columns=["i"]))
"""

# Skip finalization (apache/arrow#34314: an Arrow thread freeing a Python-owned buffer
# during it aborts the process).
_EXIT = "\nimport os as _os\n_os._exit(0)\n"

PATHS = [
    "read",
    "read-predicates",
    "read-columns",
    "scan",
    "scan-predicates",
    "read-file",
    "read-row-groups",
    "read-table-from-store",
    "pyarrow-dataset",
    "commit-files-schema",
    "snapshot",
    "snapshot-columns",
]
KINDS = [
    "statistics width",
    "type",
    "histogram",
    "UTF-8",
    "chunks",
    "encrypted-column",
    "encrypted-footer",
    "statistics-width",
    "chunk-type",
]


@pytest.mark.parametrize("kind", KINDS)
def test_every_read_path_refuses_a_hostile_footer_naming_the_file(kind: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_CHILD) + _EXIT, str(TESTS), kind],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, (done.returncode, done.stdout, done.stderr[-2000:])
    assert done.stdout.split("\n")[:-1] == [f"named {path}" for path in PATHS], done.stdout
