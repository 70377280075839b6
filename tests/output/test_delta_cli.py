"""``airflow-acid compact --format delta --json`` and ``expire --format delta``: the nation
fixture under watermarks 3 then 4 into one output folder, opened through the ``delta`` block
of the JSON alone."""

from __future__ import annotations

import collections
import json

from deltalake import DeltaTable

from airflow_provider_acid.cli import main

NATION_3 = "default.nation:3:9223372036854775807::"
NATION_4 = "default.nation:4:9223372036854775807::"


def compact(capsys, table, out, write_ids: str) -> dict:
    argv = ["compact", str(table), "--out", str(out), "--valid-write-ids", write_ids]
    assert main([*argv, "--format", "delta", "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_nation_through_the_cli_json_contract(hive_table, tmp_path, capsys):
    table, out = hive_table("nation"), tmp_path / "out"
    first = compact(capsys, table, out, NATION_3)
    assert first["output_format"] == "delta" and first["newly_published"] is True
    assert first["delta"] == {"uri": str(out), "version": 0}

    second = compact(capsys, table, out, NATION_4)
    block = second["delta"]
    assert set(block) == {"uri", "version"} and block["version"] == 1
    latest = DeltaTable(block["uri"])
    assert latest.version() == block["version"]
    rows = latest.to_pyarrow_table()
    assert rows.num_rows == 23_000
    keys = collections.Counter(rows["n_nationkey"].to_pylist())
    assert not {5, 19} & set(keys) and set(keys.values()) == {1000}
    # time travel to the first run's version
    assert DeltaTable(block["uri"], version=first["delta"]["version"]).count() == 24_000
    history = latest.history()
    assert history[0]["airflow_acid"]["snapshot_id"] == second["manifest"]["snapshot_id"]
    assert history[0]["airflow_acid"]["write_ids"] == NATION_4

    # a third identical run adds no version
    third = compact(capsys, table, out, NATION_4)
    assert third["newly_committed"] is False and third["newly_published"] is False
    assert third["delta"] == block
    assert DeltaTable(block["uri"]).version() == 1

    # text output names the table and its version
    assert main(["compact", str(table), "--out", str(out), "--valid-write-ids", NATION_4,
                 "--format", "delta"]) == 0  # fmt: skip
    assert f"delta      file://{out}  (version 1, already published)" in capsys.readouterr().out

    # expiry through the sink: the first snapshot's file goes, the table still reads
    assert main(["expire", str(out), "--keep", "1", "--format", "delta", "--json"]) == 0
    expired = json.loads(capsys.readouterr().out)
    assert expired["kept"] == [second["manifest"]["snapshot_id"]]
    assert expired["removed_files"] == [f["path"] for f in first["manifest"]["files"]]
    assert DeltaTable(block["uri"]).count() == 23_000


def test_a_timestamp_unit_delta_cannot_hold_is_refused_before_any_work(
    hive_table, tmp_path, capsys
):
    table, out = hive_table("nation"), tmp_path / "out"
    argv = ["compact", str(table), "--out", str(out), "--format", "delta", "--timestamp-unit", "ns"]
    assert main(argv) != 0
    assert "Delta stores timestamps in microseconds" in capsys.readouterr().err
    assert not out.exists()
