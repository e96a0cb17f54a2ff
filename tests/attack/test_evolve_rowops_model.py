"""A model of a dataset under evolve_schema mixed with row operations and time travel.

Earlier oracles check predicates on a dataset written once (tests/adversarial), or one
operation after ``evolve_schema``. Here hypothesis runs random sequences of ``append``,
``evolve_schema`` (added columns of several types, widened integers/floats), ``delete_where``,
``update_where`` (partition moves included), ``upsert`` (update/delete/ignore), ``append`` and
``upsert`` with ``merge_schema``, ``build_index`` (on added columns too), ``compact``, ``restore``
(to versions before an evolution too) and GC with no retention against a pure-Python model: a
schema and a dict of rows per version. After each step the newest version, and a random older
one opened by ``Dataset.open(..., version=)``, must hold exactly the model's rows and schema;
``changes(since, until)`` must account for every key (kept + added - removed) and its added
rows must be rows of ``until``; versions GC expired must say so (VersionExpired).

Found: ``build_index`` on a column added by evolution raised a raw KeyError (files written
before it lack it; fixed in indexbuild.py, see test_evolve_build_index.py).

The files of one dataset then differ in physical type (int32 files under an int64 or double
column, float32 under double, files lacking an added column), so every step exercises the
per-file cast of readers, rewrites, compaction and the may-match statistics of old files.
Predicate semantics follow parquetry.dataset.predicates: SQL nulls, exact comparison across
int/float, NaN = NaN and above everything, -0.0 = 0.0.
"""

from __future__ import annotations

import datetime as dt
import math
import os
import shutil
import tempfile
from collections import Counter
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from parquetry.dataset import Dataset
from parquetry.errors import DatasetNotFound, InvalidArgument, ParquetryError, VersionExpired
from parquetry.store import LocalStore, MemoryStore, Store

Row = dict[str, Any]

_INT_RANGE = {
    pa.uint8(): (0, 255),
    pa.uint16(): (0, 2**16 - 1),
    pa.int16(): (-(2**15), 2**15 - 1),
    pa.int32(): (-(2**31), 2**31 - 1),
    pa.int64(): (-(2**63), 2**63 - 1),
}
#: Columns that may be widened, and the types each may become (lossless, evolve.widens).
_WIDEN = {
    pa.int32(): [pa.int64(), pa.float64()],
    pa.uint8(): [pa.uint16(), pa.int16(), pa.int32(), pa.float32()],
    pa.uint16(): [pa.int32(), pa.int64()],
    pa.int16(): [pa.int32(), pa.float32()],
    pa.float32(): [pa.float64()],
    pa.decimal128(9, 2): [pa.decimal128(18, 2)],
}
_ADDABLE = [
    pa.string(),
    pa.int32(),
    pa.float32(),
    pa.uint8(),
    pa.timestamp("us", tz="UTC"),
    pa.date32(),
    pa.decimal128(9, 2),
    pa.bool_(),
]
_TEXT = st.text(alphabet=st.sampled_from(["a", "b", "é", "\x00", "€", "𝄞", " ", "Z"]), max_size=3)
_PARTS = ["a", "b", "ü x", "a=b"]


def _values(t: pa.DataType) -> st.SearchStrategy[Any]:
    """Values of type ``t`` with its edges (nulls are added by the caller)."""
    if t in _INT_RANGE:
        lo, hi = _INT_RANGE[t]
        return st.one_of(st.sampled_from([lo, hi, 0, -1 if lo < 0 else 1]), st.integers(lo, hi))
    if pa.types.is_floating(t):
        width = 32 if t == pa.float32() else 64
        return st.one_of(
            st.sampled_from([0.0, -0.0, math.nan, math.inf, -math.inf, 1.5]),
            st.floats(width=width, allow_nan=False),
        )
    if pa.types.is_string(t):
        return _TEXT
    if pa.types.is_timestamp(t):
        return st.datetimes(
            min_value=dt.datetime(1900, 1, 1), max_value=dt.datetime(2200, 1, 1)
        ).map(lambda d: d.replace(tzinfo=dt.UTC))
    if pa.types.is_date(t):
        return st.dates(min_value=dt.date(1, 1, 1), max_value=dt.date(9999, 12, 31))
    if pa.types.is_decimal(t):
        top = Decimal(10) ** (t.precision - t.scale) - Decimal("0.01")
        return st.decimals(min_value=-top, max_value=top, places=2, allow_nan=False)
    if pa.types.is_boolean(t):
        return st.booleans()
    raise AssertionError(t)


