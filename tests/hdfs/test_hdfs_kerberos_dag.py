"""The main example DAG (acid_snapshot_materialisation) under ``dag.test()`` against the
Kerberos metastore and the Kerberos HDFS: the principal and keytab only in Airflow
connections, the table's location hdfs://, the snapshot written to HDFS."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pyarrow.dataset as ds
from hdfs_helpers import PRINCIPAL_TEMPLATE, make_table

from airflow_provider_acid.acid.hdfs import HdfsFileSystem
from airflow_provider_acid.acid.listing import resolve_filesystem
from airflow_provider_acid.kerberos import KerberosLogin
from airflow_provider_acid.metastore import MetastoreClient
from airflow_provider_acid.metastore.connection import MetastoreAddress
from airflow_provider_acid.testing.metastore_tables import drop_database

METASTORE_CONN, ACID_CONN = "kerberos_metastore_dag", "acid_hdfs_dag"


def test_the_materialisation_dag_runs_against_the_kerberos_metastore_and_hdfs(
    airflow_db, kdc, hdfs_kerberos, kerberos_metastore_uri, monkeypatch
):
    keytab = {"kerberos_principal": kdc.principal, "kerberos_keytab": kdc.keytab}
    host, port = kerberos_metastore_uri.removeprefix("thrift://").split(":")
    monkeypatch.setenv(
        f"AIRFLOW_CONN_{METASTORE_CONN.upper()}",
        json.dumps({
            "conn_type": "hive_metastore", "host": host, "port": int(port),
            "extra": {"auth_mechanism": "GSSAPI", "principal": PRINCIPAL_TEMPLATE, **keytab},
        }),
    )  # fmt: skip
    monkeypatch.setenv(
        f"AIRFLOW_CONN_{ACID_CONN.upper()}",
        json.dumps({
            "conn_type": "acid",
            "extra": {"hdfs_namenodes": hdfs_kerberos.namenodes, "hdfs_kerberos": True, **keytab},
        }),
    )  # fmt: skip
    # The table is made with the settings in the environment; the DAG gets none of them.
    monkeypatch.setenv("ACID_HDFS_NAMENODES", hdfs_kerberos.namenodes)
    monkeypatch.setenv("ACID_HDFS_KERBEROS", "1")
    monkeypatch.setenv("ACID_KERBEROS_PRINCIPAL", kdc.principal)
    monkeypatch.setenv("ACID_KERBEROS_KEYTAB", kdc.keytab)
    login = KerberosLogin(kdc.principal, kdc.keytab)
    address = MetastoreAddress.parse(
        kerberos_metastore_uri, auth="GSSAPI", kerberos=login, server_principal=PRINCIPAL_TEMPLATE
    )
    with MetastoreClient(address) as client:
        name, table = make_table(client, hdfs_kerberos, kerberos_metastore_uri, [])
        committed = table.committed_ids()
        out = hdfs_kerberos.folder() + "/snapshots"
        for variable in ("ACID_HDFS_NAMENODES", "ACID_HDFS_KERBEROS", "ACID_KERBEROS_PRINCIPAL",
                         "ACID_KERBEROS_KEYTAB"):  # fmt: skip
            monkeypatch.delenv(variable)
        HdfsFileSystem.clear_instance_cache()
        monkeypatch.setenv("ACID_TABLE", table.name)
        monkeypatch.setenv("ACID_CONN_ID", ACID_CONN)
        monkeypatch.setenv("ACID_METASTORE_CONN_ID", METASTORE_CONN)
        dags = str(Path(__file__).resolve().parents[2] / "dags")
        monkeypatch.syspath_prepend(dags)
        module = importlib.import_module("acid_snapshot_materialisation")
        module = importlib.reload(module)  # read by name: ACID_TABLE is set now
        conf = {"table": table.name, "metastore_conn_id": METASTORE_CONN, "output_uri": out,
                "predicate": ""}  # fmt: skip
        run = module.dag.test(run_conf=conf)
        tasks = {ti.task_id: ti.state for ti in run.get_task_instances()}
        assert run.state == "success", tasks
        fs, path = resolve_filesystem(
            out,
            storage_options={"namenodes": hdfs_kerberos.namenodes, "kerberos": True, **keytab},
        )
        rows = ds.dataset(path, filesystem=fs, format="parquet").to_table()
        assert sorted(rows.column("id").to_pylist()) == committed
        for t in client.table_names(name):
            client.drop_table(f"{name}.{t}")
        drop_database(client, name)
    sys.modules.pop("acid_snapshot_materialisation", None)
