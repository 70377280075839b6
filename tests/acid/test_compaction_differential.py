"""Differential test: random histories written by the Hive simulator, compacted, compared as
multisets with the rows the simulator says a correct reader returns.

Histories mix inserts, deletes, updates (delete + insert), several statements per write,
aborted and still-open writes, original files with copies, repeated deletes of one row, minor
and major compactions, and schema evolution between writes (a rename, an added column, an int
column widened to bigint: old files keep their schema, and the simulator's expected rows follow
Hive's by-position rules, trinodb/trino#6479); each is read with the current write-id list and
with one captured earlier (which makes compacted ranges partly valid).
"""

from __future__ import annotations

import collections
import decimal
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.orc as pa_orc
import pyarrow.parquet as pq
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from airflow_provider_acid.acid.hive_types import HiveType
from airflow_provider_acid.acid.names import parse_acid_dir
from airflow_provider_acid.acid.read_view import NotEnoughHistoryError
from airflow_provider_acid.engine.compaction import compact_table
from airflow_provider_acid.engine.options import CompactionOptions
from airflow_provider_acid.testing.acid_layout import (
    delete_delta_dir_name,
    write_acid_version_file,
)
from airflow_provider_acid.testing.orc_writer import write_acid_file
from airflow_provider_acid.testing.table_writer import AcidTableWriter
from airflow_provider_acid.testing.write_history import WriteState

COLUMNS = [
    ("id", "bigint"),
    ("name", "string"),
    ("price", "decimal(10,2)"),
    ("tags", "array<string>"),
    ("qty", "int"),
]

operations = st.one_of(
    st.tuples(st.just("insert"), st.integers(1, 12), st.integers(0, 1)),
    st.tuples(st.just("delete"), st.integers(2, 5), st.integers(0, 4)),
    st.tuples(st.just("update"), st.integers(2, 5), st.integers(0, 4)),
    st.tuples(st.just("statements"), st.integers(1, 6), st.integers(2, 4)),
    st.tuples(st.just("aborted"), st.integers(1, 5), st.integers(0, 1)),
    st.tuples(st.just("open"), st.integers(1, 5), st.integers(0, 1)),
    st.tuples(st.just("repeat_delete"), st.integers(0, 50)),
    st.tuples(st.just("minor")),
    st.tuples(st.just("major")),
    st.tuples(st.just("capture")),
    st.tuples(st.just("stale_reader"), st.integers(1, 5)),
    st.tuples(st.just("evolve")),
)

#: The schema changes ``evolve`` applies, in order: ALTER TABLE ... CHANGE name label string,
#: ADD COLUMNS (note string), CHANGE qty qty bigint.
EVOLUTIONS = ("rename", "add", "widen")


