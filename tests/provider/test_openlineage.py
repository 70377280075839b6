"""OpenLineage from every operator: the events the OpenLineage provider emits under dag.test().

Real parts only: the OpenLineage provider's listener with its file transport (one JSON event a
line), a real DAG run on the session's SQLite metadata database, a table the simulator writes
(storage-only) and one registered in the real Hive Metastore (by name). The run happens in a
subprocess: the provider reads its ``[openlineage]`` settings once per process, when its plugin
is imported. Without the provider (its imports blocked), the operators import and run as before.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pytest

from airflow_provider_acid.operators.lineage import hive_naming, location_naming

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent
REPO = TESTS.parent
CONN_ID = "metastore_lineage"
COLUMNS = [("id", "bigint"), ("s", "string"), ("amount", "double")]
PARTITION_COLUMNS = [("dt", "string")]
DEMO_COLUMNS = ["id", "category", "amount", "ts", "note", "dt"]


# -- naming, as OpenLineage's naming spec says -----------------------------------------------


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("/data/sales/", ("file", "/data/sales")),
        ("file:///data/sales", ("file", "/data/sales")),
        ("s3://warehouse/sales/orders/", ("s3://warehouse", "sales/orders")),
        ("s3a://warehouse/sales", ("s3://warehouse", "sales")),
        ("gs://bucket/t", ("gs://bucket", "t")),
        ("hdfs://nn:8020/user/hive/t", ("hdfs://nn:8020", "/user/hive/t")),
        ("memory://tables/t", ("memory", "/tables/t")),
    ],
)
def test_locations_are_named_by_their_storage(uri, expected):
    assert location_naming(uri) == expected


def test_a_relative_path_is_named_by_its_absolute_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert location_naming("t/sales") == ("file", f"{tmp_path}/t/sales")


def test_tables_read_by_name_are_named_by_the_metastore_and_db_table():
    assert hive_naming("thrift://hms:9083", "sales.orders") == ("hive://hms:9083", "sales.orders")
    # several endpoints: the first; no port: Hive's default
    assert hive_naming("thrift://a:9999,thrift://b:9083", "d.t") == ("hive://a:9999", "d.t")
    assert hive_naming("hms", "t") == ("hive://hms:9083", "default.t")


# -- the events of a live DAG run ------------------------------------------------------------


def run_dag_for_events(spec_path: str) -> None:
    """In a subprocess with ``[openlineage] transport`` set: the DAG of two snapshot chains
    (one table by name, one by location), run with dag.test(); writes the run's XComs."""
    sys.path[:0] = [str(HERE), str(TESTS)]
    from airflow.sdk import DAG, TaskGroup
    from test_example_dags import states, xcom
    from test_snapshot_tasks import register

    from airflow_provider_acid.operators.snapshot_tasks import acid_snapshot_tasks
    from airflow_provider_acid.sensors.acid import AcidDeltaSensor
    from airflow_provider_acid.sensors.metastore import AcidMetastoreWriteSensor

    spec = json.loads(Path(spec_path).read_text())
    with DAG(dag_id=spec["dag_id"], schedule=None) as dag:
        with TaskGroup("by_name"):
            wait = AcidMetastoreWriteSensor(
                task_id="wait", table=spec["table"], metastore_conn_id=CONN_ID, above_write_id=0
            )
            chain = acid_snapshot_tasks(
                table=spec["table"],
                metastore_conn_id=CONN_ID,
                output_uri=spec["by_name_out"],
                where="amount >= 20",
            )
            wait >> chain.first
        with TaskGroup("by_location"):
            wait = AcidDeltaSensor(task_id="wait", table_uri=spec["table_uri"], above_write_id=0)
            chain = acid_snapshot_tasks(
                table_uri=spec["table_uri"],
                output_uri=spec["by_location_out"],
                where="dt = '2024-01-02'",
                valid_write_ids=spec["write_ids"],
            )
            wait >> chain.first
    folder = Path(spec["folder"])
    run = register(dag, folder).test()
    out = {"state": run.state, "states": states(run)}
    for group in ("by_name", "by_location"):
        for task in ("wait", "manifest", "commit", "publish_metrics"):
            out[f"{group}.{task}"] = xcom(run, f"{group}.{task}")
    Path(spec["result"]).write_text(json.dumps(out))


def schema_file_url() -> str:
    from airflow_provider_acid.operators.lineage_facets import SCHEMA_URL

    return SCHEMA_URL


