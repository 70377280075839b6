"""``airflow-acid changes``: the feed of a small table whose changes are known by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest

from airflow_provider_acid.cli import main
from airflow_provider_acid.testing.table_writer import AcidTableWriter

KEYS = {"format", "version", "from_write_id", "to_write_id", "counts", "out", "files", "warnings"}


@pytest.fixture
def table(tmp_path: Path) -> AcidTableWriter:
    t = AcidTableWriter(
        str(tmp_path / "t"), [("id", "bigint"), ("v", "string")], buckets=2, bucket_by="id"
    )
    t.insert([{"id": i, "v": f"a{i}"} for i in range(10)])  # write 1
    t.update(lambda r: r["id"] == 3, {"v": "b3"})  # write 2
    t.delete(lambda r: r["id"] == 4)  # write 3
    aborted = t.begin()  # write 4
    aborted.insert([{"id": 40, "v": "aborted"}])
    aborted.abort()
    t.begin().insert([{"id": 50, "v": "open"}])  # write 5, left open
    t.insert([{"id": 20, "v": "x"}])  # write 6
    return t


def _run(capsys: pytest.CaptureFixture, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _rows(out: str, summary: dict) -> list[tuple]:
    rows = []
    for name in summary["files"]:
        rows += pq.read_table(f"{out}/{name}").to_pylist()
    rows.sort(key=lambda r: (r["_change_ordinal"], r["id"]))
    return [(r["_change_type"], r["id"], r["v"], r["_commit_write_id"]) for r in rows]


def test_json_counts_rows_and_default_to_the_high_watermark(table, tmp_path, capsys):
    out = str(tmp_path / "feed")
    argv = ["changes", table.root, "--valid-write-ids", table.valid_write_ids()]
    code, stdout, _ = _run(
        capsys, *argv, "--from-write-id", "1", "--out", out, "--key", "id", "--json"
    )
    assert code == 0
    summary = json.loads(stdout)
    assert KEYS <= set(summary)
    assert (summary["format"], summary["version"]) == ("airflow-acid/changes", 1)
    assert (summary["from_write_id"], summary["to_write_id"]) == (1, 6)
    assert summary["counts"] == {
        "insert": 1,
        "delete": 1,
        "update_preimage": 1,
        "update_postimage": 1,
    }
    assert _rows(out, summary) == [
        ("update_preimage", 3, "a3", 2),
        ("update_postimage", 3, "b3", 2),
        ("delete", 4, "a4", 3),
        ("insert", 20, "x", 6),
    ]
    assert any("[5] are open" in w for w in summary["warnings"])
    # committed with the snapshot protocol: a manifest, and the folder reads as the feed alone
    assert Path(summary["manifest_path"]).exists() and (Path(out) / "_SUCCESS").exists()
    assert pads.dataset(out, format="parquet").count_rows() == 4
    columns = pq.read_schema(f"{out}/{summary['files'][0]}").names
    assert columns[:2] == ["id", "v"] and columns[2:] == [
        "_change_type",
        "_commit_write_id",
        "_change_ordinal",
        "_acid_original_write_id",
        "_acid_bucket",
        "_acid_row_id",
    ]
    # a re-run returns the committed feed
    code, again, _ = _run(
        capsys, *argv, "--from-write-id", "1", "--out", out, "--key", "id", "--json"
    )
    assert json.loads(again)["feed_id"] == summary["feed_id"]
    assert json.loads(again)["newly_committed"] is False


def test_without_key_an_update_is_a_delete_and_an_insert(table, tmp_path, capsys):
    out = str(tmp_path / "feed")
    argv = ["changes", table.root, "--valid-write-ids", table.valid_write_ids(), "--out", out]
    code, stdout, _ = _run(capsys, *argv, "--from-write-id", "1", "--to-write-id", "2", "--json")
    summary = json.loads(stdout)
    assert _rows(out, summary) == [("delete", 3, "a3", 2), ("insert", 3, "b3", 2)]


def test_no_delete_values_gives_a_delete_its_identity_only(table, tmp_path, capsys):
    out = str(tmp_path / "feed")
    argv = ["changes", table.root, "--valid-write-ids", table.valid_write_ids(), "--out", out]
    code, stdout, _ = _run(
        capsys, *argv, "--from-write-id", "1", "--to-write-id", "3", "--no-delete-values", "--json"
    )
    assert code == 0
    summary = json.loads(stdout)
    # the rows of write 1 deleted by writes 2 and 3: no values, the insert with its own
    assert _rows(out, summary) == [
        ("delete", None, None, 2),
        ("insert", 3, "b3", 2),
        ("delete", None, None, 3),
    ]
    assert any("--no-delete-values" in w for w in summary["warnings"])
    code, _, err = _run(capsys, *argv, "--from-write-id", "1", "--key", "id", "--no-delete-values")
    assert code == 2 and "--key id" in err and "--no-delete-values" in err


def test_net_leaves_out_rows_inserted_and_deleted_in_the_range(table, tmp_path, capsys):
    table.delete(lambda r: r["id"] == 20)  # write 7: deletes what write 6 inserted
    lists = ["--valid-write-ids", table.valid_write_ids(), "--from-write-id", "5"]
    both, net = str(tmp_path / "both"), str(tmp_path / "net")
    _, stdout, _ = _run(capsys, "changes", table.root, *lists, "--out", both, "--json")
    assert _rows(both, json.loads(stdout)) == [("insert", 20, "x", 6), ("delete", 20, "x", 7)]
    _, stdout, _ = _run(capsys, "changes", table.root, *lists, "--out", net, "--net", "--json")
    assert json.loads(stdout)["files"] == [] and sum(json.loads(stdout)["counts"].values()) == 0


def test_the_watermark_continues_and_a_rerun_brings_nothing_new(table, tmp_path, capsys):
    out = str(tmp_path / "feed")
    lists = ["--valid-write-ids", table.valid_write_ids()]
    _run(
        capsys,
        "changes",
        table.root,
        *lists,
        "--from-write-id",
        "0",
        "--to-write-id",
        "3",
        "--out",
        out,
    )
    code, stdout, _ = _run(capsys, "changes", table.root, *lists, "--out", out, "--json")
    summary = json.loads(stdout)
    assert (summary["from_write_id"], summary["to_write_id"]) == (3, 6)
    assert _rows(out, summary) == [("insert", 20, "x", 6)]
    _, stdout, _ = _run(capsys, "changes", table.root, *lists, "--out", out, "--json")
    assert sum(json.loads(stdout)["counts"].values()) == 0
    code, _, err = _run(capsys, "changes", table.root, *lists, "--from-write-id", "1", "--out", out)
    assert code == 2 and "already holds changes up to write 6" in err


def test_errors_name_the_argument(table, tmp_path, capsys):
    lists = ["--valid-write-ids", table.valid_write_ids(), "--out", str(tmp_path / "o")]
    code, _, err = _run(
        capsys, "changes", table.root, *lists, "--from-write-id", "1", "--to-write-id", "7"
    )
    assert code == 2 and "--to-write-id 7 is above" in err and "high watermark" in err
    code, _, err = _run(
        capsys, "changes", table.root, *lists, "--from-write-id", "1", "--key", "nope"
    )
    assert code == 2 and "--key" in err and "nope" in err


def test_a_compaction_inside_the_range_is_refused_naming_the_base(table, tmp_path, capsys):
    table.compact_major()  # base_3 (5 is open: the compactor stops below it; 4 aborted)
    lists = ["--valid-write-ids", table.valid_write_ids(), "--out", str(tmp_path / "o")]
    code, _, err = _run(capsys, "changes", table.root, *lists, "--from-write-id", "1")
    assert code == 2
    assert "base_0000003" in err and "--include-identity" in err and "full snapshot" in err


def test_a_schema_change_inside_the_range_is_reported(table, tmp_path, capsys):
    out = str(tmp_path / "feed")
    lists = ["--valid-write-ids", table.valid_write_ids()]
    _run(capsys, "changes", table.root, *lists, "--from-write-id", "0", "--out", out)
    table.add_columns([("qty", "int")])
    table.rename_column("v", "label")
    table.insert([{"id": 60, "label": "y", "qty": 2}])  # write 7
    lists = ["--valid-write-ids", table.valid_write_ids()]
    code, stdout, _ = _run(capsys, "changes", table.root, *lists, "--out", out, "--json")
    summary = json.loads(stdout)
    assert code == 0 and (summary["from_write_id"], summary["to_write_id"]) == (6, 7)
    assert summary["schema_changes"] == ["column v renamed to label", "column qty int added"]
    assert any("schema changed inside the range" in w for w in summary["warnings"])


def test_a_bucket_compacted_away_is_diffed_as_empty(tmp_path, capsys):
    from airflow_provider_acid.engine.compaction import CompactionOptions, compact_table

    t = AcidTableWriter(
        str(tmp_path / "t"), [("id", "bigint"), ("v", "string")], buckets=2, bucket_by="id"
    )
    t.insert([{"id": i, "v": f"a{i}"} for i in range(10)])  # write 1
    identity = str(tmp_path / "identity")
    compact_table(t.root, identity, options=CompactionOptions(include_identity=True))
    gone = {r["id"] for r in t.expected_rows().to_pylist()} - {0}
    t.delete(lambda r: r["id"] in gone)  # write 2: every row but id 0
    t.compact_major()  # base_2 holds id 0's bucket only
    out = str(tmp_path / "feed")
    code, stdout, _ = _run(
        capsys, "changes", t.root, "--from-write-id", "1", "--out", out,
        "--identity-snapshot", identity, "--json",
    )  # fmt: skip
    summary = json.loads(stdout)
    assert code == 0, stdout
    assert sorted(r[1] for r in _rows(out, summary)) == sorted(gone)
    assert {r[0] for r in _rows(out, summary)} == {"delete"}
    assert any("diffing row identities" in w for w in summary["warnings"])
