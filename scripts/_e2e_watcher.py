"""`make e2e`'s event-driven part: a DAG run created by an asset watcher, and the manifest
task's pruning report opened through its extra link.

``dags/acid_snapshot_on_change.py`` watches a demo table of its own (the environment
:func:`prepare_watched_table` returns points it there, with a 2 s poll). The script unpauses
the DAG, checks no run exists, writes a delete delta, and then waits for a run that nobody
triggered: its type must be ``asset_triggered`` and its triggering asset event must come from
the trigger (``extra.from_trigger``) with the new folder in its payload. The run's snapshot
must hold the table's rows after the delete.

Then the run's manifest task's "Pruning report" link (``/links`` of the task instance) must
point at the API server's reports app and answer the report page, with the commit's rows.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _e2e_common import (
    AirflowApi,
    DemoTable,
    E2EError,
    Services,
    check_snapshot_rows,
    log,
    make_demo_table,
    wait_for_dag,
    wait_until,
)

ON_CHANGE_DAG_ID = "acid_snapshot_on_change"
EVENT_TRIGGER = "airflow_provider_acid.triggers.events.AcidDeltaEventTrigger"
REPORTS_PLUGIN = "airflow_provider_acid.plugins.reports.AcidReportsPlugin"


@dataclass
class WatchedTable:
    table: DemoTable
    output_uri: str


def prepare_watched_table(workdir: Path, rows_per_bucket: int) -> tuple[WatchedTable, dict]:
    """A demo table for the watcher, and the environment that makes the example DAG watch it:
    every folder above its current newest write counts, however late the triggerer starts."""
    table = make_demo_table(workdir / "warehouse" / "watched", rows_per_bucket)
    watched = WatchedTable(table, str(workdir / "output" / "on_change"))
    env = {
        "ACID_WATCH_TABLE_URI": table.uri,
        "ACID_WATCH_OUTPUT_URI": watched.output_uri,
        "ACID_WATCH_POLL_SECONDS": "2",
        "ACID_WATCH_ABOVE_WRITE_ID": str(table.latest_write_id),
    }
    log(f"watched table {table.uri}: {table.valid_write_ids}")
    return watched, env


def reports_plugin_env(home: Path) -> dict[str, str]:
    """The reports app on the API server comes from the package's ``airflow.plugins`` entry
    point (pyproject.toml): nothing to set up here. Fails if the installed package lacks it."""
    from importlib.metadata import entry_points

    names = {e.value.replace(":", ".") for e in entry_points(group="airflow.plugins")}
    if REPORTS_PLUGIN not in names:
        raise RuntimeError(
            f"no airflow.plugins entry point names {REPORTS_PLUGIN}: reinstall the package "
            "(make install) so the API server serves the pruning reports"
        )
    log("reports plugin: registered through the package's airflow.plugins entry point")
    return {}


def _runs(api: AirflowApi) -> list[dict[str, Any]]:
    return api.get(f"/api/v2/dags/{ON_CHANGE_DAG_ID}/dagRuns", params={"limit": 100})["dag_runs"]


def run_on_change(
    api: AirflowApi, services: Services, watched: WatchedTable, timeout: float
) -> dict[str, Any]:
    """The watcher's run: created by the trigger's event after a delete delta, and right."""
    wait_for_dag(api, services, ON_CHANGE_DAG_ID, timeout=180)
    api.unpause(ON_CHANGE_DAG_ID)
    time.sleep(5)  # the scheduler takes in the unpaused DAG and hands the triggerer its watcher
    if _runs(api):
        raise E2EError(f"{ON_CHANGE_DAG_ID} ran before the table changed: {_runs(api)}")
    from airflow_provider_acid.acid.changes import find_new_delta_folders

    above = watched.table.latest_write_id
    write_ids = watched.table.add_delete_delta()
    folders = find_new_delta_folders(watched.table.uri, above)
    names = {f.folder for f in folders}
    log(f"wrote a delete delta to the watched table ({write_ids}): {sorted(names)}")

    def created() -> Any:
        runs = _runs(api)
        return runs[0] if runs else (False, "no run yet")

    run = wait_until(f"a run of {ON_CHANGE_DAG_ID}", created, timeout, 2, services.check_alive)
    run_id = run["dag_run_id"]
    log(f"  {ON_CHANGE_DAG_ID} run {run_id} created ({run['run_type']}), nobody triggered it")
    if run["run_type"] != "asset_triggered":
        raise E2EError(f"run {run_id} is {run['run_type']}, not asset_triggered")

    def finished() -> Any:
        state = api.dag_run(ON_CHANGE_DAG_ID, run_id)["state"]
        return state if state in ("success", "failed") else (False, state)

    state = wait_until(f"run {run_id} to finish", finished, timeout, 2, services.check_alive)
    if state != "success":
        raise E2EError(f"the watcher's run {run_id} ended {state}")
    events = api.get(f"/api/v2/dags/{ON_CHANGE_DAG_ID}/dagRuns/{run_id}/upstreamAssetEvents")
    events = events["asset_events"]
    payloads = [e["extra"].get("payload", {}) for e in events if e["extra"].get("from_trigger")]
    if not payloads or not {p.get("folder") for p in payloads} & names:
        raise E2EError(f"run {run_id}'s asset events are not the trigger's for {names}: {events}")
    if len(payloads) != len(events):
        raise E2EError(f"run {run_id} has asset events not from the trigger: {events}")
    check_snapshot_rows(watched.output_uri, watched.table.writer.expected_rows())
    log(
        f"watcher: run {run_id} from {len(events)} trigger event(s) "
        f"({', '.join(sorted(p['folder'] for p in payloads))}); its snapshot holds the rows"
    )
    return run


def check_report_link(api: AirflowApi, dag_id: str, run_id: str, task_id: str = "manifest") -> str:
    """The manifest task's "Pruning report" link answers the report, with the commit's rows."""
    links = api.get(f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/links")
    url = ((links or {}).get("extra_links") or {}).get("Pruning report")
    if not url or "/acid/reports/" not in url:
        raise E2EError(f"{dag_id}.{task_id}: no pruning report link in {links}")
    page = api.get(url)
    if not isinstance(page, str) or 'id="acid-report-data"' not in page:
        raise E2EError(f"{url} did not answer a pruning report: {str(page)[:500]}")
    if 'id="snapshot-id"' not in page:
        raise E2EError(f"{url}: the report has no rows of the commit")
    log(f"pruning report link {url}: {len(page):,} bytes, with the commit's rows")
    return url
