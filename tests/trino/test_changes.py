"""The change feed on tables Trino wrote (issue 22): INSERT, UPDATE, MERGE (its delete, update
and insert branches) and DELETE into a partitioned and a bucketed table, read by name.

Trino has no time travel on Hive tables, so its ``SELECT *`` is recorded after every write.
For every pair of write ids A < B of the history, the feed ``(A, B]`` keyed on ``id`` applied
to the provider's snapshot at A (read by name with the write-id list at A, itself equal to
Trino's SELECT at A) gives exactly Trino's SELECT at B, as multisets of every column. An UPDATE
of a key shows as an update_preimage/update_postimage pair holding the values Trino had before
and after (also one moving the row to another partition of the partitioned table: paired
across slices before the commit); MERGE's update branch likewise, its insert branch as
inserts, its delete branch as deletes. The CLI (``airflow-acid changes --key id --json``) is
run once and agrees.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from trino_helpers import Schema, Trino, provider_rows, trino_rows

from airflow_provider_acid.acid.writeids import parse_write_id_list
from airflow_provider_acid.cli import main
from airflow_provider_acid.engine.change_feed import bounded_write_ids
from airflow_provider_acid.engine.change_rows import CHANGE_TYPES
from airflow_provider_acid.engine.change_runs import compute_changes
from airflow_provider_acid.metastore import MetastoreClient, ReadTransaction, open_table

COLUMNS = ["id", "name", "qty", "part"]
#: The history's writes; ``{t}`` is the table. Write 2 updates ids 0, 5, .., 35; write 3's
#: MERGE deletes 30, 32, .., 38, updates 31, 33, .., 39 and inserts 40 .. 49.
WRITES = (
    "INSERT INTO {t} SELECT id, 'n' || CAST(id AS varchar), CAST(id AS integer), "
    "'p' || CAST(id % 3 AS varchar) FROM UNNEST(sequence(0, 39)) AS s(id)",
    "UPDATE {t} SET qty = qty + 100, name = 'updated' WHERE id % 5 = 0",
    "MERGE INTO {t} t USING (SELECT id FROM UNNEST(sequence(30, 49)) AS s(id)) s "
    "ON t.id = s.id WHEN MATCHED AND s.id % 2 = 0 THEN DELETE "
    "WHEN MATCHED THEN UPDATE SET qty = -1, name = 'merged' "
    "WHEN NOT MATCHED THEN INSERT VALUES (s.id, 'new', CAST(s.id AS integer), "
    "'p' || CAST(s.id % 3 AS varchar))",
    "DELETE FROM {t} WHERE id BETWEEN 10 AND 14",
    "INSERT INTO {t} VALUES (100, 'late', 1, 'p1'), (101, 'late', 2, 'p2')",
    "UPDATE {t} SET qty = 7 WHERE id IN (1, 2, 100)",
    "UPDATE {t} SET part = 'moved', qty = 8 WHERE id IN (3, 4)",  # write 7
)
MOVED = {3, 4}
UPDATED = {i for i in range(40) if i % 5 == 0}
MERGE_DELETED = set(range(30, 40, 2))
MERGE_UPDATED = set(range(31, 40, 2))
MERGE_INSERTED = set(range(40, 50))
TABLES = {
    "partitioned": {"partitioned_by": ["'part'"]},
    "bucketed": {"bucketed_by": ["'id'"], "bucket_count": 4},
}


@dataclass
class History:
    """A table Trino wrote, its write ids after each write (0 first) and Trino's SELECT then."""

    schema: Schema
    name: str
    qualified: str
    write_ids: list[int] = field(default_factory=list)
    selects: dict[int, list[list[Any]]] = field(default_factory=dict)

    def by_id(self, write_id: int) -> dict[int, tuple]:
        return {r[0]: tuple(r) for r in self.selects[write_id]}


def _high_watermark(trino: Trino, hive_name: str) -> int:
    with MetastoreClient(trino.metastore_uri) as client:
        listed = open_table(client, hive_name).write_ids
    return parse_write_id_list(listed).high_watermark


@pytest.fixture(scope="module", params=sorted(TABLES))
def history(request, trino: Trino, schema: Schema) -> History:
    kind = request.param
    name = f"feed_{kind}"
    qualified = schema.create(
        name, "id bigint, name varchar, qty integer, part varchar", **TABLES[kind]
    )
    made = History(schema, name, qualified, [0], {0: []})
    for statement in WRITES:
        trino.sql(statement.format(t=qualified))
        write_id = _high_watermark(trino, schema.hive_name(name))
        assert write_id == made.write_ids[-1] + 1  # one write id per statement
        made.write_ids.append(write_id)
        made.selects[write_id] = trino.sql(f"SELECT {', '.join(COLUMNS)} FROM {qualified}")
    return made