class History:
    """Applies generated operations to a simulated table, handing out fresh ids."""

    def __init__(self, table: AcidTableWriter, partitioned: bool) -> None:
        self.table = table
        self.partitioned = partitioned
        self.next_id = 0
        self.captured: str | None = None
        self.evolutions = 0
        self.name_column = "name"

    def evolve(self) -> None:
        """The next schema change of :data:`EVOLUTIONS` (none once all are applied)."""
        if self.evolutions >= len(EVOLUTIONS):
            return
        step = EVOLUTIONS[self.evolutions]
        self.evolutions += 1
        note(f"schema change: {step}")
        if step == "rename":
            self.table.rename_column("name", "label")
            self.name_column = "label"
        elif step == "add":
            self.table.add_columns([("note", "string")])
        else:
            self.table.change_column_type("qty", "bigint")

    @property
    def columns(self) -> list[str]:
        """The table's columns now, then the partition column."""
        names = [c.name for c in self.table.columns]
        return names + (["p"] if self.partitioned else [])

    @property
    def schema(self) -> list[tuple[str, str]] | None:
        """The table's columns as a metastore gives them, once they changed (before that the
        reader takes them from the newest file)."""
        if not self.evolutions:
            return None
        return [(c.name, str(c.type)) for c in self.table.columns]

    def rows(self, count: int, partition: int) -> list[dict]:
        out = []
        for _ in range(count):
            i = self.next_id
            self.next_id += 1
            wide = "qty" in self.table.arrow_schema.names and pa.types.is_int64(
                self.table.arrow_schema.field("qty").type
            )
            row = {
                "id": i,
                self.name_column: None if i % 5 == 4 else f"n{i}",
                "price": decimal.Decimal(i * 7 % 1000) / 100,
                "tags": None if i % 3 == 2 else [f"t{i % 4}"] * (i % 3),
                "qty": None if i % 6 == 5 else (i << 33 if wide else i % 7 - 3),
            }
            if "note" in self.table.arrow_schema.names:
                row["note"] = f"note{i}"
            if self.partitioned:
                row["p"] = partition
            out.append(row)
        return out

    def apply(self, op: tuple) -> None:
        kind, *args = op
        t = self.table
        if kind == "insert":
            t.insert(self.rows(args[0], args[1]))
        elif kind == "delete":
            t.delete(lambda r, m=args[0], k=args[1]: r["id"] % m == k % m)
        elif kind == "update":
            t.update(
                lambda r, m=args[0], k=args[1]: r["id"] % m == k % m,
                {self.name_column: f"u{args[1]}"},
            )
        elif kind == "statements":
            with t.begin() as txn:
                txn.insert(self.rows(args[0], 0))
                txn.delete(lambda r, m=args[1]: r["id"] % m == 1)
                txn.update(lambda r, m=args[1]: r["id"] % m == 0, {"price": decimal.Decimal(1)})
        elif kind == "aborted":
            txn = t.begin()
            txn.insert(self.rows(args[0], args[1]))
            txn.delete(lambda r: r["id"] % 2 == 0)
            txn.abort()
        elif kind == "open":
            t.begin().insert(self.rows(args[0], args[1]))  # never committed
        elif kind == "repeat_delete":
            self.repeat_a_delete(args[0])
        elif kind == "minor":
            t.compact_minor()
        elif kind == "major":
            t.compact_major()
        elif kind == "capture":
            self.captured = t.valid_write_ids()
        elif kind == "evolve":
            self.evolve()
        elif kind == "stale_reader":
            # a reader's list taken before writes that a minor compaction then merges with
            # older ones: the compacted range is only partly valid for that reader
            self.captured = t.valid_write_ids()
            t.insert(self.rows(args[0], 1))
            t.delete(lambda r: r["id"] % 3 == 0)
            t.compact_minor()

    def repeat_a_delete(self, pick: int) -> None:
        """A new committed write whose delete delta repeats an earlier committed delete."""
        t = self.table
        candidates = []
        for relative in t.list_files():
            if relative.count("/") < 1:
                continue  # an original file
            *parent, folder, name = relative.split("/")
            acid_dir = parse_acid_dir(folder)
            if not (name.startswith("bucket_") and acid_dir and folder.startswith("delete")):
                continue
            single = acid_dir.min_write_id == acid_dir.max_write_id
            if single and t.write_state(acid_dir.max_write_id) is not WriteState.COMMITTED:
                continue
            candidates.append((parent, name, relative))
        if not candidates:
            return
        parent, name, relative = candidates[pick % len(candidates)]
        events = pa_orc.read_table(f"{t.path}/{relative}")
        with t.begin() as txn:
            write = txn.write_id
        events = events.set_column(
            events.schema.get_field_index("currentTransaction"),
            "currentTransaction",
            pa.array([write] * events.num_rows, pa.int64()),
        )
        folder = "/".join([t.path, *parent, delete_delta_dir_name(write, write, 0)])
        # the repeated file keeps its own row type (the table's columns may have changed since)
        row_type = HiveType.from_arrow(events.schema.field("row").type)
        write_acid_file(t.fs, f"{folder}/{name}", events, row_type)
        write_acid_version_file(t.fs, folder)


def as_multiset(table: pa.Table, columns: list[str]) -> collections.Counter:
    assert table.column_names == columns or not table.num_rows, (table.column_names, columns)
    rows = table.select(columns).to_pylist()
    return collections.Counter(
        tuple(tuple(v) if isinstance(v, list) else v for v in (r[c] for c in columns)) for r in rows
    )


def note(text: str) -> None:
    """A hypothesis statistics event (shown with --hypothesis-show-statistics)."""
    try:
        event(text)
    except InvalidArgument:
        pass  # not inside a hypothesis test


def compacted(
    run: History, out: Path, write_ids: str, totals: dict | None = None
) -> pa.Table | None:
    """The snapshot's rows read back from its files; None if the list is too old to read.
    ``totals``, if given, receives the snapshot's row accounting."""
    try:
        result = compact_table(
            run.table.root,
            str(out),
            write_ids=write_ids,
            options=CompactionOptions(
                batch_rows=7, row_group_rows=5, max_workers=1, schema=run.schema
            ),
        )
    except NotEnoughHistoryError:
        note("captured list older than the oldest base")
        return None  # the captured list predates the oldest base kept: Hive refuses it too
    counts = result.totals()
    if totals is not None:
        totals.update(counts)
    note(f"rows of invalid writes dropped: {counts['rows_invalid'] > 0}")
    note(f"rows deleted: {counts['rows_deleted'] > 0}")
    parts = [pq.read_table(p) for p in result.file_paths()]
    assert result.rows_written == sum(p.num_rows for p in parts)
    if not parts:
        return pa.table({c: pa.array([], pa.null()) for c in run.columns})
    return pa.concat_tables(parts)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    partitioned=st.booleans(),
    buckets=st.integers(1, 3),
    bucket_by_id=st.booleans(),
    originals=st.one_of(st.none(), st.tuples(st.integers(1, 9), st.integers(0, 2))),
    history=st.lists(operations, min_size=1, max_size=10),
)
def test_compaction_equals_the_reference(partitioned, buckets, bucket_by_id, originals, history):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        table = AcidTableWriter(
            str(root / "t"),
            COLUMNS,
            [("p", "int")] if partitioned else [],
            buckets=buckets,
            bucket_by="id" if bucket_by_id else None,
            stripe_rows=4,
        )
        run = History(table, partitioned)
        if originals is not None:
            count, copies = originals
            rows = run.rows(count, 0)
            for row in rows:
                row.pop("p", None)
            table.add_original_files(
                rows,
                bucket=count % buckets,
                copies=copies,
                partition={"p": 0} if partitioned else None,
            )
        for op in history:
            run.apply(op)

        views = [(table.valid_write_ids(), None)]
        if run.captured is not None:
            views.append((run.captured, run.captured))
        for number, (write_ids, snapshot) in enumerate(views):
            expected = table.expected_rows(snapshot)
            got = compacted(run, root / f"out{number}", write_ids)
            if got is None:
                assert snapshot is not None, "the current list must always be readable"
                continue
            assert as_multiset(got, run.columns) == as_multiset(expected, run.columns), (
                write_ids,
                history,
            )


