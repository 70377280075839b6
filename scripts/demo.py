"""``make demo``: a demo Hive ACID table, then the scheduled-materialisation DAG on it.

Writes the table under .demo/, initialises a throwaway SQLite AIRFLOW_HOME, runs
``airflow dags test acid_snapshot_materialisation`` and prints where the snapshot is, its row
count and the pruning metrics; then publishes that snapshot as an Iceberg table on the
embedded default catalog and prints how to read it with pyiceberg and DuckDB.
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
    publish_iceberg(snapshot, out)
    print(
        f"\ndone in {time.monotonic() - started:.0f} s; read it with "
        f"pyarrow.dataset.dataset('{out}', format='parquet')"
    )
    if snapshot.rows_written != expected:
        raise SystemExit("demo: the snapshot's row count differs from the table's live rows")
    shutil.rmtree(home, ignore_errors=True)
    return 0


def publish_iceberg(snapshot, out: Path) -> None:
    """The committed snapshot also published as an Iceberg table on the embedded default (an SQL
    catalog on SQLite in OUT/_iceberg), read back, and how to read it with pyiceberg and DuckDB."""
    from airflow_provider_acid.output.sinks import publish_snapshot

    published = publish_snapshot(snapshot, "iceberg", out_uri=str(out)).publication
    block = published.details
    from pyiceberg.catalog import load_catalog

    table = load_catalog(block["catalog_name"], **block["catalog"]).load_table(block["table"])
    rows = table.scan().count()
    print(f"\niceberg    {block['table']} (snapshot {published.table_version}, {rows:,} rows)")
    print(f"asset      {published.asset_uri}")
    print("read it with pyiceberg:")
    print("    from pyiceberg.catalog import load_catalog")
    print(f"    catalog = load_catalog({block['catalog_name']!r}, **{block['catalog']!r})")
    print(f"    catalog.load_table({block['table']!r}).scan().to_arrow()")
    print("or with DuckDB (its iceberg extension from the duckdb-extension-iceberg wheel):")
    for line in _DUCKDB_READ.format(metadata=block["metadata_location"]).splitlines():
        print(f"    {line}")
    namespace: dict = {}
    exec(_DUCKDB_READ.format(metadata=block["metadata_location"]), namespace)  # noqa: S102
    duckdb_rows = namespace["rows"]
    print(f"    -> {duckdb_rows:,} rows")
    if not rows == duckdb_rows == snapshot.rows_written:
        raise SystemExit("demo: the Iceberg table's row count differs from the snapshot's")


#: What the demo prints for DuckDB, and runs itself: the extension ships in PyPI wheels
#: (DuckDB's own extension download is not reachable everywhere).
_DUCKDB_READ = """import glob, duckdb, duckdb_extension_avro, duckdb_extension_iceberg
con = duckdb.connect()
for package in (duckdb_extension_avro, duckdb_extension_iceberg):
    (ext,) = glob.glob(package.__path__[0] + "/extensions/*/*.duckdb_extension")
    con.execute(f"LOAD '{{ext}}'")
(rows,) = con.sql("SELECT count(*) FROM iceberg_scan('{metadata}')").fetchone()
print(rows)"""


if __name__ == "__main__":
    sys.exit(main())
