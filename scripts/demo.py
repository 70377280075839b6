"""``make demo``: a demo Hive ACID table, then the scheduled-materialisation DAG on it.

Writes the table under .demo/, initialises a throwaway SQLite AIRFLOW_HOME, runs
``airflow dags test acid_snapshot_materialisation`` and prints where the snapshot is, its row
count and the pruning metrics.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def run(args: list[str], env: dict[str, str], quiet: bool = True) -> str:
    done = subprocess.run(args, env=env, capture_output=quiet, text=True)
    if done.returncode != 0:
        sys.stderr.write((done.stdout or "")[-4000:] + (done.stderr or "")[-4000:])
        raise SystemExit(f"demo: {' '.join(args[:3])} failed (exit {done.returncode})")
    return done.stdout or ""


def main() -> int:
    started = time.monotonic()
    demo = REPO / ".demo"
    shutil.rmtree(demo, ignore_errors=True)
    table, out = demo / "table", demo / "snapshots"
    home = Path(tempfile.mkdtemp(prefix="acid-demo-airflow-"))
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "ACID_TABLE_URI": str(table),
        "ACID_OUTPUT_URI": str(out),
    }
    print(f"1/3 writing a demo Hive ACID table to {table}", flush=True)
    made = json.loads(run([sys.executable, "-m", "airflow_provider_acid.testing", str(table)], env))
    print(f"    write-id list {made['valid_write_ids']}, {made['expected_rows']:,} live rows")
    print(f"2/3 initialising Airflow in {home}", flush=True)
    run([str(BIN / "airflow"), "db", "migrate"], env)
    print("3/3 airflow dags test acid_snapshot_materialisation", flush=True)
    predicate = os.environ.get("DEMO_PREDICATE", "dt = '2024-01-02'")
    print(f"    predicate: {predicate}", flush=True)
    conf = json.dumps({"table_uri": str(table), "output_uri": str(out), "predicate": predicate})
    run([str(BIN / "airflow"), "dags", "test", "acid_snapshot_materialisation", "-c", conf], env)

    from airflow_provider_acid.output import latest_snapshot
    from airflow_provider_acid.pruning.metrics import format_record

    snapshot = latest_snapshot(str(out))
    if snapshot is None:
        raise SystemExit("demo: the DAG run committed no snapshot")
    record = json.loads((Path(snapshot.manifest_path).parent / "metrics.json").read_text())
    print()
    print(f"snapshot   {snapshot.snapshot_id} at {out}")
    print(f"manifest   {snapshot.manifest_path}")
    expected = made["expected_rows"]
    if predicate == "dt = '2024-01-02'":
        expected = made["expected_rows_by_partition"]["dt=2024-01-02"]
    print(f"rows       {snapshot.rows_written:,} (live rows matching: {expected:,})")
    print(format_record(record))
    print(
        f"\ndone in {time.monotonic() - started:.0f} s; read it with "
        f"pyarrow.dataset.dataset('{out}', format='parquet')"
    )
    if snapshot.rows_written != expected:
        raise SystemExit("demo: the snapshot's row count differs from the table's live rows")
    shutil.rmtree(home, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
