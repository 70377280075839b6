"""``airflow-acid compact``: text and JSON summaries, selections, errors."""

from __future__ import annotations

import json

import pyarrow.dataset as ds

from airflow_provider_acid.cli import main
from airflow_provider_acid.testing.table_writer import AcidTableWriter


def test_compact_prints_a_summary_and_re_runs_idempotently(hive_table, tmp_path, capsys):
    table, out = hive_table("nation"), tmp_path / "out"
    assert main(["compact", str(table), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "committed now" in text and "23,000 written" in text and "2,000 deleted" in text
    assert "manifest   " + str(out / "_snapshots") in text
    assert main(["compact", str(table), "--out", str(out)]) == 0
    assert "already committed" in capsys.readouterr().out
    assert ds.dataset(str(out), format="parquet").count_rows() == 23_000


def test_compact_json_is_the_manifest_plus_where_it_is(hive_table, tmp_path, capsys):
    table, out = hive_table("dummy_id_data"), tmp_path / "out"
    assert main(["compact", str(table), "--out", str(out), "--json", "--include-identity"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert set(data) == {"format", "version", "out", "manifest_path", "newly_committed", "manifest"}
    assert data["format"] == "airflow-acid/compact" and data["newly_committed"] is True
    manifest = json.loads(open(data["manifest_path"]).read())
    assert manifest == data["manifest"]
    assert manifest["totals"]["rows_written"] == 19
    assert [s["slice_key"] for s in manifest["slices"]] == ["#0", "#1", "#2"]
    assert "_acid_row_id" in ds.dataset(str(out), format="parquet").schema.names


def test_compact_chosen_partitions_and_buckets(tmp_path, capsys):
    table = AcidTableWriter(
        str(tmp_path / "t"), [("id", "bigint")], [("dt", "string")], buckets=2, bucket_by="id"
    )
    table.insert([{"id": i, "dt": f"2024-01-0{1 + i % 3}"} for i in range(30)])
    out = tmp_path / "out"
    args = ["compact", table.root, "--out", str(out), "--json", "--partition", "dt=2024-01-02"]
    assert main([*args, "--partition", "dt=2024-01-03", "--bucket", "1"]) == 0
    manifest = json.loads(capsys.readouterr().out)["manifest"]
    assert [s["slice_key"] for s in manifest["slices"]] == ["dt=2024-01-02#1", "dt=2024-01-03#1"]
    assert manifest["source"]["write_ids"] is None


def test_compact_errors_name_the_argument(hive_table, tmp_path, capsys):
    table = hive_table("nation")
    assert main(["compact", str(table), "--out", str(tmp_path / "o"), "--partition", "x"]) == 2
    assert "'x' is not a k=v" in capsys.readouterr().err
    assert main(["compact", str(tmp_path / "missing"), "--out", str(tmp_path / "o")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_expire_keeps_the_newest_snapshots_and_a_folder_read_is_exact(tmp_path, capsys):
    table = AcidTableWriter(
        str(tmp_path / "t"), [("id", "bigint")], [("dt", "string")], buckets=2, bucket_by="id"
    )
    table.insert([{"id": i, "dt": f"2024-01-0{1 + i % 2}"} for i in range(40)])
    out = str(tmp_path / "out")
    ids = []
    for step in range(3):  # three snapshots, with a delete in dt=2024-01-01 before each later one
        if step:
            table.delete(
                lambda row, step=step: row["id"] % 4 == 2 * (step - 1), {"dt": "2024-01-01"}
            )
        assert main(["compact", table.root, "--out", out, "--json"]) == 0
        ids.append(json.loads(capsys.readouterr().out)["manifest"]["snapshot_id"])
    live = sorted(table.expected_rows().column("id").to_pylist())
    folder = ds.dataset(out, format="parquet")
    assert folder.count_rows() > len(live)  # the union of three snapshots' files

    assert main(["expire", out, "--keep", "2", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["kept"] == ids[1:] and result["removed_snapshots"] == ids[:1]
    assert main(["expire", out]) == 0
    text = capsys.readouterr().out
    assert f"kept       {ids[2]}" in text and f"expired    {ids[1]}" in text
    assert sorted(ds.dataset(out, format="parquet").to_table().column("id").to_pylist()) == live
    assert main(["expire", out, "--keep", "0"]) == 2
    assert "keep must be at least 1" in capsys.readouterr().err
