"""Property: any partition values parquetry writes (text with any character, ints, floats,
dates, timestamps) are read back by kartothek 5.3.0 exactly, and an equality conjunction on all
partition keys plans exactly the row's partition. One kartothek process per example."""

from __future__ import annotations

import datetime as dt
import os
import tempfile
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kt_harness import Kartothek
from kt_support import canonical_records, oracle, rows_of_kartothek, to_driver_predicates

from parquetry import Dataset
from parquetry.store import LocalStore

pytestmark = pytest.mark.kartothek

SCHEMA = pa.schema(
    [
        ("s", pa.string()),
        ("i", pa.int64()),
        ("f", pa.float64()),
        ("d", pa.date32()),
        ("ts", pa.timestamp("us")),
        ("n", pa.int64()),
    ]
)
KEYS = ["s", "i", "f", "d", "ts"]

# A path component must stay under 255 bytes once percent-encoded (up to 12 bytes a char).
# No NUL: kartothek 5.3.0's unquote (the urlquote C library) cuts "a%00b" to "a", for its own
# datasets too. No lone surrogates: Arrow strings are UTF-8, so such a value cannot even be
# put in a table (parquetry's own refusal of them is tested with the hostile names).
texts = st.text(
    st.characters(exclude_characters="\x00", exclude_categories=("Cs",)), min_size=1, max_size=12
)
rows = st.lists(
    st.tuples(
        texts,
        st.integers(-(2**63), 2**63 - 1),
        st.floats(allow_nan=False, allow_infinity=False, width=64),
        st.dates(dt.date(1900, 1, 1), dt.date(2200, 12, 31)),
        st.datetimes(dt.datetime(1900, 1, 1), dt.datetime(2200, 12, 31)),
    ),
    min_size=1,
    max_size=6,
    unique_by=lambda r: r[0],
)


@settings(
    max_examples=int(os.environ.get("KT_EXAMPLES", "6")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(values=rows)
def test_kartothek_reads_any_partition_values(
    kartothek: Kartothek, values: list[tuple[object, ...]]
) -> None:
    table = pa.Table.from_pylist(
        [dict(zip(KEYS, v, strict=True), n=pos) for pos, v in enumerate(values)], schema=SCHEMA
    )
    records = canonical_records(table)
    per_row = [[[(k, "==", r[k]) for k in KEYS]] for r in records]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        Dataset.create(LocalStore(root), "pv", table, partition_on=KEYS)
        results = kartothek.run(
            root,
            [
                {"op": "read", "uuid": "pv"},
                *[
                    {"op": "read", "uuid": "pv", "predicates": to_driver_predicates(p)}
                    for p in per_row
                ],
            ],
        )
    columns = SCHEMA.names
    assert rows_of_kartothek(results[0], columns, SCHEMA) == oracle(records, None, columns, SCHEMA)
    for predicates, result in zip(per_row, results[1:], strict=True):
        want = oracle(records, predicates, columns, SCHEMA)
        assert rows_of_kartothek(result, columns, SCHEMA) == want, predicates
        assert result["planned_partitions"] == 1, predicates