def _nullable(t: pa.DataType) -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), _values(t))


def _sort_key(v: Any) -> tuple[int, Any]:
    # Spark's float order: NaN equals NaN and sorts above everything; -0.0 == 0.0.
    if isinstance(v, float) and math.isnan(v):
        return (1, 0)
    return (0, v)


def _matches(value: Any, op: str, lit: Any) -> bool:
    if op == "is null":
        return value is None
    if op == "is not null":
        return value is not None
    if value is None:
        return False
    a = _sort_key(value)
    if op == "in":
        return any(a == _sort_key(x) for x in lit if x is not None)
    if lit is None:
        return False
    b = _sort_key(lit)
    return {
        "==": a == b,
        "!=": a != b,
        "<": a < b,
        "<=": a <= b,
        ">": a > b,
        ">=": a >= b,
    }[op]


def _row_matches(row: Row, dnf: list[list[tuple[str, str, Any]]]) -> bool:
    return any(all(_matches(row[c], op, v) for c, op, v in conj) for conj in dnf)


def _norm(v: Any) -> Any:
    # Floats compared by repr: NaN equals NaN here, and the sign of zero must survive.
    if isinstance(v, float):
        return ("float", repr(v))
    return v


def _rows_of(table: pa.Table) -> list[Row]:
    rows = [{k: _norm(v) for k, v in r.items()} for r in table.to_pylist()]
    return sorted(rows, key=lambda r: r["k"])


class Model:
    """One version: its schema (name -> type, in order) and rows by key."""

    def __init__(self, schema: list[tuple[str, pa.DataType]], rows: dict[int, Row]) -> None:
        self.schema = schema
        self.rows = rows

    def copy(self) -> Model:
        return Model(list(self.schema), {k: dict(r) for k, r in self.rows.items()})

    def types(self) -> dict[str, pa.DataType]:
        return dict(self.schema)

    def arrow_schema(self) -> pa.Schema:
        return pa.schema([pa.field(n, t) for n, t in self.schema])

    def table(self, rows: list[Row]) -> pa.Table:
        return pa.Table.from_pylist(rows, schema=self.arrow_schema())

    def expected(self) -> list[Row]:
        rows = [{k: _norm(v) for k, v in r.items()} for r in self.rows.values()]
        return sorted(rows, key=lambda r: r["k"])


_INITIAL = [
    ("p", pa.string()),
    ("k", pa.int64()),
    ("n", pa.int32()),
    ("f", pa.float32()),
    ("s", pa.string()),
    ("u", pa.uint8()),
    ("d", pa.decimal128(9, 2)),
]