def read_events(folder: Path) -> list[dict[str, Any]]:
    """The file transport's events: one JSON document a file (``event-<time>.json``)."""
    return [json.loads(p.read_text()) for p in sorted(folder.glob("event-*.json"))]


def completes(events: list[dict[str, Any]], dag_id: str, task_id: str) -> list[dict[str, Any]]:
    name = f"{dag_id}.{task_id}"
    return [e for e in events if e["job"]["name"] == name and e["eventType"] == "COMPLETE"]


def only(events: list[dict[str, Any]]) -> dict[str, Any]:
    assert len(events) == 1, [e["job"]["name"] for e in events]
    return events[0]


def schema_of(dataset: dict[str, Any]) -> list[tuple[str, str]]:
    return [(f["name"], f["type"]) for f in dataset["facets"]["schema"]["fields"]]


@pytest.fixture
def lineage_run(airflow_db, metastore_db, tmp_path):
    """One DAG run with the file transport: a table by name (in the session's metastore)
    and a demo table by location; returns (events, XComs, the tables, the outputs)."""
    from airflow_provider_acid.testing import generate_demo_table

    by_name = metastore_db.writer("orders", COLUMNS, PARTITION_COLUMNS, buckets=2, bucket_by="id")
    metastore_db.register(by_name)
    by_name.insert(
        [
            {"id": i, "s": f"s{i}", "amount": i * 0.5, "dt": ("2024-01-01", "2024-01-02")[i % 2]}
            for i in range(200)
        ]
    )
    by_name.delete(lambda r: r["id"] % 9 == 0)
    demo = generate_demo_table(str(tmp_path / "demo"), rows_per_bucket=150, seed=5)

    events = tmp_path / "lineage"
    events.mkdir()
    spec = {
        "dag_id": "acid_lineage",
        "table": metastore_db.table_name("orders"),
        "table_uri": demo.path,
        "write_ids": demo.valid_write_ids(),
        "by_name_out": str(tmp_path / "by-name-out"),
        "by_location_out": str(tmp_path / "by-location-out"),
        "folder": str(tmp_path / "bag"),
        "result": str(tmp_path / "result.json"),
    }
    (tmp_path / "bag").mkdir()
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    host, port = metastore_db.uri.removeprefix("thrift://").rsplit(":", 1)
    env = {
        **os.environ,
        "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(
            {"type": "file", "log_file_path": str(events / "event")}
        ),
        "AIRFLOW__OPENLINEAGE__NAMESPACE": "acid-test",
        f"AIRFLOW_CONN_{CONN_ID.upper()}": json.dumps(
            {"conn_type": "hive_metastore", "host": host, "port": int(port)}
        ),
        "PYTHONPATH": os.pathsep.join([str(HERE), str(TESTS), str(REPO)]),
    }
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, test_openlineage as t; t.run_dag_for_events(sys.argv[1])",
            str(tmp_path / "spec.json"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    result = json.loads(Path(spec["result"]).read_text())
    assert result["state"] == "success", result["states"]
    return read_events(events), result, spec, by_name, demo


def test_every_task_emits_its_datasets_and_run_facets(lineage_run, metastore_db):
    events, result, spec, by_name, demo = lineage_run
    dag_id = spec["dag_id"]
    hive_namespace, hive_name = hive_naming(metastore_db.uri, spec["table"])
    assert hive_namespace.startswith("hive://127.0.0.1:")
    assert all(e["job"]["namespace"] == "acid-test" for e in events)

    # -- by name: the metastore's table, its columns, the write-id list the manifest pinned
    manifest = result["by_name.manifest"]
    event = only(completes(events, dag_id, "by_name.manifest"))
    (source,) = event["inputs"]
    assert (source["namespace"], source["name"]) == (hive_namespace, hive_name)
    assert schema_of(source) == COLUMNS + PARTITION_COLUMNS
    assert source["facets"]["storage"]["storageLayer"] == "hive-acid"
    view = event["run"]["facets"]["acidReadView"]
    assert view["validWriteIds"] == manifest["write_ids"] and view["table"] == hive_name
    assert view["validTxns"] == manifest["txns"] and view["storageOnly"] is False
    assert view["metastore"] == metastore_db.uri
    pruning = event["run"]["facets"]["acidPruning"]
    metrics = manifest["metrics"]
    assert pruning["predicate"] == manifest["predicate"]
    for field, key in [
        ("partitionsTotal", "partitions_total"),
        ("partitionsKept", "partitions_kept"),
        ("slicesTotal", "slices_total"),
        ("slicesKept", "slices_kept"),
        ("filesTotal", "files_total"),
        ("filesCandidate", "files_candidate"),
        ("bytesTotal", "bytes_total"),
        ("bytesKept", "bytes_kept"),
        ("skippingRatio", "skipping_ratio"),
    ]:
        assert pruning[field] == metrics[key], field
    assert pruning["_schemaURL"].endswith("#/$defs/AcidPruningRunFacet")
    # the START event already names the table, from the arguments alone
    (start,) = [
        e
        for e in events
        if e["job"]["name"] == f"{dag_id}.by_name.manifest" and e["eventType"] == "START"
    ]
    assert [(d["namespace"], d["name"]) for d in start["inputs"]] == [(hive_namespace, hive_name)]

    commit = result["by_name.commit"]
    event = only(completes(events, dag_id, "by_name.commit"))
    (source,), (output,) = event["inputs"], event["outputs"]
    assert (source["namespace"], source["name"]) == (hive_namespace, hive_name)
    assert (output["namespace"], output["name"]) == ("file", spec["by_name_out"])
    assert schema_of(output) == COLUMNS + PARTITION_COLUMNS
    rows = ds.dataset(spec["by_name_out"], format="parquet").count_rows()
    stats = output["outputFacets"]["outputStatistics"]
    assert (stats["rowCount"], stats["fileCount"]) == (rows, commit["files"])
    compaction = event["run"]["facets"]["acidCompaction"]
    assert compaction["snapshotId"] == commit["snapshot_id"] and compaction["committed"] is True
    assert compaction["rowsWritten"] == rows == commit["rows_written"]
    assert (
        compaction["rowsRead"]
        - compaction["rowsInvalid"]
        - compaction["rowsDeleted"]
        - (compaction["rowsFiltered"])
        == rows
    )
    assert compaction["rowsDeleted"] > 0 and compaction["rowsFiltered"] > 0
    assert event["run"]["facets"]["acidReadView"]["validWriteIds"] == manifest["write_ids"]

    # each mapped compaction: the table to the (uncommitted) folder, its own slice's rows
    mapped = completes(events, dag_id, "by_name.compact")
    assert len(mapped) == len(manifest["slice_keys"])
    assert sorted(e["run"]["facets"]["acidCompaction"]["sliceKey"] for e in mapped) == sorted(
        manifest["slice_keys"]
    )
    assert sum(e["run"]["facets"]["acidCompaction"]["rowsWritten"] for e in mapped) == rows
    for e in mapped:
        assert [(d["namespace"], d["name"]) for d in e["inputs"]] == [(hive_namespace, hive_name)]
        assert [d["name"] for d in e["outputs"]] == [spec["by_name_out"]]
        assert e["run"]["facets"]["acidCompaction"]["committed"] is False

    # -- by location: the storage path, the given write-id list, columns from the plan
    event = only(completes(events, dag_id, "by_location.commit"))
    (source,), (output,) = event["inputs"], event["outputs"]
    assert (source["namespace"], source["name"]) == ("file", demo.path)
    assert [n for n, _ in schema_of(source)] == DEMO_COLUMNS
    assert (output["namespace"], output["name"]) == ("file", spec["by_location_out"])
    view = event["run"]["facets"]["acidReadView"]
    assert view["validWriteIds"] == spec["write_ids"] and "metastore" not in view
    on_day_two = ds.dataset(spec["by_location_out"], format="parquet").count_rows()
    assert event["run"]["facets"]["acidCompaction"]["rowsWritten"] == on_day_two > 0
    manifest = result["by_location.manifest"]
    event = only(completes(events, dag_id, "by_location.manifest"))
    assert event["run"]["facets"]["acidPruning"]["slicesKept"] == manifest["metrics"]["slices_kept"]
    assert [(d["namespace"], d["name"]) for d in event["inputs"]] == [("file", demo.path)]

    # the sensors name the table they watched; by name, with the write-id list they saw
    event = only(completes(events, dag_id, "by_location.wait"))
    assert [(d["namespace"], d["name"]) for d in event["inputs"]] == [("file", demo.path)]
    event = only(completes(events, dag_id, "by_name.wait"))
    assert [(d["namespace"], d["name"]) for d in event["inputs"]] == [(hive_namespace, hive_name)]
    seen = event["run"]["facets"]["acidReadView"]["validWriteIds"]
    assert (
        seen == result["by_name.wait"]["valid_write_ids"] == result["by_name.manifest"]["write_ids"]
    )

    # every facet of ours in every event matches its JSON schema (shipped beside the facets)
    import jsonschema

    schema_file = REPO / "airflow_provider_acid" / "operators" / "lineage_facets.schema.json"
    definitions = json.loads(schema_file.read_text())["$defs"]
    keys = {
        "acidReadView": "AcidReadViewRunFacet",
        "acidPruning": "AcidPruningRunFacet",
        "acidCompaction": "AcidCompactionRunFacet",
    }
    checked = 0
    for e in events:
        for key, facet in e["run"]["facets"].items():
            if key in keys:
                own = definitions[keys[key]]["allOf"][1]  # [0] is OpenLineage's RunFacet
                jsonschema.validate(facet, own)
                assert facet["_schemaURL"] == f"{schema_file_url()}#/$defs/{keys[key]}"
                checked += 1
    assert checked >= 20

    # the metrics task carries both figures
    event = only(completes(events, dag_id, "by_location.publish_metrics"))
    facets = event["run"]["facets"]
    record = result["by_location.publish_metrics"]
    assert facets["acidPruning"]["skippingRatio"] == record["pruning"]["skipping_ratio"]
    assert facets["acidCompaction"]["rowsDeleted"] == record["compaction"]["rows_deleted"]


def test_a_storage_only_read_says_so_in_its_read_view(hive_table, tmp_path):
    """No metastore and no write-id list: the read view facet flags it and carries the
    warning; the table is named by its location, its columns from the files."""
    from openlineage.client.serde import Serde

    from airflow_provider_acid.acid.source import STORAGE_ONLY_WARNING
    from airflow_provider_acid.operators.acid import AcidCompactOperator

    table = hive_table("nation")
    task = AcidCompactOperator(task_id="c", table_uri=str(table), output_uri=str(tmp_path / "o"))
    assert task.get_openlineage_facets_on_complete(None).run_facets == {}  # not run: inputs only
    task.execute({})
    lineage = task.get_openlineage_facets_on_complete(None)
    view = json.loads(Serde.to_json(lineage.run_facets["acidReadView"]))
    assert view["storageOnly"] is True and view["warnings"] == [STORAGE_ONLY_WARNING]
    assert "validWriteIds" not in view  # none was given
    (source,) = [json.loads(Serde.to_json(d)) for d in lineage.inputs]
    assert (source["namespace"], source["name"]) == ("file", str(table))
    assert [f["name"] for f in source["facets"]["schema"]["fields"]] == [
        "n_nationkey",
        "n_name",
        "n_regionkey",
        "n_comment",
    ]


# -- Iceberg and Delta outputs ----------------------------------------------------------------


@pytest.mark.parametrize("output_format", ["delta", "iceberg"])
def test_a_published_table_is_the_output_dataset(hive_table, tmp_path, output_format):
    """With ``output_format``, the output is the table the sink published: named by its
    location (the output folder, where both sinks keep it), its storage layer the format;
    an Iceberg table also by its catalog name (a symlink)."""
    from openlineage.client.serde import Serde

    from airflow_provider_acid.operators.acid import AcidCompactOperator

    out = tmp_path / "out"
    task = AcidCompactOperator(
        task_id="c",
        table_uri=str(hive_table("nation")),
        output_uri=str(out),
        output_format=output_format,
    )
    summary = task.execute({})
    lineage = task.get_openlineage_facets_on_complete(None)
    (output,) = [json.loads(Serde.to_json(d)) for d in lineage.outputs]
    assert (output["namespace"], output["name"]) == ("file", str(out))
    assert output["facets"]["storage"] == {
        **output["facets"]["storage"],
        "storageLayer": output_format,
        "fileFormat": "parquet",
    }
    assert output["outputFacets"]["outputStatistics"]["rowCount"] == 23000
    facet = json.loads(Serde.to_json(lineage.run_facets["acidCompaction"]))
    assert facet["outputFormat"] == output_format and facet["rowsWritten"] == 23000
    if output_format == "iceberg":
        (link,) = output["facets"]["symlinks"]["identifiers"]
        asset_uri = summary["asset_uri"]
        assert link["type"] == "TABLE" and link["name"] == "acid.nation"
        assert asset_uri == f"{link['namespace']}/acid/nation"
    else:
        assert "symlinks" not in output["facets"]


# -- without the OpenLineage provider -------------------------------------------------------

BLOCKED_RUN = r"""
import importlib.abc, sys

class Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        blocked = ("openlineage.", "airflow.providers.openlineage")
        if name == "openlineage" or name.startswith(blocked):
            raise ImportError(f"{name} is blocked (no OpenLineage here)")
        return None

sys.meta_path.insert(0, Blocker())
# and, as if they were not installed, no OpenLineage distributions (nor their entry points)
import importlib.metadata
import importlib_metadata


def hiding(distributions):
    def without_openlineage(**kwargs):
        for dist in distributions(**kwargs):
            if "openlineage" not in (dist.metadata["name"] or "").lower():
                yield dist

    return without_openlineage


importlib.metadata.distributions = hiding(importlib.metadata.distributions)
importlib_metadata.distributions = hiding(importlib_metadata.distributions)
try:
    import openlineage.client  # noqa: F401
    raise SystemExit("the blocker let openlineage through")
except ImportError:
    pass

from airflow_provider_acid.operators import acid, lineage, snapshot_tasks  # noqa: F401
from airflow_provider_acid.sensors import acid as sensor, metastore  # noqa: F401
from airflow_provider_acid.operators.acid import AcidCompactOperator

try:
    import airflow_provider_acid.operators.lineage_facets  # noqa: F401
    raise SystemExit("lineage_facets imported without OpenLineage")
except ImportError:
    pass

op = AcidCompactOperator(task_id="c", table_uri=sys.argv[1], output_uri=sys.argv[2])
summary = op.execute({})
assert op.get_openlineage_facets_on_complete(None) is None
assert op.get_openlineage_facets_on_start() is None
assert not any(m.startswith("openlineage") for m in sys.modules), "openlineage was imported"
print(summary["rows_written"])
"""


def test_operators_import_and_run_without_openlineage(hive_table, tmp_path):
    table = hive_table("nation")
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-c", BLOCKED_RUN, str(table), str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    written = int(done.stdout.strip().splitlines()[-1])
    assert written == ds.dataset(str(out), format="parquet").count_rows() == 23000


# -- provider metadata as `airflow providers` shows it ---------------------------------------


def airflow_cli(home: Path, *args: str) -> Any:
    env = {**os.environ, "AIRFLOW_HOME": str(home)}
    done = subprocess.run(
        [str(Path(sys.executable).with_name("airflow")), *args, "-o", "json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def test_airflow_providers_get_shows_connections_operators_triggers_and_links(tmp_path):
    (info,) = airflow_cli(tmp_path, "providers", "get", "airflow-provider-acid", "--full")
    connections = {c["connection-type"]: c for c in info["connection-types"]}
    # hive_metastore is the apache-hive provider's, installed beside (test_hive_provider.py)
    assert set(connections) == {"acid", "acid_metastore"}
    assert connections["acid"]["hook-class-name"] == "airflow_provider_acid.hooks.acid.AcidHook"
    assert connections["acid"]["conn-fields"]["secret"]["schema"]["format"] == "password"
    assert "auth_mechanism" in connections["acid_metastore"]["conn-fields"]
    modules = {
        kind: [m for entry in info[kind] for m in entry["python-modules"]]
        for kind in ("operators", "sensors", "triggers", "hooks")
    }
    assert {
        "airflow_provider_acid.operators.acid",
        "airflow_provider_acid.operators.pruning",
    } <= set(modules["operators"])
    assert set(modules["sensors"]) >= {
        "airflow_provider_acid.sensors.acid",
        "airflow_provider_acid.sensors.metastore",
    }
    assert set(modules["triggers"]) >= {
        "airflow_provider_acid.triggers.acid",
        "airflow_provider_acid.triggers.metastore",
        "airflow_provider_acid.triggers.events",  # the asset watchers' event triggers
    }
    triggers = airflow_cli(tmp_path, "providers", "triggers")
    ours = {t["class"] for t in triggers if t["package_name"] == "airflow-provider-acid"}
    assert ours == set(modules["triggers"])
    links_module = REPO / "airflow_provider_acid" / "operators" / "links.py"
    if links_module.exists():
        link = "airflow_provider_acid.operators.links.AcidPruningReportLink"
        assert link in info["extra-links"]
        listed = airflow_cli(tmp_path, "providers", "links")
        assert link in {entry["extra_link_class_name"] for entry in listed}