def test_decimal_and_null_columns_survive_a_round_trip(tmp_path):
    """A fixed history of every operation kind, as a quick non-random check."""
    table = AcidTableWriter(str(tmp_path / "t"), COLUMNS, [("p", "int")], buckets=2, stripe_rows=3)
    run = History(table, True)
    for op in [
        ("insert", 10, 0),
        ("insert", 6, 1),
        ("delete", 3, 0),
        ("update", 4, 1),
        ("statements", 5, 3),
        ("aborted", 4, 1),
        ("stale_reader", 3),
        ("open", 3, 0),
        ("repeat_delete", 1),
        ("minor",),
        ("delete", 5, 2),
    ]:
        run.apply(op)
    for write_ids, snapshot in [(table.valid_write_ids(), None), (run.captured, run.captured)]:
        totals: dict = {}
        got = compacted(run, tmp_path / f"out-{snapshot is None}", write_ids, totals)
        expected = table.expected_rows(snapshot)
        assert totals["rows_deleted"] > 0
        if snapshot is not None:  # the stale reader sees a partly valid compacted range
            assert totals["rows_invalid"] > 0
        assert as_multiset(got, run.columns) == as_multiset(expected, run.columns)
        assert (
            pc.sum(pc.is_null(got["name"])).as_py() == pc.sum(pc.is_null(expected["name"])).as_py()
        )


def test_schema_changes_between_writes_follow_hives_rules(tmp_path):
    """A rename, an added column and int to bigint between writes, with deletes, updates and
    compactions around them: the snapshot equals the simulator's rows by Hive's rules (ORC ACID
    by position, trinodb/trino#6479 and #6316: old values under the new name, the added column
    null in old rows, old ints widened), and a few rows are checked by value too."""
    table = AcidTableWriter(str(tmp_path / "t"), COLUMNS, [("p", "int")], buckets=2, stripe_rows=3)
    run = History(table, True)
    for op in [
        ("insert", 8, 0),
        ("delete", 4, 1),
        ("evolve",),  # name -> label
        ("insert", 5, 1),
        ("update", 3, 0),
        ("minor",),
        ("evolve",),  # + note
        ("insert", 4, 0),
        ("capture",),
        ("evolve",),  # qty int -> bigint
        ("insert", 3, 1),
        ("delete", 5, 3),
    ]:
        run.apply(op)
    assert [c.name for c in table.columns] == ["id", "label", "price", "tags", "qty", "note"]
    for write_ids, snapshot in [(table.valid_write_ids(), None), (run.captured, run.captured)]:
        got = compacted(run, tmp_path / f"out-{snapshot is None}", write_ids)
        expected = table.expected_rows(snapshot)
        assert as_multiset(got, run.columns) == as_multiset(expected, run.columns)
    got = compacted(run, tmp_path / "out-values", table.valid_write_ids())
    assert got.schema.field("qty").type == pa.int64()
    by_id = {r["id"]: r for r in got.to_pylist()}
    assert 0 not in by_id or by_id[0]["label"] == "u0"  # updated after the rename
    assert by_id[2]["label"] == "n2" and by_id[2]["note"] is None  # written before both
    assert by_id[2]["qty"] == -1  # an int (2 % 7 - 3) written before the widening
    assert by_id[10]["label"] == "n10" and by_id[10]["note"] is None
    assert by_id[14]["note"] == "note14" and by_id[14]["qty"] == 14 % 7 - 3
    assert by_id[19]["qty"] == 19 << 33  # written as bigint
    assert {1, 5, 18}.isdisjoint(by_id)  # deleted
    table.compact_major()  # rewrites everything with the current columns
    after = compacted(run, tmp_path / "out-major", table.valid_write_ids())
    assert as_multiset(after, run.columns) == as_multiset(table.expected_rows(), run.columns)
