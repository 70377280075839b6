"""The Delta sink (output/delta.py) through the library: one commit per snapshot with add and
remove actions over the compaction's own files, commitInfo, idempotent re-runs, time travel,
crash safety between the manifest and the log, and vacuum coordinated with the Parquet expiry.

Rows are read back with delta-rs; tests/output/test_delta_readers.py adds DuckDB and Spark."""

from __future__ import annotations

import collections
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

from airflow_provider_acid.engine.compaction import compact_table
from airflow_provider_acid.engine.options import CompactionOptions
from airflow_provider_acid.output import committed_snapshots, latest_snapshot
from airflow_provider_acid.output.delta import COMMIT_KEY, DeltaSink, partition_values
from airflow_provider_acid.output.records import DATA_FILE_NAME
from airflow_provider_acid.output.sinks import SinkError, open_sink, table_asset_uri
from airflow_provider_acid.testing.table_writer import AcidTableWriter

NATION_3 = "default.nation:3:9223372036854775807::"
NATION_4 = "default.nation:4:9223372036854775807::"


def log_entries(out: Path, version: int) -> list[dict]:
    """The actions of one commit, as the Delta log holds them."""
    path = out / "_delta_log" / f"{version:020d}.json"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def actions(out: Path, version: int, kind: str) -> list[dict]:
    return [e[kind] for e in log_entries(out, version) if kind in e]


def commit_info(out: Path, version: int) -> dict:
    (info,) = actions(out, version, "commitInfo")
    return info


def versions(out: Path) -> list[int]:
    return sorted(int(p.stem) for p in (out / "_delta_log").glob("*.json"))


def bucket_of(path: str) -> int:
    return int(DATA_FILE_NAME.match(path.rsplit("/", 1)[-1])["bucket"])


def table_files(out: Path) -> list[str]:
    """The data files of the table's current version, as delta-rs lists them."""
    return pa.table(DeltaTable(str(out)).get_add_actions(flatten=True))["path"].to_pylist()


def rows_of(table: pa.Table, columns: list[str]) -> list[tuple]:
    return sorted(zip(*(table[c].to_pylist() for c in columns), strict=True), key=repr)


# -- the nation fixture: watermark 3, then 4 -----------------------------------------------


def test_nation_under_watermarks_3_then_4_with_time_travel_and_an_idempotent_rerun(
    hive_table, tmp_path
):
    table = hive_table("nation")
    out = tmp_path / "out"
    sink = open_sink("delta", str(out))
    first = compact_table(str(table), str(out), write_ids=NATION_3)
    published = sink.publish(first)
    assert (published.table_version, published.newly_published) == (0, True)
    assert published.details == {"uri": str(out), "version": 0}
    # the asset is the table's location, as the operators name it before any run
    assert published.asset_uri == f"file://{out}" == table_asset_uri("delta", str(out))

    second = compact_table(str(table), str(out), write_ids=NATION_4)
    again = sink.publish(second)
    assert (again.table_version, again.newly_published) == (1, True)

    delta = DeltaTable(str(out))
    assert delta.version() == 1
    rows = delta.to_pyarrow_table()
    assert rows.num_rows == 23_000
    keys = collections.Counter(rows["n_nationkey"].to_pylist())
    assert 5 not in keys and 19 not in keys
    assert set(keys.values()) == {1000} and len(keys) == 23
    # time travel to the first commit: the snapshot under watermark 3 (key 19 still there)
    first_version = DeltaTable(str(out), version=0).to_pyarrow_table()
    assert first_version.num_rows == 24_000
    assert 19 in set(first_version["n_nationkey"].to_pylist())

    # commitInfo records the source, the write ids and the provider's snapshot id
    record = commit_info(out, 1)[COMMIT_KEY]
    assert record["snapshot_id"] == second.snapshot_id
    assert record["source_table"] == str(table)
    assert record["write_ids"] == NATION_4
    assert record["sequence"] == second.sequence == 2
    assert commit_info(out, 0)[COMMIT_KEY]["write_ids"] == NATION_3
    assert json.loads(commit_info(out, 1)["userMetadata"])["write_ids"] == NATION_4
    assert actions(out, 1, "txn") == [{"appId": "airflow-provider-acid", "version": 2}]
    # one bucket: its file of the first snapshot is removed and the new one added, in one commit
    assert [a["path"] for a in actions(out, 1, "remove")] == [f.path for f in first.files]
    assert [a["path"] for a in actions(out, 1, "add")] == [f.path for f in second.files]

    # a third identical run adds no version: the last commit already holds this snapshot
    third = compact_table(str(table), str(out), write_ids=NATION_4)
    assert not third.newly_committed
    rerun = sink.publish(third)
    assert (rerun.table_version, rerun.newly_published) == (1, False)
    assert versions(out) == [0, 1]
    assert commit_info(out, versions(out)[-1])[COMMIT_KEY]["snapshot_id"] == third.snapshot_id


