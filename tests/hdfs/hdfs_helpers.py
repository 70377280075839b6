"""A table on HDFS registered in a real metastore, shared by the HDFS tests."""

from __future__ import annotations

import uuid

import pyarrow.dataset as ds

from airflow_provider_acid.metastore import MetastoreClient
from airflow_provider_acid.testing import AcidTableWriter
from airflow_provider_acid.testing.metastore_tables import ensure_database, register_table

PRINCIPAL_TEMPLATE = "hive/_HOST@ACID.TEST"


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


def make_table(client: MetastoreClient, hdfs, uri: str, args: list[str]):
    name = f"h_{uuid.uuid4().hex[:8]}"
    folder = hdfs.folder()
    ensure_database(client, name, folder)  # the metastore makes the folder on HDFS itself
    writer = AcidTableWriter(
        f"{folder}/sales", [("id", "bigint"), ("name", "string")], [("dt", "string")],
        buckets=2, bucket_by="id", database=name, table_name="sales",
    )  # fmt: skip
    registered = register_table(client, writer)
    days = ("2024-01-01", "2024-01-02")
    writer.insert([{"id": i, "name": f"n{i}", "dt": days[i % 2]} for i in range(24)])
    writer.delete(lambda r: r["id"] % 3 == 0)
    writer.insert([{"id": i, "name": f"n{i}", "dt": days[i % 2]} for i in range(24, 30)])
    aborted = writer.begin()
    aborted.insert([{"id": 700, "name": "aborted", "dt": days[0]}])
    aborted.abort()
    return name, HdfsTable(registered, uri, args, hdfs)