def _feeds(
    history: History, tmp: Path, key: tuple[str, ...] = ("id",), delete_values: bool = True
) -> dict:
    """Every feed (A, B] of the history, by name in one read transaction, and the snapshots at
    every A (each the provider's compaction with the write-id list at A)."""
    uri = history.schema.trino.metastore_uri
    feeds, snapshots = {}, {}
    with ReadTransaction(uri) as txn, MetastoreClient(uri) as client:
        source = open_table(client, history.schema.hive_name(history.name), current_txn=txn.txn_id)
        listed = parse_write_id_list(source.write_ids)
        for a in history.write_ids:
            at_a, _ = bounded_write_ids(listed, a, 0)
            out = tmp / f"snapshot_{a}"
            history.schema.compact_by_name(history.name, out, write_ids=at_a)
            snapshots[a] = history.schema.read_output(out)
            for b in history.write_ids:
                if b > a:
                    out = tmp / f"feed_{a}_{b}"
                    feed = compute_changes(
                        source, str(out), from_write_id=a, to_write_id=b, key=key,
                        delete_values=delete_values,
                    )  # fmt: skip
                    feeds[a, b] = (feed, _feed_rows(feed))
    return {"feeds": feeds, "snapshots": snapshots}


def _feed_rows(feed: Any) -> pa.Table:
    tables = [pq.read_table(p) for p in feed.result.file_paths()] if feed.result else []
    return pa.concat_tables(tables) if tables else pa.table({})


@pytest.fixture(scope="module")
def feeds(history: History, tmp_path_factory: pytest.TempPathFactory) -> dict:
    return _feeds(history, tmp_path_factory.mktemp(f"feeds_{history.name}"))


def _types(table: pa.Table) -> list[pa.DataType]:
    return [table.schema.field(c).type for c in COLUMNS]


def _apply(at_a: pa.Table, changes: pa.Table) -> Counter:
    """The snapshot's rows with the feed applied in ``_change_ordinal`` order (every removal
    of a row the table holds)."""
    state = _rows(at_a)
    if not changes.num_rows:
        return state
    ordered = changes.sort_by("_change_ordinal")
    kinds = ordered.column("_change_type").to_pylist()
    for kind, row in zip(kinds, provider_rows_list(ordered), strict=True):
        if kind in ("insert", "update_postimage"):
            state[row] += 1
        else:
            assert state[row] > 0, f"the feed removes a row the table does not hold: {row}"
            state[row] -= 1
    return +state


def _rows(table: pa.Table) -> Counter:
    return provider_rows(table, COLUMNS) if table.num_rows else Counter()


def provider_rows_list(table: pa.Table) -> list[tuple]:
    """Each row's canonical form, in the table's order."""
    rows = []
    for i in range(table.num_rows):
        (row,) = provider_rows(table.slice(i, 1), COLUMNS)
        rows.append(row)
    return rows


def test_every_feed_applied_to_the_snapshot_at_a_gives_trinos_select_at_b(history, feeds):
    checked = 0
    for (a, b), (feed, changes) in feeds["feeds"].items():
        at_a = feeds["snapshots"][a]
        types = _types(at_a) if at_a.num_rows else _types(feeds["snapshots"][b])
        assert _rows(at_a) == trino_rows(history.selects[a], types), a
        assert _apply(at_a, changes) == trino_rows(history.selects[b], types), (a, b)
        counts = Counter(changes.column("_change_type").to_pylist()) if changes.num_rows else {}
        assert feed.to_dict()["counts"] == {t: counts.get(t, 0) for t in CHANGE_TYPES}
        if changes.num_rows:
            commits = set(changes.column("_commit_write_id").to_pylist())
            assert commits <= set(range(a + 1, b + 1)), (a, b, commits)
        checked += 1
    assert checked == len(history.write_ids) * (len(history.write_ids) - 1) // 2


def _by_type(changes: pa.Table) -> dict[str, dict[int, tuple]]:
    out: dict[str, dict[int, tuple]] = {t: {} for t in CHANGE_TYPES}
    for row in changes.select([*COLUMNS, "_change_type"]).to_pylist():
        values = tuple(row[c] for c in COLUMNS)
        assert values[0] not in out[row["_change_type"]], f"key {values[0]} twice: {row}"
        out[row["_change_type"]][values[0]] = values
    return out


def test_an_update_is_a_pre_and_post_image_pair_with_trinos_values(history, feeds):
    _, changes = feeds["feeds"][1, 2]
    got = _by_type(changes)
    before, after = history.by_id(1), history.by_id(2)
    assert not got["insert"] and not got["delete"]
    assert set(got["update_preimage"]) == set(got["update_postimage"]) == UPDATED
    for k in UPDATED:
        assert got["update_preimage"][k] == before[k]
        assert got["update_postimage"][k] == after[k]
        assert after[k][1:3] == ("updated", before[k][2] + 100)


