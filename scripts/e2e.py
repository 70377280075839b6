"""`make e2e`: one DAG run through a real Airflow 3, LocalExecutor and SQLite, on loopback.

    .venv/bin/python scripts/e2e.py [--probe] [--dag-id ID] [--dags-folder DIR] [--conf JSON]

Starts, in a temporary AIRFLOW_HOME, the api-server, scheduler, dag-processor and triggerer
(each in its own process group, all on 127.0.0.1), waits for /api/v2/monitor/health, triggers
the DAG through the REST API with a conf (``POST /api/v2/dags/{id}/dagRuns``, as the UI's
trigger form does) and follows the run to its end. Then it proves from Airflow's own records
that a deferrable sensor went through the triggerer, and checks what the run wrote.

By default it runs ``acid_snapshot_on_demand`` from ``dags/`` on a demo table it writes to the
temporary folder, with conf ``{"table_uri", "output_uri", "valid_write_ids",
"wait_above_write_id"}`` (the sensor ``wait_for_deltas`` waits above the table's newest write);
``--conf`` is merged over that conf. ``--probe`` runs the self-check DAG
``tests/e2e_dags/acid_e2e_probe.py`` instead. Once the sensor is seen deferred on the
triggerer, the script adds a delete delta to the demo table (a new Hive write): the sensor can
only have woken up in the triggerer. The check step compares the committed snapshot with the
rows a correct Hive reader returns for ``valid_write_ids``.

Then, unless ``--no-metastore``, the same DAG reads a table by name: the script starts a real
Hive Metastore of its own (``scripts/metastore.py``, a fresh Derby database in the temporary
folder), writes a demo table registered there under its transactions (one write aborted, one
left open, their files on storage), and triggers the DAG with ``{"table", "metastore_conn_id",
"output_uri", "wait_above_write_id"}``. Its sensor ``wait_for_commits`` must wait in the
triggerer until the script commits a write in the metastore, and the snapshot must hold exactly
the committed rows of the write-id list the manifest pinned.

With the default DAGs folder, ``acid_snapshot_on_change`` watches a third demo table through
an asset watcher (scripts/_e2e_watcher.py): once the script writes a delete delta there, a run
must appear that nobody triggered (``asset_triggered``, its asset event the trigger's, naming
the new folder) and snapshot the table. The manifest tasks' "Pruning report" links must answer
the report page from the API server, with the commit's rows. And ``acid_snapshot_materialisation``
is triggered with ``"logical_date": null`` (scripts/_e2e_scheduled.py): its run, which has no
data interval, must succeed, its mapped compaction tasks named by their slice keys.

Exits 0 only if every step passed; stops every process it started in every case; keeps the
temporary folder (logs under ``logs/``) when a step failed or with ``--keep``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _e2e_common import (
    PROBE_DAG_ID,
    PROBE_DAGS,
    PROBE_SENSOR_TASK,
    REPO,
    AirflowApi,
    Deferral,
    DemoTable,
    E2EError,
    Services,
    WatchedRun,
    airflow_setup,
    check_dags_folder,
    check_loopback_only,
    check_snapshot_rows,
    log,
    make_demo_table,
    migrate_database,
    parse_conf,
    prove_deferred,
    run_dag,
    run_script,
    start_airflow,
    wait_for_api,
    wait_for_dag,
    wait_for_defer_exit_event,
    wait_for_health,
)
from _e2e_lineage import check_lineage, lineage_env
from _e2e_scheduled import run_without_logical_date, scheduled_env
from _e2e_watcher import (
    ON_CHANGE_DAG_ID,
    check_report_link,
    prepare_watched_table,
    reports_plugin_env,
    run_on_change,
)

DEFAULT_DAG_ID = "acid_snapshot_on_demand"
DEFAULT_DAGS = REPO / "dags"
DEFAULT_SENSOR_TASK = "wait_for_deltas"  # acid_snapshot_on_demand's deferrable AcidDeltaSensor


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments both e2e scripts take: which DAG, with what conf, checked how."""
    parser.add_argument(
        "--probe",
        action="store_true",
        help=f"run the self-check DAG {PROBE_DAG_ID} from {PROBE_DAGS}",
    )
    parser.add_argument("--dag-id", help=f"DAG to trigger (default {DEFAULT_DAG_ID})")
    parser.add_argument("--dags-folder", type=Path, help=f"dags folder (default {DEFAULT_DAGS})")
    parser.add_argument("--conf", help="JSON object (or @file) merged over the default conf")
    parser.add_argument(
        "--deferred-task",
        help=f"task id that must go through the triggerer (default {DEFAULT_SENSOR_TASK}; "
        f"{PROBE_SENSOR_TASK} with --probe; any task for another DAG)",
    )
    parser.add_argument(
        "--no-nudge",
        action="store_true",
        help="do not add a delete delta to the demo table once a task defers",
    )
    parser.add_argument(
        "--rows-per-bucket",
        type=int,
        default=2_000,
        help="size of the demo table (2 partitions x 4 buckets)",
    )
    parser.add_argument(
        "--no-metastore",
        action="store_true",
        help="skip the second run, which reads a table by name through a real Hive Metastore",
    )
    parser.add_argument("--timeout", type=float, default=300, help="seconds a run may take")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")


