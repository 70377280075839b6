"""Tables on a real HDFS (scripts/hdfs.py: Hadoop's MiniDFSCluster), their locations in the
metastore ``hdfs://127.0.0.1:PORT/...``, read by name through WebHDFS and compacted to HDFS and
to local storage: once with Kerberos (SPNEGO, the Kerberos metastore, the same KDC) and once
unsecured (the plain metastore)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hdfs_helpers import PRINCIPAL_TEMPLATE, STORAGE_SETTINGS, HdfsTable, ids, make_table

from airflow_provider_acid import cli
from airflow_provider_acid.acid.hdfs import HdfsEndpointError, HdfsFileSystem
from airflow_provider_acid.acid.listing import resolve_filesystem
from airflow_provider_acid.kerberos import KerberosLogin
from airflow_provider_acid.metastore import MetastoreClient
from airflow_provider_acid.metastore.connection import MetastoreAddress
from airflow_provider_acid.testing.metastore_tables import (
    drop_database,
)


@pytest.fixture
def kerberos_table(kdc, hdfs_kerberos, kerberos_metastore_uri, monkeypatch):
    monkeypatch.setenv("ACID_HDFS_NAMENODES", hdfs_kerberos.namenodes)
    monkeypatch.setenv("ACID_HDFS_KERBEROS", "1")
    monkeypatch.setenv("ACID_KERBEROS_PRINCIPAL", kdc.principal)
    monkeypatch.setenv("ACID_KERBEROS_KEYTAB", kdc.keytab)
    login = KerberosLogin(kdc.principal, kdc.keytab)
    address = MetastoreAddress.parse(
        kerberos_metastore_uri, auth="GSSAPI", kerberos=login, server_principal=PRINCIPAL_TEMPLATE
    )
    args = [
        "--metastore", kerberos_metastore_uri, "--metastore-auth", "GSSAPI",
        "--metastore-principal", PRINCIPAL_TEMPLATE, "--kerberos-principal", kdc.principal,
        "--kerberos-keytab", kdc.keytab, "--hdfs-namenodes", hdfs_kerberos.namenodes,
        "--hdfs-kerberos",
    ]  # fmt: skip
    with MetastoreClient(address) as client:
        name, table = make_table(client, hdfs_kerberos, kerberos_metastore_uri, args)
        yield table
        for t in client.table_names(name):
            client.drop_table(f"{name}.{t}")
        drop_database(client, name)


@pytest.fixture
def plain_table(hdfs_plain, metastore_uri, monkeypatch):
    monkeypatch.setenv("ACID_HDFS_NAMENODES", hdfs_plain.namenodes)
    monkeypatch.delenv("ACID_HDFS_KERBEROS", raising=False)
    args = ["--metastore", metastore_uri, "--hdfs-namenodes", hdfs_plain.namenodes]
    with MetastoreClient(metastore_uri) as client:
        name, table = make_table(client, hdfs_plain, metastore_uri, args)
        yield table
        for t in client.table_names(name):
            client.drop_table(f"{name}.{t}")
        drop_database(client, name)


def _compact_both_ways(table: HdfsTable, tmp_path: Path, capsys) -> None:
    location = table.registered.client.get_table(table.name).sd.location
    assert location.startswith(table.hdfs.uri + "/warehouse/")  # hdfs://127.0.0.1:PORT/...
    committed = table.committed_ids()
    assert len(committed) == 30 - 8  # 0, 3, ..., 21 deleted; the aborted row not
    on_hdfs = table.hdfs.folder() + "/out"
    for out in (on_hdfs, str(tmp_path / "out")):
        argv = ["compact", "--table", table.name, *table.args, "--out", out, "--json"]
        assert cli.main(argv) == 0, capsys.readouterr().err
        summary = json.loads(capsys.readouterr().out)
        fs, path = resolve_filesystem(out)
        assert ids(fs, path) == committed
        assert fs.exists(summary["manifest_path"])
        if out == on_hdfs:
            # nothing left beside the snapshot but what the commit keeps
            names = {p.rsplit("/", 1)[1] for p in fs.find(path)}
            assert not [n for n in names if n.endswith((".tmp", ".new"))]


def test_a_table_on_kerberos_hdfs_is_read_by_name_and_its_snapshot_written_to_hdfs_and_locally(
    kerberos_table, tmp_path, capsys
):
    _compact_both_ways(kerberos_table, tmp_path, capsys)


def test_a_table_on_unsecured_hdfs_is_read_by_name_and_its_snapshot_written(
    plain_table, tmp_path, capsys
):
    _compact_both_ways(plain_table, tmp_path, capsys)


def test_compacting_a_slice_manifest_onto_hdfs_takes_the_hdfs_arguments(kerberos_table, tmp_path):
    """``compact --manifest`` names no table: the --hdfs-* and Kerberos arguments alone say
    where the manifest's hdfs:// table and the hdfs:// output answer (no setting in the
    environment of the CLI's process)."""
    cli_path = str(Path(sys.executable).with_name("airflow-acid"))
    env = {k: v for k, v in os.environ.items() if k not in STORAGE_SETTINGS}
    manifest = tmp_path / "manifest.json"
    made = subprocess.run(
        [cli_path, "manifest", "--table", kerberos_table.name, *kerberos_table.args,
         "--where", "id >= 12", "--out", str(manifest)],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    out = kerberos_table.hdfs.folder() + "/out"
    at = kerberos_table.args.index("--kerberos-principal")
    hdfs_args = kerberos_table.args[at:]  # the login, --hdfs-namenodes and --hdfs-kerberos
    assert "--hdfs-namenodes" in hdfs_args and "--metastore" not in hdfs_args
    compact = [cli_path, "compact", "--manifest", str(manifest), "--out", out]
    without = subprocess.run(compact, env=env, capture_output=True, text=True, timeout=300)
    assert without.returncode == cli.EXIT_ERROR
    assert "no namenode HTTP endpoint" in without.stderr.splitlines()[0], without.stderr
    done = subprocess.run(
        [*compact, *hdfs_args], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    fs, path = resolve_filesystem(out)  # this process has the settings (kerberos_table)
    assert ids(fs, path) == [i for i in kerberos_table.committed_ids() if i >= 12]


def test_an_hdfs_location_without_an_endpoint_is_one_line_and_nothing_is_written(
    kerberos_table, tmp_path, capsys, monkeypatch
):
    monkeypatch.setenv("ACID_HDFS_NAMENODES", "other.example.com:8020=http://127.0.0.1:9")
    HdfsFileSystem.clear_instance_cache()  # an instance made above knows its namenodes
    args = [a for a in kerberos_table.args]
    at = args.index("--hdfs-namenodes")
    del args[at : at + 2]
    out = tmp_path / "out"
    argv = ["compact", "--table", kerberos_table.name, *args, "--out", str(out)]
    assert cli.main(argv) == cli.EXIT_ERROR
    error = capsys.readouterr().err.splitlines()[0]
    authority = kerberos_table.hdfs.uri.removeprefix("hdfs://")
    assert f"hdfs://{authority}: no namenode HTTP endpoint" in error
    assert f"{authority}=http://NAMENODE:9870" in error
    assert not out.exists()
    with pytest.raises(HdfsEndpointError) as raised:
        resolve_filesystem(kerberos_table.hdfs.uri + "/warehouse")
    assert isinstance(raised.value, ConnectionError)


def test_permission_denied_on_hdfs_names_the_path_and_the_principal(kerberos_table, kdc, tmp_path):
    fs, _ = resolve_filesystem(
        kerberos_table.hdfs.uri + "/restricted",
        storage_options={"kerberos_principal": kdc.principal, "kerberos_keytab": kdc.keytab},
    )
    with pytest.raises(PermissionError) as raised:
        fs.ls("/restricted")
    message = str(raised.value)
    assert "/restricted" in message and "acid@ACID.TEST" in message and "Ranger" in message
    outsider, _ = resolve_filesystem(
        kerberos_table.hdfs.uri,
        storage_options={
            "kerberos_principal": "intruder@ACID.TEST",
            "kerberos_keytab": kdc.intruder_keytab,
        },
    )
    table_dir = kerberos_table.registered.writer.path
    with pytest.raises(PermissionError, match="intruder"):
        outsider.pipe_file(f"{table_dir}/_not_yours", b"x")
    assert not fs.exists(f"{table_dir}/_not_yours")
    # A folder that may not be listed fails a listing of the table: it is not left out of it.
    private = f"{table_dir}/_private"
    fs.pipe_file(f"{private}/kept", b"x")
    fs.chmod(private, "700")
    with pytest.raises(PermissionError, match="_private"):
        outsider.find(table_dir)
    assert f"{fs._strip_protocol(private)}/kept" in fs.find(table_dir)  # its owner lists it


def test_whole_writes_and_the_exclusive_create_on_webhdfs(kerberos_table):
    from airflow_provider_acid.acid.storage import create_exclusive, write_whole

    fs, folder = resolve_filesystem(kerberos_table.hdfs.folder())
    write_whole(fs, f"{folder}/pointer.json", b"1")
    write_whole(fs, f"{folder}/pointer.json", b"22")  # replaced, never half there
    assert fs.cat_file(f"{folder}/pointer.json") == b"22"
    assert create_exclusive(fs, f"{folder}/lock", b"mine") is True
    assert create_exclusive(fs, f"{folder}/lock", b"theirs") is False
    assert fs.cat_file(f"{folder}/lock") == b"mine"
    assert sorted(p.rsplit("/", 1)[1] for p in fs.ls(folder, detail=False)) == [
        "lock",
        "pointer.json",
    ]


def test_an_ha_nameservice_finds_the_namenode_that_answers(kerberos_table, kdc):
    import socket

    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        dead = free.getsockname()[1]
    live = kerberos_table.hdfs.namenodes.split("=", 1)[1]
    nameservice = {"prod": [f"http://127.0.0.1:{dead}", live]}  # the first one is down
    options = {"namenodes": nameservice, "kerberos_principal": kdc.principal,
               "kerberos_keytab": kdc.keytab}  # fmt: skip
    fs, path = resolve_filesystem("hdfs://prod/warehouse", storage_options=options)
    assert fs.url == f"{live}/webhdfs/v1" and fs.unstrip_protocol(path) == "hdfs://prod/warehouse"
    assert fs.isdir(path)
    nowhere = {"prod": [f"http://127.0.0.1:{dead}"] * 2}
    with pytest.raises(HdfsEndpointError, match="hdfs://prod: no active namenode"):
        resolve_filesystem(
            "hdfs://prod/warehouse", storage_options={**options, "namenodes": nowhere}
        )
