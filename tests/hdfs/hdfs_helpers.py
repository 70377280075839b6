"""A table on HDFS registered in a real metastore, shared by the HDFS tests; the environment
and the ``airflow`` command lines that run the main example DAG on it in subprocesses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pyarrow.dataset as ds

from airflow_provider_acid.metastore import MetastoreClient
from airflow_provider_acid.testing import AcidTableWriter
from airflow_provider_acid.testing.metastore_tables import ensure_database, register_table

PRINCIPAL_TEMPLATE = "hive/_HOST@ACID.TEST"
REPO = Path(__file__).resolve().parents[2]
MAIN_DAG = "acid_snapshot_materialisation"
METASTORE_CONN, ACID_CONN = "kerberos_metastore_dag", "acid_hdfs_dag"
#: the settings that would make hdfs:// and Kerberos work without the connections
STORAGE_SETTINGS = (
    "ACID_HDFS_NAMENODES", "ACID_HDFS_KERBEROS", "ACID_KERBEROS_PRINCIPAL", "ACID_KERBEROS_KEYTAB",
)  # fmt: skip


class HdfsTable:
    """A registered table on HDFS and the CLI arguments that read it."""

    def __init__(self, registered, uri: str, args: list[str], hdfs) -> None:
        self.registered, self.uri, self.args, self.hdfs = registered, uri, args, hdfs

    @property
    def name(self) -> str:
        return self.registered.name

    def committed_ids(self) -> list[int]:
        rows = self.registered.writer.expected_rows(str(self.registered.read_view().write_ids))
        return sorted(r["id"] for r in rows.to_pylist())


def ids(fs, path: str) -> list[int]:
    table = ds.dataset(path, filesystem=fs, format="parquet").to_table()
    return sorted(table.column("id").to_pylist())


def make_table(client: MetastoreClient, hdfs, uri: str, args: list[str], *, writes: bool = True):
    """``h_<8 hex>.sales`` on HDFS, partitioned by day in two buckets; with ``writes``, two
    inserts and a delete committed and an insert aborted (:func:`write_history`)."""
    name = f"h_{uuid.uuid4().hex[:8]}"
    folder = hdfs.folder()
    ensure_database(client, name, folder)  # the metastore makes the folder on HDFS itself
    writer = AcidTableWriter(
        f"{folder}/sales", [("id", "bigint"), ("name", "string")], [("dt", "string")],
        buckets=2, bucket_by="id", database=name, table_name="sales",
    )  # fmt: skip
    registered = register_table(client, writer)
    if writes:
        write_history(writer)
    return name, HdfsTable(registered, uri, args, hdfs)


def write_history(writer: AcidTableWriter) -> None:
    """Committed: 24 rows, a delete of every third, 6 rows more; aborted: one row."""
    days = ("2024-01-01", "2024-01-02")
    writer.insert([{"id": i, "name": f"n{i}", "dt": days[i % 2]} for i in range(24)])
    writer.delete(lambda r: r["id"] % 3 == 0)
    writer.insert([{"id": i, "name": f"n{i}", "dt": days[i % 2]} for i in range(24, 30)])
    aborted = writer.begin()
    aborted.insert([{"id": 700, "name": "aborted", "dt": days[0]}])
    aborted.abort()


def dag_environment(kdc, hdfs, metastore_uri: str, table: str, **metastore_extra) -> dict:
    """The environment of an Airflow process running the main DAG on ``table`` by name: the
    ``hive_metastore`` and ``acid`` connections as ``AIRFLOW_CONN_*`` with the Kerberos fields
    (``metastore_extra`` added to the first), and none of :data:`STORAGE_SETTINGS`, so that only
    the connections can make the Kerberos metastore and hdfs:// work."""
    keytab = {"kerberos_principal": kdc.principal, "kerberos_keytab": kdc.keytab}
    host, port = metastore_uri.removeprefix("thrift://").split(":")
    metastore = {
        "conn_type": "hive_metastore", "host": host, "port": int(port),
        "extra": {"auth_mechanism": "GSSAPI", "principal": PRINCIPAL_TEMPLATE, **keytab,
                  **metastore_extra},
    }  # fmt: skip
    acid = {
        "conn_type": "acid",
        "extra": {"hdfs_namenodes": hdfs.namenodes, "hdfs_kerberos": True, **keytab},
    }
    env = {k: v for k, v in os.environ.items() if k not in STORAGE_SETTINGS}
    env[f"AIRFLOW_CONN_{METASTORE_CONN.upper()}"] = json.dumps(metastore)
    env[f"AIRFLOW_CONN_{ACID_CONN.upper()}"] = json.dumps(acid)
    env.update(ACID_TABLE=table, ACID_CONN_ID=ACID_CONN, ACID_METASTORE_CONN_ID=METASTORE_CONN)
    env.update(AIRFLOW__CORE__DAGS_FOLDER=str(REPO / "dags"), PYTHONUNBUFFERED="1")
    return env


def dags_test(table: str, out: str, *options: str) -> list[str]:
    """``airflow dags test`` of the main DAG on ``table``, its snapshots going to ``out``."""
    conf = {"table": table, "metastore_conn_id": METASTORE_CONN, "output_uri": out,
            "predicate": ""}  # fmt: skip
    airflow = str(Path(sys.executable).with_name("airflow"))
    return [airflow, "dags", "test", MAIN_DAG, "--conf", json.dumps(conf), *options]


def run_logged(argv: list[str], env: dict, log: Path, timeout: float) -> int:
    """Run ``argv`` to its end (at most ``timeout`` s), its output in ``log``; the exit code."""
    with open(log, "wb") as sink:
        done = subprocess.run(
            argv, env=env, stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            timeout=timeout,
        )  # fmt: skip
    return done.returncode


def tail(log: Path, lines: int = 60) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


def snapshot_ids(kdc, hdfs, out: str) -> list[int]:
    """The ids of the rows of the snapshot committed at ``out`` on HDFS."""
    from airflow_provider_acid.acid.listing import resolve_filesystem

    options = {"namenodes": hdfs.namenodes, "kerberos": True,
               "kerberos_principal": kdc.principal, "kerberos_keytab": kdc.keytab}  # fmt: skip
    fs, path = resolve_filesystem(out, storage_options=options)
    return ids(fs, path)