def resolve_run_arguments(args: argparse.Namespace) -> argparse.Namespace:
    args.dag_id = args.dag_id or (PROBE_DAG_ID if args.probe else DEFAULT_DAG_ID)
    args.dags_folder = (args.dags_folder or (PROBE_DAGS if args.probe else DEFAULT_DAGS)).resolve()
    if args.deferred_task is None and args.dag_id in (PROBE_DAG_ID, DEFAULT_DAG_ID):
        args.deferred_task = PROBE_SENSOR_TASK if args.probe else DEFAULT_SENSOR_TASK
    return args


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="scripts/e2e.py", description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    add_run_arguments(parser)
    return resolve_run_arguments(parser.parse_args(argv))


def prepare_table_and_conf(
    args: argparse.Namespace, workdir: Path, output_name: str = "snapshot"
) -> tuple[DemoTable, dict[str, Any]]:
    """The demo table (written here, so the script can add writes later) and the run's conf."""
    table = make_demo_table(workdir / "warehouse" / "demo_table", args.rows_per_bucket)
    log(f"demo table {table.uri}: {table.valid_write_ids}")
    conf = default_conf(args, table, str(workdir / "output" / output_name))
    conf.update(parse_conf(args.conf) or {})
    return table, conf


def default_conf(args: argparse.Namespace, table: DemoTable, output_uri: str) -> dict[str, Any]:
    """What the trigger form would send: the on-demand DAG's Params, or the probe's."""
    if args.probe:
        # The sensor waits above the table's current high watermark: it cannot succeed
        # before the script's own write, so it has to defer.
        return {
            "table_uri": table.uri,
            "above_write_id": table.high_watermark,
            "output_uri": output_uri,
        }
    # wait_above_write_id: the DAG's deferrable sensor waits for a write above the snapshot's
    # high watermark, which only the script's own later write provides (see nudge_table).
    return {
        "table_uri": table.uri,
        "output_uri": output_uri,
        "valid_write_ids": table.valid_write_ids,
        "wait_above_write_id": table.high_watermark,
    }


#: the conf keys holding the write id a DAG's sensor waits above (on-demand DAG, probe)
WAIT_KEYS = ("wait_above_write_id", "above_write_id")


def conf_for_another_run(conf: dict[str, Any], table: DemoTable, output_uri: str) -> dict[str, Any]:
    """The same snapshot request into another output, its sensor waiting above the newest
    write: so it defers again and wakes up on the script's next write (see nudge_table), the
    snapshot itself still bounded by the same valid_write_ids."""
    again = dict(conf, output_uri=output_uri)
    for key in WAIT_KEYS:
        if key in again:
            again[key] = table.latest_write_id
    return again


def nudge_table(table: DemoTable, services: Services, enabled: bool) -> Any:
    """The on_deferred hook of run_dag: a new Hive write once the sensor waits.

    A sensor that waits in the triggerer for a write the script makes only after seeing it
    ``deferred`` cannot have been satisfied anywhere else. The write waits for the scheduler
    to take in the deferring attempt's executor event first (see wait_for_defer_exit_event).
    """

    def on_deferred(deferral: Deferral) -> None:
        if not enabled:
            return
        wait_for_defer_exit_event(services, deferral, timeout=60)
        write_ids = table.add_delete_delta()
        log(f"  {deferral.task} waits in the triggerer: wrote a delete delta ({write_ids})")

    return on_deferred


def check_outputs(args: argparse.Namespace, run: WatchedRun, table: DemoTable) -> None:
    """The check step: what the run wrote is right."""
    conf = run.conf
    output_uri = conf.get("output_uri")
    if args.probe:
        result = json.loads(Path(output_uri, "result.json").read_text())
        items = int(conf.get("items", 8))
        if result["squares"] != [i * i for i in range(items)]:
            raise E2EError(f"probe result.json is wrong: {result}")
        log(f"probe result.json holds the {items} squares")
        return
    same_source = (
        conf.get("table_uri") == table.uri
        and conf.get("valid_write_ids") == table.valid_write_ids
        and not conf.get("predicate")
    )
    if same_source:
        check_snapshot_rows(output_uri, table.expected_rows())
    elif not Path(output_uri, "_SUCCESS").exists():
        raise E2EError(f"{output_uri}/_SUCCESS missing: no committed snapshot")
    else:
        log(f"{output_uri} holds a committed snapshot (rows not compared: custom source)")


