"""The change feed of a table read by name through a real Hive Metastore: B defaults to the
metastore's high watermark, a B above it is refused, aborted and open writes never appear."""

from __future__ import annotations

import collections
import json

import pyarrow.parquet as pq

from airflow_provider_acid.cli import main


def test_by_name_b_is_the_high_watermark(sales, metastore_uri, tmp_path, capsys):
    name = sales.name
    out = str(tmp_path / "feed")
    by_name = ["changes", "--metastore", metastore_uri, "--table", name, "--out", out]
    assert main([*by_name, "--from-write-id", "1", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert (summary["from_write_id"], summary["to_write_id"]) == (1, 5)
    rows = []
    for path in summary["files"]:
        rows += pq.read_table(f"{out}/{path}").to_pylist()
    got = collections.Counter((r["_change_type"], r["id"], r["dt"]) for r in rows)
    days = ("2024-01-01", "2024-01-02")
    wanted = collections.Counter(("insert", i, days[i % 2]) for i in range(40, 60))
    wanted += collections.Counter(("delete", i, days[i % 2]) for i in range(0, 60, 5))
    assert got == wanted
    assert {r["_commit_write_id"] for r in rows} == {2, 3}
    assert main([*by_name, "--to-write-id", "6"]) == 2
    err = capsys.readouterr().err
    assert "--to-write-id 6 is above" in err and "high watermark" in err
