"""`make e2e`: the OpenLineage events of the live run (the provider's file transport).

Every Airflow component gets ``[openlineage] transport`` = the file transport, one event per
file under ``WORKDIR/lineage/``; after the run, :func:`check_lineage` reads them and checks that
each task of the snapshot chain emitted its COMPLETE event with the datasets and run facets the
operators report: the table read (by location, or by name as ``hive://HOST:PORT``/``db.table``),
the snapshot folder written, and the read view, pruning and row figures.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from _e2e_common import E2EError, log

NAMESPACE = "acid-e2e"
CHAIN = ("manifest", "plan", "compact", "commit", "publish_metrics")


def lineage_env(workdir: Path) -> dict[str, str]:
    """The environment that points the OpenLineage provider at ``WORKDIR/lineage/``."""
    folder = workdir / "lineage"
    folder.mkdir(parents=True, exist_ok=True)
    transport = {"type": "file", "log_file_path": str(folder / "event")}
    return {
        "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(transport),
        "AIRFLOW__OPENLINEAGE__NAMESPACE": NAMESPACE,
    }


def read_events(workdir: Path) -> list[dict[str, Any]]:
    """Every event written so far (one JSON document a file)."""
    events = []
    for path in sorted((workdir / "lineage").glob("event-*.json")):
        try:
            events.append(json.loads(path.read_text()))
        except ValueError:  # being written
            continue
    return events


def _run_id(event: dict[str, Any]) -> str | None:
    airflow = event.get("run", {}).get("facets", {}).get("airflow", {})
    return airflow.get("dagRun", {}).get("run_id")


def _completes(events: list[dict[str, Any]], dag_id: str, run_id: str, task: str) -> list[dict]:
    name = f"{dag_id}.{task}"
    return [
        e
        for e in events
        if e["eventType"] == "COMPLETE" and e["job"]["name"] == name and _run_id(e) == run_id
    ]


def _names(datasets: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(d["namespace"], d["name"]) for d in datasets]


def check_lineage(
    workdir: Path,
    run: Any,
    *,
    table: tuple[str, str],
    output: tuple[str, str],
    rows: int,
    timeout: float = 30.0,
) -> None:
    """The run's snapshot chain emitted its events: each task's COMPLETE (one per mapped
    compaction), the table ``table`` and the folder ``output`` (``(namespace, name)``) as
    datasets, and ``rows`` rows written in the commit's facets."""
    mapped = sum(
        1 for ti in run.task_instances if ti["task_id"] == "compact" and ti["state"] == "success"
    )
    expected = {task: (mapped if task == "compact" else 1) for task in CHAIN}
    deadline = time.monotonic() + timeout
    while True:
        events = read_events(workdir)
        found = {t: _completes(events, run.dag_id, run.run_id, t) for t in CHAIN}
        if all(len(found[t]) >= n for t, n in expected.items()):
            break
        if time.monotonic() > deadline:
            counts = {t: len(v) for t, v in found.items()}
            raise E2EError(
                f"OpenLineage: COMPLETE events per task {counts}, expected {expected} "
                f"({len(events)} event(s) in {workdir / 'lineage'})"
            )
        time.sleep(1)
    (commit,) = found["commit"]
    if _names(commit["inputs"]) != [table] or _names(commit["outputs"]) != [output]:
        raise E2EError(
            f"OpenLineage: commit read {_names(commit['inputs'])} and wrote "
            f"{_names(commit['outputs'])}, expected {[table]} and {[output]}"
        )
    facets = commit["run"]["facets"]
    written = facets.get("acidCompaction", {}).get("rowsWritten")
    stats = commit["outputs"][0].get("outputFacets", {}).get("outputStatistics", {})
    if written != rows or stats.get("rowCount") != rows:
        raise E2EError(
            f"OpenLineage: commit says {written} rows written ({stats.get('rowCount')} in the "
            f"output statistics), the snapshot holds {rows}"
        )
    if "acidReadView" not in facets:
        raise E2EError("OpenLineage: the commit event has no acidReadView facet")
    (manifest,) = found["manifest"]
    pruning = manifest["run"]["facets"].get("acidPruning")
    if pruning is None or _names(manifest["inputs"]) != [table]:
        raise E2EError(f"OpenLineage: the manifest event lacks its table or pruning: {manifest}")
    for event in found["compact"]:
        if _names(event["inputs"]) != [table] or _names(event["outputs"]) != [output]:
            raise E2EError(f"OpenLineage: a compaction event names other datasets: {event}")
    log(
        f"OpenLineage: {sum(len(v) for v in found.values())} COMPLETE events of the chain in "
        f"{run.run_id}; {table[0]} {table[1]} -> {output[0]} {output[1]}, {rows:,} rows, "
        f"{pruning['slicesKept']} of {pruning['slicesTotal']} slices kept"
    )