# -- the metastore path: the same DAG reading a table by name ---------------------------------

METASTORE_CONN_ID = "metastore_e2e"
METASTORE_SENSOR_TASK = "wait_for_commits"  # acid_snapshot_on_demand's AcidMetastoreWriteSensor
METASTORE_SCRIPT = REPO / "scripts" / "metastore.py"
METASTORE_TRIGGER_CLASSPATH = "airflow_provider_acid.triggers.metastore.AcidMetastoreWriteTrigger"


@dataclass
class MetastoreTable:
    """A demo table registered in the real metastore, written under its transactions, with
    one write aborted and one left open (their files on storage)."""

    uri: str  # the metastore's
    name: str
    writer: Any
    rows_on_storage: int

    def commit_a_delete(self) -> str:
        """One more committed write: delete 1% of the rows (committed in the metastore)."""
        self.writer.delete(self.writer.sample_identities(0.01, seed=11))
        return self.writer.valid_write_ids()


def start_metastore(home: Path) -> str:
    """A real Hive Metastore of this run's own (scripts/metastore.py, a fresh Derby database)."""
    started = subprocess.run(
        [sys.executable, str(METASTORE_SCRIPT), "start", "--home", str(home)],
        capture_output=True,
        text=True,
        timeout=1200,
        stdin=subprocess.DEVNULL,
    )
    lines = started.stdout.strip().splitlines()
    if started.returncode != 0 or not lines or not lines[-1].startswith("thrift://"):
        raise E2EError(f"the metastore did not start:\n{started.stdout}{started.stderr[-3000:]}")
    log(f"metastore {lines[-1]} ({started.stderr.strip().splitlines()[-1]})")
    return lines[-1]


