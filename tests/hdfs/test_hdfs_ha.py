"""An HA pair of namenodes (scripts/hdfs.py --ha: a MiniDFSCluster with the nameservice ns1,
one namenode active, the other standby, sharing their edits): a table on hdfs://ns1 is written
and compacted through the active namenode, the standby listed first and passed over; after a
failover the same client finds the new active namenode and goes on."""

from __future__ import annotations

import json

import requests
from hdfs_helpers import ids
from kerberos_fixtures import failover_hdfs

from airflow_provider_acid import cli
from airflow_provider_acid.acid.hdfs import HdfsFileSystem
from airflow_provider_acid.acid.listing import resolve_filesystem
from airflow_provider_acid.testing import AcidTableWriter


def _active_first(namenodes: str) -> list[str]:
    """The pair's URLs, the active one (it answers a status call) first."""
    urls = namenodes.split("=", 1)[1].split(",")
    answers = {u: requests.get(f"{u}/webhdfs/v1/", params={"op": "GETFILESTATUS",
               "user.name": "probe"}, timeout=30).status_code for u in urls}  # fmt: skip
    assert sorted(answers.values()) == [200, 403], answers  # one active, one standby
    return sorted(urls, key=lambda u: answers[u] != 200)


def test_an_hdfs_ha_pair_is_used_through_its_active_namenode_across_a_failover(
    hdfs_ha, tmp_path, monkeypatch, capsys
):
    active, standby = _active_first(hdfs_ha.namenodes)
    namenodes = f"ns1={standby},{active}"  # the standby first: it must be passed over
    monkeypatch.setenv("ACID_HDFS_NAMENODES", namenodes)  # restored after the CLI sets it
    monkeypatch.delenv("ACID_HDFS_KERBEROS", raising=False)
    HdfsFileSystem.clear_instance_cache()
    table = hdfs_ha.folder() + "/events"
    fs, _ = resolve_filesystem(table, storage_options={"namenodes": namenodes})
    assert fs.url == f"{active}/webhdfs/v1"
    writer = AcidTableWriter(table, [("id", "bigint")], filesystem=fs)
    writer.insert([{"id": i} for i in range(10)])
    writer.delete(lambda r: r["id"] % 3 == 0)
    out = hdfs_ha.folder()
    argv = ["compact", table, "--hdfs-namenodes", namenodes, "--json", "--out"]
    assert cli.main([*argv, f"{out}/before"]) == 0, capsys.readouterr().err
    assert ids(fs, fs._strip_protocol(f"{out}/before")) == [1, 2, 4, 5, 7, 8]

    assert "is active" in failover_hdfs()
    assert _active_first(hdfs_ha.namenodes) == [standby, active]  # swapped
    # The cached client still points at the old active namenode, the standby now.
    writer.insert([{"id": i} for i in range(10, 15)])
    assert fs.url == f"{standby}/webhdfs/v1"
    capsys.readouterr()
    assert cli.main([*argv, f"{out}/after"]) == 0, capsys.readouterr().err
    summary = json.loads(capsys.readouterr().out)
    assert ids(fs, fs._strip_protocol(f"{out}/after")) == [1, 2, 4, 5, 7, 8, 10, 11, 12, 13, 14]
    assert fs.exists(summary["manifest_path"])