class EvolveRowOps(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.store: Store = self.make_store()
        self.ds: Dataset | None = None
        self.models: dict[int, Model] = {}
        self.model = Model(list(_INITIAL), {})
        self.next_key = 0
        self.added = 0

    def make_store(self) -> Store:
        return MemoryStore()

    # --- helpers ---------------------------------------------------------------------

    def _row(self, data: st.DataObject, key: int) -> Row:
        row: Row = {}
        for name, t in self.model.schema:
            if name == "p":
                row[name] = data.draw(st.sampled_from(_PARTS))
            elif name == "k":
                row[name] = key
            else:
                row[name] = data.draw(_nullable(t))
        return row

    def _record(self) -> None:
        assert self.ds is not None
        self.models[self.ds.version] = self.model.copy()

    def _predicate(self, data: st.DataObject) -> list[list[tuple[str, str, Any]]]:
        types = self.model.types()
        conjs = []
        for _ in range(data.draw(st.integers(1, 2))):
            conj = []
            for _ in range(data.draw(st.integers(1, 2))):
                col = data.draw(st.sampled_from([n for n in types if n != "k"] + ["k"]))
                t = types[col]
                if pa.types.is_boolean(t):
                    op = data.draw(st.sampled_from(["==", "!=", "is null"]))
                else:
                    op = data.draw(
                        st.sampled_from(
                            ["==", "!=", "<", "<=", ">", ">=", "in", "is null", "is not null"]
                        )
                    )
                existing = [r[col] for r in self.model.rows.values() if r[col] is not None]
                vals = _values(t) if col != "p" else st.sampled_from(_PARTS)
                if col == "k":
                    vals = st.integers(-1, self.next_key + 1)
                if existing:
                    vals = st.one_of(vals, st.sampled_from(existing))
                if pa.types.is_floating(t):
                    # An int literal on a float column (a widened int one): compared exactly.
                    vals = st.one_of(vals, st.sampled_from([0, 1, -1, 2**31, 2**53 + 1, 255]))
                if op == "in":
                    lit: Any = data.draw(st.lists(vals, min_size=1, max_size=3))
                elif op in ("is null", "is not null"):
                    lit = None
                else:
                    lit = data.draw(vals)
                conj.append((col, op, lit))
            conjs.append(conj)
        return conjs

    # --- rules -----------------------------------------------------------------------

    @initialize(data=st.data())
    def create(self, data: st.DataObject) -> None:
        rows = [self._row(data, self._key()) for _ in range(data.draw(st.integers(1, 4)))]
        indices = data.draw(st.sampled_from([(), ("s",), ("n",), ("s", "n")]))
        self.ds = Dataset.create(
            self.store, "m", self.model.table(rows), partition_on=["p"], secondary_indices=indices
        )
        self.model.rows = {r["k"]: r for r in rows}
        self._record()

    def _key(self) -> int:
        self.next_key += 1
        return self.next_key

    @rule(data=st.data())
    def append(self, data: st.DataObject) -> None:
        assert self.ds is not None
        rows = [self._row(data, self._key()) for _ in range(data.draw(st.integers(1, 3)))]
        self.ds = self.ds.append(self.model.table(rows))
        self.model.rows.update({r["k"]: r for r in rows})
        self._record()

    @rule(data=st.data())
    def evolve(self, data: st.DataObject) -> None:
        assert self.ds is not None
        add, widen = self._evolution(data)
        try:
            self.ds = self.ds.evolve_schema(add=add, widen=widen)
        except InvalidArgument:
            # Widening an indexed column to another index type is refused, nothing committed.
            assert any(c in self.ds.secondary_indices for c in widen)
            assert Dataset.open(self.store, "m").version == self.ds.version
            return
        self._evolve_model(add, widen)
        self._record()

    def _evolution(self, data: st.DataObject) -> tuple[list[pa.Field], dict[str, pa.DataType]]:
        types = self.model.types()
        widenable = [n for n, t in types.items() if t in _WIDEN and n not in ("p", "k")]
        widen: dict[str, pa.DataType] = {}
        for name in (
            data.draw(st.lists(st.sampled_from(widenable), unique=True, max_size=2))
            if widenable
            else []
        ):
            widen[name] = data.draw(st.sampled_from(_WIDEN[types[name]]))
        add = []
        if not widen or data.draw(st.booleans()):
            self.added += 1
            add.append(pa.field(f"c{self.added}", data.draw(st.sampled_from(_ADDABLE))))
        return add, widen

    def _evolve_model(self, add: list[pa.Field], widen: dict[str, pa.DataType]) -> None:
        self.model.schema = [(n, widen.get(n, t)) for n, t in self.model.schema] + [
            (f.name, f.type) for f in add
        ]
        for r in self.model.rows.values():
            for n, t in widen.items():
                if r[n] is not None and pa.types.is_floating(t) and isinstance(r[n], int):
                    r[n] = float(r[n])
            for f in add:
                r[f.name] = None

    @rule(data=st.data(), how=st.sampled_from(["append", "upsert"]))
    def write_merging_schema(self, data: st.DataObject, how: str) -> None:
        """append / upsert with merge_schema=True: data in an evolved schema (new columns,
        widened types), the evolution committed with the rows."""
        assert self.ds is not None
        add, widen = self._evolution(data)
        if any(c in self.ds.secondary_indices for c in widen):
            return  # refused like evolve_schema (tested there)
        old = self.model.copy()
        self._evolve_model(add, widen)
        existing = sorted(self.model.rows) if how == "upsert" else []
        keys = (
            set(data.draw(st.lists(st.sampled_from(existing), max_size=2))) if existing else set()
        )
        keys |= {self._key() for _ in range(data.draw(st.integers(1, 2)))}
        rows = [self._row(data, k) for k in sorted(keys)]
        table = self.model.table(rows)
        try:
            if how == "append":
                self.ds = self.ds.append(table, merge_schema=True)
            else:
                self.ds = self.ds.upsert(table, on=["k"], merge_schema=True)
        except Exception:
            self.model = old
            raise
        self.model.rows.update({r["k"]: r for r in rows})
        self._record()

    @rule(data=st.data())
    def delete_where(self, data: st.DataObject) -> None:
        assert self.ds is not None
        dnf = self._predicate(data)
        before = self.ds.version
        self.ds = self.ds.delete_where(dnf)
        gone = [k for k, r in self.model.rows.items() if _row_matches(r, dnf)]
        for k in gone:
            del self.model.rows[k]
        if self.ds.version != before:
            self._record()

    @rule(data=st.data())
    def update_where(self, data: st.DataObject) -> None:
        assert self.ds is not None
        dnf = self._predicate(data)
        types = self.model.types()
        col = data.draw(st.sampled_from([n for n in types if n != "k"]))
        value = data.draw(st.sampled_from(_PARTS) if col == "p" else _nullable(types[col]))
        before = self.ds.version
        self.ds = self.ds.update_where(dnf, set={col: value})
        for r in self.model.rows.values():
            if _row_matches(r, dnf):
                r[col] = value
        if self.ds.version != before:
            self._record()

    @rule(data=st.data())
    def upsert(self, data: st.DataObject) -> None:
        assert self.ds is not None
        existing = sorted(self.model.rows)
        keys = (
            set(data.draw(st.lists(st.sampled_from(existing), max_size=3))) if existing else set()
        )
        keys |= {self._key() for _ in range(data.draw(st.integers(0, 2)))}
        if not keys:
            return
        rows = [self._row(data, k) for k in sorted(keys)]
        when_matched = data.draw(st.sampled_from(["update", "delete", "ignore"]))
        before = self.ds.version
        self.ds = self.ds.upsert(self.model.table(rows), on=["k"], when_matched=when_matched)
        for r in rows:
            if r["k"] in self.model.rows:
                if when_matched == "update":
                    self.model.rows[r["k"]] = r
                elif when_matched == "delete":
                    del self.model.rows[r["k"]]
            else:
                self.model.rows[r["k"]] = r
        if self.ds.version != before:
            self._record()

    @rule(binary=st.sampled_from([True, False, "auto"]), sort=st.booleans())
    def compact(self, binary: Any, sort: bool) -> None:
        assert self.ds is not None
        before = self.ds.version
        self.ds = self.ds.compact(binary_copy=binary, sort_by="k" if sort else None)
        if self.ds.version != before:
            self._record()

    @rule(data=st.data())
    def restore(self, data: st.DataObject) -> None:
        assert self.ds is not None
        older = [v for v in self.models if v < self.ds.version]
        if not older:
            return
        v = data.draw(st.sampled_from(older))
        self.ds = self.ds.restore(v)
        self.model = self.models[v].copy()
        self._record()

    @rule(data=st.data())
    def build_index(self, data: st.DataObject) -> None:
        assert self.ds is not None
        types = self.model.types()
        free = [
            n
            for n, t in types.items()
            if n not in ("p", *self.ds.secondary_indices) and not pa.types.is_boolean(t)
        ]
        if not free:
            return
        col = data.draw(st.sampled_from(free))
        self.ds = self.ds.build_index(col)
        self._record()

    @rule()
    def gc(self) -> None:
        """GC with no retention: versions it expired must say so; the rest read as before."""
        assert self.ds is not None
        self.ds.garbage_collect(retention=0)
        for v in sorted(self.models):
            try:
                Dataset.open(self.store, "m", version=v).read()
            except (VersionExpired, DatasetNotFound):
                assert v != self.ds.version
                del self.models[v]
        # versions() lists exactly the versions that still open (no-op writes made none).
        listed = [info.number for info in self.ds.versions()]
        assert set(self.models) <= set(listed), (sorted(self.models), listed)
        for v in set(listed) - set(self.models):
            Dataset.open(self.store, "m", version=v).read()  # a no-op version: still readable
        with pytest.raises(ParquetryError):
            self.ds.restore(-1)

    @rule(data=st.data())
    def changes(self, data: st.DataObject) -> None:
        """keys(until) = keys(since) - keys(removed files) + keys(added files), as multisets,
        and every added row is a row of ``until``."""
        versions = sorted(self.models)
        if len(versions) < 2:
            return
        since, until = sorted(
            data.draw(st.lists(st.sampled_from(versions), min_size=2, max_size=2, unique=True))
        )
        assert self.ds is not None
        try:
            feed = self.ds.changes(since, until)
        except VersionExpired:
            return  # a version between them expired (GC)
        added = feed.read_added()
        removed = feed.read_added(columns=["k"], files=feed.removed)
        keys = Counter(list(self.models[since].rows))
        keys.subtract(Counter(removed.column("k").to_pylist()))
        keys.update(Counter(added.column("k").to_pylist()))
        assert +keys == Counter(list(self.models[until].rows)), (since, until)
        want = {r["k"]: r for r in self.models[until].expected()}
        for r in _rows_of(added):
            assert r == want[r["k"]], (since, until, r)
        if feed.appends_only:
            assert set(self.models[since].rows) <= set(self.models[until].rows)

    # --- checks ----------------------------------------------------------------------

    def _check(self, ds: Dataset, model: Model) -> None:
        got = [(f.name, f.type) for f in ds.schema]
        assert got == model.schema, (ds.version, got, model.schema)
        assert _rows_of(ds.read()) == model.expected(), ds.version

    @invariant()
    def newest_matches(self) -> None:
        if self.ds is None:
            return
        self._check(Dataset.open(self.store, "m"), self.model)

    @rule(data=st.data())
    def time_travel(self, data: st.DataObject) -> None:
        v = data.draw(st.sampled_from(sorted(self.models)))
        self._check(Dataset.open(self.store, "m", version=v), self.models[v])

    @rule(data=st.data())
    def read_with_predicate(self, data: st.DataObject) -> None:
        assert self.ds is not None
        dnf = self._predicate(data)
        expect = [
            {k: _norm(v) for k, v in r.items()}
            for r in self.model.rows.values()
            if _row_matches(r, dnf)
        ]
        assert _rows_of(self.ds.read(predicates=dnf)) == sorted(expect, key=lambda r: r["k"]), dnf


# A12_EXPLORE=N: a longer, random, unshrunk run (for hunting, not for the suite).
_EXPLORE = int(os.environ.get("A12_EXPLORE", "0"))
EvolveRowOps.TestCase.settings = settings(
    max_examples=_EXPLORE or 15,
    stateful_step_count=int(os.environ.get("A12_STEPS", "10")),
    deadline=None,
    derandomize=not _EXPLORE,
    phases=[Phase.generate] if _EXPLORE else list(Phase),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
test_evolve_rowops_model = EvolveRowOps.TestCase


class EvolveRowOpsLocal(EvolveRowOps):
    """The same on local disk (partition directories named 'p=ü x', 'p=a=b', renames)."""

    def make_store(self) -> Store:
        self.root = tempfile.mkdtemp(prefix="a12-model-")
        return LocalStore(self.root)

    def teardown(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


EvolveRowOpsLocal.TestCase.settings = settings(
    EvolveRowOps.TestCase.settings, max_examples=_EXPLORE or 4
)
test_evolve_rowops_model_local = EvolveRowOpsLocal.TestCase