def test_merge_branches_show_as_delete_update_pair_and_insert(history, feeds):
    _, changes = feeds["feeds"][2, 3]
    got = _by_type(changes)
    before, after = history.by_id(2), history.by_id(3)
    assert set(got["delete"]) == MERGE_DELETED
    assert set(got["update_preimage"]) == set(got["update_postimage"]) == MERGE_UPDATED
    assert set(got["insert"]) == MERGE_INSERTED
    for k in MERGE_DELETED:
        assert got["delete"][k] == before[k] and k not in after
    for k in MERGE_UPDATED:
        assert got["update_preimage"][k] == before[k]
        assert got["update_postimage"][k] == after[k] and after[k][1:3] == ("merged", -1)
    for k in MERGE_INSERTED:
        assert got["insert"][k] == after[k] and k not in before


def test_without_a_key_an_update_is_a_delete_and_an_insert(history, tmp_path):
    uri = history.schema.trino.metastore_uri
    with MetastoreClient(uri) as client:
        source = open_table(client, history.schema.hive_name(history.name))
        feed = compute_changes(source, str(tmp_path / "feed"), from_write_id=1, to_write_id=2)
    got = _by_type(_feed_rows(feed))
    assert set(got["delete"]) == set(got["insert"]) == UPDATED
    assert not got["update_preimage"] and not got["update_postimage"]


def test_an_update_moving_a_row_to_another_partition_is_a_pair(history, feeds):
    """In the bucketed table ``part`` is a column. In the partitioned table the row moves to
    another partition: its delete and its insert are computed in two slices, and paired before
    the commit (``change_pairs``)."""
    _, changes = feeds["feeds"][6, 7]
    got = _by_type(changes)
    before, after = history.by_id(6), history.by_id(7)
    assert all(after[k][2:] == (8, "moved") for k in MOVED)
    assert not got["delete"] and not got["insert"]
    assert set(got["update_preimage"]) == set(got["update_postimage"]) == MOVED
    for k in MOVED:
        assert got["update_preimage"][k] == before[k]
        assert got["update_postimage"][k] == after[k]


def test_the_cli_gives_the_librarys_feed(history, feeds, tmp_path, capsys):
    out = tmp_path / "cli"
    # in this process: a `changes` process aborts now and then at its exit, after its output
    code = main(
        ["changes", "--metastore", history.schema.trino.metastore_uri, "--table",
         history.schema.hive_name(history.name), "--from-write-id", "1", "--to-write-id", "3",
         "--key", "id", "--out", str(out), "--json"]
    )  # fmt: skip
    captured = capsys.readouterr()
    assert code == 0, captured.err
    printed = json.loads(captured.out)
    feed, changes = feeds["feeds"][1, 3]
    assert printed["format"] == "airflow-acid/changes"
    assert (printed["from_write_id"], printed["to_write_id"]) == (1, 3)
    assert printed["counts"] == feed.to_dict()["counts"]
    assert printed["counts"]["update_postimage"] == len(UPDATED) + len(MERGE_UPDATED)
    files = [Path(printed["out"], f) for f in printed["files"]]  # an absolute path stays
    cli_rows = pa.concat_tables([pq.read_table(f) for f in files])
    assert provider_rows(cli_rows, [*COLUMNS, "_change_type"]) == provider_rows(
        changes, [*COLUMNS, "_change_type"]
    )


def test_a_feed_without_delete_values_is_the_feed_without_base_values(history, feeds, tmp_path):
    """Every feed (A, B] again without the deleted rows' values: the keyed feed's changes with
    its pairs as deletes and inserts, the same identities, writes and inserted rows; a delete
    keeps its values only where the range inserted the row (and its partition's always)."""
    lean = _feeds(history, tmp_path, key=(), delete_values=False)["feeds"]
    unpaired = {"update_preimage": "delete", "update_postimage": "insert"}
    identity = ["_acid_original_write_id", "_acid_bucket", "_acid_row_id"]
    blanked = 0
    partitioned = history.name.endswith("partitioned")
    for (a, b), (_, full) in feeds["feeds"].items():
        feed, changes = lean[a, b]
        assert feed.result.settings["changes"]["delete_values"] is False

        def keyed(table: pa.Table) -> dict[tuple, dict]:
            found = {}
            for row in table.to_pylist() if table.num_rows else []:
                kind = unpaired.get(row["_change_type"], row["_change_type"])
                at = (kind, row["_commit_write_id"], *(row[c] for c in identity))
                if partitioned:  # an identity is its bucket file's: one a partition
                    at += (row["part"],)
                assert at not in found, row
                found[at] = row
            return found

        want, got = keyed(full), keyed(changes)
        assert got.keys() == want.keys(), (a, b)
        for at, row in got.items():
            expected = want[at]
            inserted_in_range = a < row["_acid_original_write_id"] <= b
            if at[0] == "insert" or inserted_in_range:
                assert [row[c] for c in COLUMNS] == [expected[c] for c in COLUMNS], (a, b, row)
                continue
            blanked += 1
            for c in COLUMNS:
                kept = partitioned and c == "part"  # the partition's value
                assert row[c] == (expected[c] if kept else None), (a, b, c, row)
    assert blanked > 0