def test_the_data_files_are_the_compactions_own_files_not_copies(hive_table, tmp_path):
    out = tmp_path / "out"
    result = compact_table(str(hive_table("nation")), str(out), write_ids=NATION_4)
    stamps = {p: (p.stat().st_mtime_ns, p.stat().st_ino) for p in out.rglob("*.parquet")}
    DeltaSink(str(out)).publish(result)
    assert {p: (p.stat().st_mtime_ns, p.stat().st_ino) for p in out.rglob("*.parquet")} == stamps
    assert sorted(table_files(out)) == sorted(f.path for f in result.files)
    (add,) = actions(out, 0, "add")
    assert add["size"] == result.files[0].size
    stats = json.loads(add["stats"])
    assert stats["numRecords"] == 23_000
    assert (stats["minValues"]["n_nationkey"], stats["maxValues"]["n_nationkey"]) == (0, 24)


# -- incremental: only the changed bucket's files ----------------------------------------


def four_bucket_table(root: Path) -> AcidTableWriter:
    table = AcidTableWriter(
        str(root),
        [("id", "bigint"), ("name", "string"), ("day", "date")],
        [("region", "string")],
        buckets=4,
        bucket_by="id",
    )
    table.insert(
        [
            {
                "id": i,
                "name": f"n{i}",
                "day": None if i % 9 == 0 else f"2024-01-{1 + i % 28:02d}",
                "region": ("east", "west")[i % 2],
            }
            for i in range(400)
        ]  # fmt: skip
    )
    return table


def test_a_delete_in_one_bucket_replaces_only_that_buckets_files(tmp_path):
    table = four_bucket_table(tmp_path / "t")
    out = tmp_path / "out"
    sink = DeltaSink(str(out))
    first = compact_table(table.root, str(out), write_ids=table.valid_write_ids())
    sink.publish(first)
    # delete rows of one bucket only (in both partitions)
    bucket = bucket_of(first.files[0].path)
    in_bucket = {b.bucket: b for b in first.buckets}
    assert len({b.bucket for b in first.buckets}) == 4
    victims = set(
        pq.read_table(out / [f for f in first.files if bucket_of(f.path) == bucket][0].path)[
            "id"
        ].to_pylist()[:3]
    )
    table.delete(lambda r: r["id"] in victims)
    second = compact_table(table.root, str(out), write_ids=table.valid_write_ids())
    publication = sink.publish(second)
    assert publication.table_version == 1
    assert in_bucket  # the first snapshot had every bucket

    removed = {a["path"] for a in actions(out, 1, "remove")}
    added = {a["path"] for a in actions(out, 1, "add")}
    old_of_bucket = {f.path for f in first.files if bucket_of(f.path) == bucket}
    changed_partitions = {p.rsplit("/", 1)[0] for p in removed}
    # the bucket's files in the partitions the delete touched, and nothing else
    assert removed and {bucket_of(p) for p in removed | added} == {bucket}
    assert removed <= old_of_bucket
    assert {p.rsplit("/", 1)[0] for p in added} == changed_partitions
    assert removed == {p for p in old_of_bucket if p.rsplit("/", 1)[0] in changed_partitions}
    record = commit_info(out, 1)[COMMIT_KEY]
    assert (record["added_files"], record["removed_files"]) == (len(added), len(removed))
    # the other buckets' files stay in the table as they were
    unchanged = {f.path for f in first.files} - removed
    assert set(table_files(out)) == unchanged | added == {f.path for f in second.files}
    # and the table holds exactly the table's rows
    columns = ["id", "name", "day", "region"]
    expected = rows_of(table.expected_rows(), columns)
    assert rows_of(DeltaTable(str(out)).to_pyarrow_table(), columns) == expected
    assert not victims & set(DeltaTable(str(out)).to_pyarrow_table()["id"].to_pylist())


