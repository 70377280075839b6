"""The smoke subset ``scripts/airflow_versions.py`` runs inside each Airflow version's venv.

1. the provider loads: Airflow's ProvidersManager lists it with the wheel's version, its hooks
   and connection types, and logs no warning about it;
2. the DAGs parse: a DagBag of ``dags/`` has no import error and holds the main DAG;
3. one ``dag.test()`` of ``acid_snapshot_materialisation`` on a demo table commits a snapshot
   holding the table's live rows (counted by the simulator that wrote it, read back with
   pyarrow from the committed files).
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import tempfile
from importlib.metadata import version
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MAIN_DAG = "acid_snapshot_materialisation"


class Captured(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record.getMessage())


def fail(label: str, message: str) -> None:
    raise SystemExit(f"[{label}] smoke failed: {message}")


def main(label: str) -> int:
    home = Path(tempfile.mkdtemp(prefix=f"acid-smoke-{label}-"))
    table, out = home / "table", home / "snapshots"
    os.environ.update(
        AIRFLOW_HOME=str(home / "airflow"),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW__CORE__DAGS_FOLDER=str(REPO / "dags"),
        ACID_TABLE_URI=str(table),
        ACID_OUTPUT_URI=str(out),
    )
    made = json.loads(
        subprocess.run(
            [sys.executable, "-m", "airflow_provider_acid.testing", str(table)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    captured = Captured()
    logging.getLogger().addHandler(captured)

    from airflow.providers_manager import ProvidersManager

    manager = ProvidersManager()
    provider = manager.providers.get("airflow-provider-acid")
    if provider is None:
        fail(label, "Airflow does not list airflow-provider-acid")
    if provider.version != version("airflow-provider-acid"):
        fail(
            label,
            f"provider info says {provider.version}, the wheel is "
            f"{version('airflow-provider-acid')}",
        )
    hooks = manager.hooks
    for conn_type in ("acid", "acid_metastore"):
        if hooks.get(conn_type) is None:
            fail(label, f"connection type {conn_type!r} not registered")
    ours = [m for m in captured.records if "acid" in m.lower()]
    if ours:
        fail(label, f"warnings while loading the provider: {ours}")
    print(f"[{label}] provider {provider.version} loaded: {len(hooks)} connection types")

    subprocess.run(
        [sys.executable, "-m", "airflow", "db", "migrate"], capture_output=True, check=True
    )
    from airflow.models.dagbag import DagBag

    bag = DagBag(str(REPO / "dags"))  # no examples: AIRFLOW__CORE__LOAD_EXAMPLES=False
    if bag.import_errors:
        fail(label, f"DAG import errors: {bag.import_errors}")
    if MAIN_DAG not in bag.dags:
        fail(label, f"{MAIN_DAG} not parsed (found {sorted(bag.dags)})")
    print(f"[{label}] DAGs parsed: {', '.join(sorted(bag.dags))}")

    dag = bag.dags[MAIN_DAG]
    run = dag.test(run_conf={"table_uri": str(table), "output_uri": str(out), "predicate": ""})
    if str(run.state) not in ("success", "DagRunState.SUCCESS"):
        fail(label, f"dag.test() of {MAIN_DAG} ended {run.state}")
    import pyarrow.dataset as ds

    rows = ds.dataset(str(out), format="parquet").count_rows()
    if rows != made["expected_rows"]:
        fail(label, f"snapshot holds {rows} rows, the table {made['expected_rows']} live rows")
    print(f"[{label}] dag.test() of {MAIN_DAG}: success, {rows:,} rows committed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