def stop_metastore(home: Path) -> None:
    subprocess.run(
        [sys.executable, str(METASTORE_SCRIPT), "stop", "--home", str(home)],
        capture_output=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def make_metastore_table(uri: str, folder: Path, rows_per_bucket: int) -> MetastoreTable:
    from airflow_provider_acid.metastore import MetastoreClient
    from airflow_provider_acid.testing import generate_demo_table
    from airflow_provider_acid.testing.metastore_tables import register_table, storage_only_rows

    client = MetastoreClient(uri).open()  # kept open: the later commit goes through it
    writer = generate_demo_table(
        str(folder / "sales"),
        rows_per_bucket=rows_per_bucket,
        database="e2e",
        table_name="sales",
        prepare=lambda w: register_table(client, w),
        final_aborted_writes=1,
        open_writes=1,
    )
    table = MetastoreTable(uri, "e2e.sales", writer, storage_only_rows(writer).num_rows)
    log(
        f"metastore table {table.name}: {writer.valid_write_ids()} "
        f"({writer.expected_rows().num_rows} committed rows, {table.rows_on_storage} on storage)"
    )
    return table


def run_by_name(
    args: argparse.Namespace,
    api: AirflowApi,
    services: Services,
    table: MetastoreTable,
    output_uri: str,
) -> WatchedRun:
    """The on-demand DAG by name: its sensor waits in the triggerer for a commit in the
    metastore, which the script makes once it sees the sensor deferred; the snapshot must hold
    exactly the committed rows of the view the manifest pinned (no aborted, no open write)."""
    watermark = table.writer.write_id_snapshot().high_watermark
    conf = {
        "table": table.name,
        "metastore_conn_id": METASTORE_CONN_ID,
        "table_uri": "",
        "output_uri": output_uri,
        "wait_above_write_id": watermark,
    }

    def on_deferred(deferral: Deferral) -> None:
        wait_for_defer_exit_event(services, deferral, timeout=60)
        log(f"  {deferral.task} waits in the triggerer: committed {table.commit_a_delete()}")

    run = run_dag(api, services, args.dag_id, conf, timeout=args.timeout, on_deferred=on_deferred)
    prove_deferred(api, run, METASTORE_SENSOR_TASK, METASTORE_TRIGGER_CLASSPATH)
    from airflow_provider_acid.output import latest_snapshot

    snapshot = latest_snapshot(output_uri)
    if snapshot is None or snapshot.table_name != table.name or not snapshot.write_ids:
        raise E2EError(f"{output_uri}: no snapshot of {table.name} read with a write-id list")
    expected = table.writer.expected_rows(snapshot.write_ids)
    if expected.num_rows >= table.rows_on_storage:
        raise E2EError("the aborted and open writes add no rows: the check would prove nothing")
    check_snapshot_rows(output_uri, expected)
    log(
        f"by name: {expected.num_rows:,} committed rows of {snapshot.write_ids} "
        f"({table.rows_on_storage:,} rows on storage, aborted and open writes included)"
    )
    return run


def check_run_lineage(workdir: Path, run: WatchedRun, table: str, metastore: str | None) -> None:
    """The run's OpenLineage events (scripts/_e2e_lineage.py): the table by location, or by
    name through ``metastore``; the output folder; the rows the snapshot holds."""
    from _e2e_common import read_snapshot_rows

    from airflow_provider_acid.operators.lineage import hive_naming, location_naming

    output_uri = run.conf["output_uri"]
    check_lineage(
        workdir,
        run,
        table=hive_naming(metastore, table) if metastore else location_naming(table),
        output=location_naming(output_uri),
        rows=read_snapshot_rows(output_uri).num_rows,
    )


def run_e2e(args: argparse.Namespace, workdir: Path, services: Services) -> None:
    check_dags_folder(args.dags_folder, args.dag_id)
    by_name = args.dag_id == DEFAULT_DAG_ID and not args.no_metastore
    if by_name:
        metastore_home = workdir / "metastore"
        try:
            _run_e2e(args, workdir, services, start_metastore(metastore_home))
        finally:
            stop_metastore(metastore_home)
    else:
        _run_e2e(args, workdir, services, None)


def _run_e2e(
    args: argparse.Namespace, workdir: Path, services: Services, metastore: str | None
) -> None:
    table, conf = prepare_table_and_conf(args, workdir)
    named = None
    extra_env = {"AIRFLOW__ACID__ALLOWED_URI_PREFIXES": f"{workdir}/"}
    # a loaded two-core machine can take longer than the default 30 s to import a DAG file
    # in a task's process (the task is then rescheduled, again and again)
    extra_env["AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT"] = "120"
    extra_env.update(lineage_env(workdir))  # OpenLineage events to WORKDIR/lineage/
    default_run = not args.probe and args.dag_id == DEFAULT_DAG_ID
    watched = None
    if default_run and args.dags_folder == DEFAULT_DAGS:  # acid_snapshot_on_change's table
        watched, watch_env = prepare_watched_table(workdir, args.rows_per_bucket)
        extra_env.update(watch_env)
        extra_env.update(scheduled_env(workdir, table))  # acid_snapshot_materialisation's
    extra_env.update(reports_plugin_env(workdir / "airflow"))  # the pruning reports app
    if metastore is not None:
        named = make_metastore_table(metastore, workdir / "warehouse" / "e2e", args.rows_per_bucket)
        host, port = metastore.removeprefix("thrift://").rsplit(":", 1)
        conn = {"conn_type": "hive_metastore", "host": host, "port": int(port)}
        extra_env[f"AIRFLOW_CONN_{METASTORE_CONN_ID.upper()}"] = json.dumps(conn)
    home = workdir / "airflow"
    setup = airflow_setup(
        home,
        args.dags_folder,
        executor="LocalExecutor",
        sql_alchemy_conn=f"sqlite:///{home / 'airflow.db'}",
        parallelism=4,
        # UI-triggered runs of the on-demand DAG may touch only these prefixes.
        extra_env=extra_env,
    )
    migrate_database(setup, services.log_dir)
    start_airflow(services, setup)
    api = AirflowApi(setup.base_url, "e2e", setup.password)
    try:
        wait_for_api(api, services, timeout=180)
        wait_for_health(
            api, services, 180, ["metadatabase", "scheduler", "triggerer", "dag_processor"]
        )
        check_loopback_only(services)
        wait_for_dag(api, services, args.dag_id, timeout=180)
        api.unpause(args.dag_id)
        run = run_dag(
            api,
            services,
            args.dag_id,
            conf,
            timeout=args.timeout,
            on_deferred=nudge_table(table, services, not args.no_nudge),
        )
        prove_deferred(api, run, args.deferred_task)
        check_outputs(args, run, table)
        if not args.probe and args.dag_id == DEFAULT_DAG_ID:
            check_run_lineage(workdir, run, run.conf["table_uri"], None)
        if default_run:
            check_report_link(api, args.dag_id, run.run_id)
        if watched is not None:
            materialised = str(workdir / "output" / "materialised")
            run_without_logical_date(api, services, table, materialised, args.timeout)
            on_change = run_on_change(api, services, watched, args.timeout)
            check_report_link(api, ON_CHANGE_DAG_ID, on_change["dag_run_id"])
        if named is not None:
            named_run = run_by_name(args, api, services, named, str(workdir / "output" / "by_name"))
            check_run_lineage(workdir, named_run, named.name, metastore)
    finally:
        api.close()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    return run_script(
        "make e2e", args.keep, lambda workdir, services: run_e2e(args, workdir, services)
    )


if __name__ == "__main__":
    sys.exit(main())