def test_partition_values_come_from_the_partition_folders(tmp_path):
    table = four_bucket_table(tmp_path / "t")
    out = tmp_path / "out"
    result = compact_table(table.root, str(out), write_ids=table.valid_write_ids())
    DeltaSink(str(out)).publish(result)
    adds = actions(out, 0, "add")
    assert len(adds) == len(result.files)
    for add in adds:
        folder = add["path"].split("/")[0]
        assert add["partitionValues"] == {"region": folder.split("=")[1]}
        stats = json.loads(add["stats"])
        data = pq.read_table(out / add["path"])
        assert stats["numRecords"] == data.num_rows
        assert stats["minValues"]["id"] == pc.min(data["id"]).as_py()
        assert stats["maxValues"]["id"] == pc.max(data["id"]).as_py()
        assert stats["nullCount"]["day"] == data["day"].null_count
        assert "region" not in stats["nullCount"]  # partition columns carry no statistics
    assert DeltaTable(str(out)).metadata().partition_columns == ["region"]
    # a filter on the partition column and on the statistics prunes files, and stays exact
    west = DeltaTable(str(out)).to_pyarrow_table(filters=[("region", "=", "west")])
    assert sorted(west["id"].to_pylist()) == [i for i in range(400) if i % 2]
    low = DeltaTable(str(out)).to_pyarrow_table(filters=[("id", "<", 50), ("region", "=", "east")])
    assert sorted(low["id"].to_pylist()) == [i for i in range(50) if i % 2 == 0]


def test_escaped_partition_folders_are_removed_and_vacuumed_by_their_stored_names(tmp_path):
    """Hive escapes ``:`` and ``%`` in folder names (``p=b c%3Ad%25e``); the log URI-encodes
    the path again (``p=b%20c%253Ad%2525e``): a remove must name the same file as its add."""
    table = AcidTableWriter(str(tmp_path / "t"), [("id", "int")], [("p", "string")], buckets=2)
    table.insert([{"id": i, "p": ("b c:d%e", "plain")[i % 2]} for i in range(20)])
    out = tmp_path / "out"
    sink = DeltaSink(str(out))
    first = compact_table(table.root, str(out))
    sink.publish(first)
    assert {a["partitionValues"]["p"] for a in actions(out, 0, "add")} == {"b c:d%e", "plain"}
    table.delete(lambda r: r["id"] == 2)
    second = compact_table(table.root, str(out))
    sink.publish(second)
    removed = [a["path"] for a in actions(out, 1, "remove")]
    assert removed and all(p.startswith("p=b%20c%253Ad%2525e/") for p in removed)
    assert sorted(table_files(out)) == sorted(
        p.replace(" ", "%20").replace("%3A", "%253A").replace("%25e", "%2525e")
        for p in (f.path for f in second.files)
    )
    assert sorted(DeltaTable(str(out)).to_pyarrow_table()["id"].to_pylist()) == [
        i for i in range(20) if i != 2
    ]
    expired = sink.expire(1)
    gone = {f.path for f in first.files} - {f.path for f in second.files}
    assert set(expired.removed_files) == gone and gone
    assert all(p.startswith("p=b c%3Ad%25e/") for p in gone)
    assert not any((out / p).exists() for p in gone)
    on_disk = {p.relative_to(out).as_posix() for p in out.rglob("part-*.parquet")}
    assert on_disk == {f.path for f in second.files}


