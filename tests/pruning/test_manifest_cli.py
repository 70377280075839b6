"""airflow-acid index / manifest / compact --manifest on a generated table."""

from __future__ import annotations

import json

import pyarrow.dataset as ds
import pytest

from airflow_provider_acid.cli import main
from airflow_provider_acid.engine.manifest_compaction import compact_manifest
from airflow_provider_acid.pruning.manifest import compute_manifest
from airflow_provider_acid.testing import AcidTableWriter


@pytest.fixture
def table(tmp_path):
    writer = AcidTableWriter(
        str(tmp_path / "t"),
        [("id", "bigint"), ("amount", "double")],
        partition_columns=[("dt", "string")],
        buckets=2,
    )
    writer.insert([{"id": i, "amount": i * 1.5, "dt": "2024-01-01"} for i in range(50)])
    writer.insert([{"id": 100 + i, "amount": i * 2.0, "dt": "2024-01-02"} for i in range(50)])
    writer.delete(lambda r: r["id"] in (3, 104))
    return writer


def test_index_then_manifest_then_compact_from_it(table, tmp_path, capsys):
    index = str(tmp_path / "out" / "_index")
    assert main(["index", table.root, "--index", index, "--json"]) == 0
    indexed = json.loads(capsys.readouterr().out)
    assert indexed["added"] == 4 and indexed["removed"] == 0
    manifest_path = str(tmp_path / "m.jsonl")
    where = "id >= 100 AND id < 110"
    assert (
        main(
            [
                "manifest",
                table.root,
                "--where",
                where,
                "--index",
                index,
                "--out",
                manifest_path,
                "--json",
            ]
        )
        == 0
    )
    header = json.loads(capsys.readouterr().out)
    assert header["format"] == "airflow-acid/slice-manifest"
    assert header["predicate"] == "id >= 100 AND id < 110"
    assert header["metrics"]["partitions_kept"] == 1 and header["metrics"]["slices_kept"] >= 1
    assert all(k.startswith("dt=2024-01-02#") for k in header["slice_keys"])
    out = str(tmp_path / "snap")
    assert main(["compact", "--manifest", manifest_path, "--out", out]) == 0
    rows = ds.dataset(out, format="parquet").to_table()
    assert sorted(rows.column("id").to_pylist()) == [i for i in range(100, 110) if i != 104]


def test_compact_manifest_equals_a_filter_of_the_full_snapshot(table, tmp_path):
    where = "amount > 30 OR dt = '2024-01-01'"
    manifest = compute_manifest(table.root, where)
    result = compact_manifest(manifest, str(tmp_path / "snap"))
    got = ds.dataset(str(tmp_path / "snap"), format="parquet").to_table()
    reference = [
        r["id"]
        for r in table.expected_rows().to_pylist()
        if r["amount"] > 30 or r["dt"] == "2024-01-01"
    ]
    assert sorted(got.column("id").to_pylist()) == sorted(reference)
    assert result.totals()["rows_filtered"] > 0


def test_manifest_cli_errors_name_the_problem(table, capsys):
    assert main(["manifest", table.root, "--where", "nope > 1"]) == 2
    assert "unknown column 'nope'" in capsys.readouterr().err
    assert main(["manifest", table.root, "--where", "id >"]) == 2
    assert "error" in capsys.readouterr().err
    assert main(["compact", "--out", "/tmp/x"]) == 2
    assert "--manifest" in capsys.readouterr().err
