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

Exits 0 only if every step passed; stops every process it started in every case; keeps the
temporary folder (logs under ``logs/``) when a step failed or with ``--keep``.
"""

from __future__ import annotations

import argparse
import json
import sys
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


def run_e2e(args: argparse.Namespace, workdir: Path, services: Services) -> None:
    check_dags_folder(args.dags_folder, args.dag_id)
    table, conf = prepare_table_and_conf(args, workdir)
    home = workdir / "airflow"
    setup = airflow_setup(
        home,
        args.dags_folder,
        executor="LocalExecutor",
        sql_alchemy_conn=f"sqlite:///{home / 'airflow.db'}",
        parallelism=4,
        # UI-triggered runs of the on-demand DAG may touch only these prefixes.
        extra_env={"AIRFLOW__ACID__ALLOWED_URI_PREFIXES": f"{workdir}/"},
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
    finally:
        api.close()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    return run_script(
        "make e2e", args.keep, lambda workdir, services: run_e2e(args, workdir, services)
    )


if __name__ == "__main__":
    sys.exit(main())