def test_partition_values_are_typed_and_unescaped():
    columns = [
        {"name": "d", "hive_type": "date"},
        {"name": "n", "hive_type": "int"},
        {"name": "s", "hive_type": "string"},
    ]
    path = "d=2024-02-29/n=7/s=a%3Ab c/part-0123456789abcdef-00000-0000.parquet"
    assert partition_values(path, columns) == {"d": "2024-02-29", "n": "7", "s": "a:b c"}
    nulls = "d=__HIVE_DEFAULT_PARTITION__/n=1/s=x/f.parquet"
    assert partition_values(nulls, columns)["d"] is None
    with pytest.raises(SinkError, match="not a valid int"):
        partition_values("d=2024-01-01/n=seven/s=x/f.parquet", columns)
    with pytest.raises(SinkError, match="no s=... partition folder"):
        partition_values("d=2024-01-01/n=1/f.parquet", columns)


# -- crash safety --------------------------------------------------------------------------


def test_a_run_killed_between_manifest_and_log_is_published_by_the_rerun(hive_table, tmp_path):
    table = hive_table("nation")
    out = tmp_path / "out"
    sink = DeltaSink(str(out))
    sink.publish(compact_table(str(table), str(out), write_ids=NATION_3))
    # the run under watermark 4 commits its manifest, then dies before the Delta commit
    committed = compact_table(str(table), str(out), write_ids=NATION_4)
    assert latest_snapshot(str(out)).snapshot_id == committed.snapshot_id
    # Delta readers still see the first snapshot, exactly, though the new files are there
    assert versions(out) == [0]
    assert DeltaTable(str(out)).to_pyarrow_table().num_rows == 24_000
    assert len(list(out.glob("part-*.parquet"))) == 2
    # the re-run finds the manifest committed and publishes it, since the log lacks it
    rerun = compact_table(str(table), str(out), write_ids=NATION_4)
    assert not rerun.newly_committed
    publication = sink.publish(rerun)
    assert (publication.table_version, publication.newly_published) == (1, True)
    assert DeltaTable(str(out)).to_pyarrow_table().num_rows == 23_000
    assert commit_info(out, 1)[COMMIT_KEY]["snapshot_id"] == committed.snapshot_id


def test_an_older_snapshot_is_not_published_over_a_newer_one(hive_table, tmp_path):
    table = hive_table("nation")
    out = tmp_path / "out"
    sink = DeltaSink(str(out))
    older = compact_table(str(table), str(out), write_ids=NATION_3)  # never published
    sink.publish(compact_table(str(table), str(out), write_ids=NATION_4))
    with pytest.raises(SinkError, match="newer than snapshot"):
        sink.publish(older)
    assert versions(out) == [0]


# -- expiry: vacuum and the Parquet protocol together -------------------------------------


def three_snapshots(tmp_path: Path) -> tuple[AcidTableWriter, Path, DeltaSink, list, list]:
    table = four_bucket_table(tmp_path / "t")
    out = tmp_path / "out"
    sink = DeltaSink(str(out))
    results, expected = [], []
    for victim in (None, 3, 10):
        if victim is not None:
            table.delete(lambda r, v=victim: r["id"] == v)
        results.append(compact_table(table.root, str(out), write_ids=table.valid_write_ids()))
        sink.publish(results[-1])
        expected.append(rows_of(table.expected_rows(), ["id", "name", "day", "region"]))
    return table, out, sink, results, expected


