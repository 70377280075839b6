"""The Iceberg sink against real catalogs: Iceberg's REST catalog server (started here through
scripts/iceberg_rest.py) and the Hive Metastore of the metastore tests (scripts/metastore.py).

Each table is read back by name through a fresh catalog client, as another program would.
Run with ``ACID_TEST_METASTORE_HOME=/tmp/ms-<name>`` (see tests/metastore_fixtures.py).
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path

import pyarrow.compute as pc
import pytest
from cli_helpers import compact_json, compact_nation_iceberg
from pyiceberg.catalog import load_catalog

from airflow_provider_acid.cli import main
from airflow_provider_acid.output.iceberg_hive import HIVE4_CATALOG_IMPL

REPO = Path(__file__).resolve().parents[2]


def _rest_script():
    spec = importlib.util.spec_from_file_location("iceberg_rest", REPO / "scripts/iceberg_rest.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("iceberg_rest", module)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def rest_catalog(tmp_path_factory) -> Iterator[str]:
    """The URI of a running Iceberg REST catalog (stopped after the module)."""
    server = _rest_script().start(tmp_path_factory.mktemp("rest-catalog"))
    try:
        yield server.uri
    finally:
        server.stop()


def test_a_rest_catalog_holds_the_table_and_its_history(hive_table, tmp_path, capsys, rest_catalog):
    table, out = str(hive_table("nation")), str(tmp_path / "out")
    catalog_args = ["--iceberg-catalog", "type=rest", "--iceberg-catalog", f"uri={rest_catalog}"]
    extra = (*catalog_args, "--iceberg-table", "warehouse.nation")
    runs = [compact_nation_iceberg(capsys, table, out, hwm, *extra) for hwm in (3, 4, 4)]
    assert [r["newly_published"] for r in runs] == [True, True, False]
    block = runs[-1]["iceberg"]
    assert block["catalog"] == {"type": "rest", "uri": rest_catalog}

    fresh = load_catalog("elsewhere", type="rest", uri=rest_catalog)
    assert ("warehouse", "nation") in fresh.list_tables("warehouse")
    iceberg = fresh.load_table("warehouse.nation")
    assert [s.snapshot_id for s in iceberg.snapshots()] == [
        r["iceberg"]["snapshot_id"] for r in runs[:2]
    ]
    rows = iceberg.scan().to_arrow()
    assert rows.num_rows == 23_000
    assert set(pc.unique(rows.column("n_nationkey")).to_pylist()).isdisjoint({5, 19})
    assert iceberg.scan(snapshot_id=runs[0]["iceberg"]["snapshot_id"]).count() == 24_000
    # the server wrote the table's metadata where the sink asked: the output folder
    assert iceberg.metadata_location.removeprefix("file://").startswith(f"{out}/_iceberg/metadata/")

    assert main(["expire", out, "--format", "iceberg", *catalog_args,
                 "--iceberg-table", "warehouse.nation", "--keep", "1"]) == 0  # fmt: skip
    capsys.readouterr()
    iceberg = fresh.load_table("warehouse.nation")
    assert [s.snapshot_id for s in iceberg.snapshots()] == [runs[1]["iceberg"]["snapshot_id"]]
    assert iceberg.scan().count() == 23_000


def test_a_hive_catalog_registers_the_table_in_the_sources_metastore(metastore_db, capsys):
    """The source is read by name from the metastore, and the snapshot is registered in the
    same metastore as an Iceberg table, readable by name."""
    writer = metastore_db.writer("orders", [("id", "bigint"), ("name", "string")], buckets=4,
                                 bucket_by="id")  # fmt: skip
    metastore_db.register(writer)
    writer.insert([{"id": i, "name": f"n{i}"} for i in range(200)])
    target = metastore_db.table_name("orders_iceberg")
    out = str(metastore_db.folder / "orders_out")
    args = ["--table", metastore_db.table_name("orders"), "--metastore", metastore_db.uri,
            "--out", out, "--format", "iceberg", "--iceberg-catalog", "type=hive",
            "--iceberg-catalog", f"uri={metastore_db.uri}", "--iceberg-table", target]  # fmt: skip
    first = compact_json(capsys, *args)
    writer.delete(lambda row: row["id"] < 10)
    second = compact_json(capsys, *args)
    assert second["iceberg"]["table"] == target and second["newly_published"]
    block = second["iceberg"]["catalog"]  # opens with plain load_catalog, on Hive 4 too
    assert block == {"py-catalog-impl": HIVE4_CATALOG_IMPL, "uri": metastore_db.uri}

    registered = metastore_db.client.get_table(target)
    assert registered.parameters["table_type"].upper() == "ICEBERG"
    assert registered.parameters["metadata_location"].endswith(".metadata.json")
    fresh = load_catalog("another", **block)
    iceberg = fresh.load_table(target)
    assert sorted(iceberg.scan().to_arrow().column("id").to_pylist()) == list(range(10, 200))
    assert iceberg.scan(snapshot_id=first["iceberg"]["snapshot_id"]).count() == 200
    recorded = iceberg.current_snapshot().summary.additional_properties
    assert recorded["airflow-acid.source-name"] == metastore_db.table_name("orders")
    assert recorded["airflow-acid.write-ids"] == second["manifest"]["source"]["write_ids"]