def test_expire_vacuums_only_what_no_kept_version_references(tmp_path):
    _, out, sink, results, expected = three_snapshots(tmp_path)
    columns = ["id", "name", "day", "region"]
    assert [v for v, _ in sink.provider_commits()] == [0, 1, 2]
    referenced = {f.path for r in results[1:] for f in r.files}
    only_first = {f.path for f in results[0].files} - referenced
    assert only_first

    expired = sink.expire(2)
    assert expired.kept == (results[1].snapshot_id, results[2].snapshot_id)
    assert expired.removed_snapshots == (results[0].snapshot_id,)
    assert set(expired.removed_files) == only_first
    assert not any((out / p).exists() for p in only_first)
    assert all((out / p).exists() for p in referenced)
    # the kept versions still read exactly; the newest too
    assert rows_of(DeltaTable(str(out), version=1).to_pyarrow_table(), columns) == expected[1]
    assert rows_of(DeltaTable(str(out)).to_pyarrow_table(), columns) == expected[2]
    assert [s.snapshot_id for s in committed_snapshots_of(out)] == list(expired.kept)

    sink.expire(1)
    assert rows_of(DeltaTable(str(out)).to_pyarrow_table(), columns) == expected[2]
    on_disk = {p.relative_to(out).as_posix() for p in out.rglob("part-*.parquet")}
    assert on_disk == {f.path for f in results[2].files}
    # vacuum records itself in the log; the provider's commits stay the three snapshots
    assert [v for v, _ in sink.provider_commits()] == [0, 1, 2]
    assert versions(out)[-1] > 2


def test_expire_keeps_the_published_version_while_a_newer_manifest_waits(tmp_path):
    table, out, sink, results, expected = three_snapshots(tmp_path)
    table.delete(lambda r: r["id"] == 11)
    waiting = compact_table(table.root, str(out), write_ids=table.valid_write_ids())
    # the newest manifest is committed but not published (a killed run): expiring down to one
    # snapshot must still keep every file of the table's current version
    sink.expire(1)
    columns = ["id", "name", "day", "region"]
    assert rows_of(DeltaTable(str(out)).to_pyarrow_table(), columns) == expected[2]
    kept = [s.snapshot_id for s in committed_snapshots_of(out)]
    assert kept == [results[2].snapshot_id, waiting.snapshot_id]
    sink.publish(waiting)
    assert rows_of(DeltaTable(str(out)).to_pyarrow_table(), columns) == rows_of(
        table.expected_rows(), columns
    )


def committed_snapshots_of(out: Path):
    import fsspec

    return committed_snapshots(fsspec.filesystem("file"), str(out))


# -- bad input -----------------------------------------------------------------------------


def test_a_table_this_provider_did_not_write_is_refused(hive_table, tmp_path):
    out = tmp_path / "out"
    write_deltalake(str(out), pa.table({"x": [1]}))
    result = compact_table(str(hive_table("nation")), str(out), write_ids=NATION_4)
    with pytest.raises(SinkError, match="this provider did not write"):
        DeltaSink(str(out)).publish(result)
    assert DeltaTable(str(out)).version() == 0


def test_changed_output_settings_are_refused_naming_the_table(hive_table, tmp_path):
    table = hive_table("nation")
    out = tmp_path / "out"
    sink = DeltaSink(str(out))
    sink.publish(compact_table(str(table), str(out), write_ids=NATION_3))
    other = compact_table(
        str(table),
        str(out),
        write_ids=NATION_4,
        options=CompactionOptions(include_identity=True),
    )
    with pytest.raises(SinkError, match=f"{out}.*other columns"):
        sink.publish(other)


def test_options_are_checked(tmp_path):
    out = tmp_path / "out"
    with pytest.raises(ValueError, match="unknown Delta sink options \\['catalog'\\]"):
        DeltaSink(str(out), options={"catalog": {}})
    with pytest.raises(ValueError, match="the Delta table is the output folder"):
        DeltaSink(str(out), options={"uri": str(tmp_path / "elsewhere")})
    assert DeltaSink(str(out), options={"uri": f"file://{out}"}).table_uri == str(out)


def test_delta_needs_microsecond_timestamps(tmp_path):
    table = AcidTableWriter(str(tmp_path / "t"), [("id", "bigint"), ("at", "timestamp")])
    table.insert([{"id": 1, "at": "2024-01-01 10:00:00"}])
    out = tmp_path / "out"
    result = compact_table(table.root, str(out), options=CompactionOptions(timestamp_unit="ns"))
    with pytest.raises(SinkError, match="timestamps in microseconds"):
        DeltaSink(str(out)).publish(result)
    assert not (out / "_delta_log").exists()
