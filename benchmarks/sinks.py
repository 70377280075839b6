"""Benchmark: the Iceberg and Delta sinks against the Parquet sink, in the same invocation.

    python benchmarks/sinks.py [--buckets 4] [--rows-per-bucket 1000000] [--repeat 3]
                               [--compression snappy] [--workdir DIR] [--json]

(``benchmarks/compaction.py`` runs it too, after its own report, unless ``--no-sinks``.)

The table is the one ``benchmarks/compaction.py`` generates (cached under ``--workdir``). Each
run, in its own process, compacts the whole table into a fresh output folder with one worker
and commits it (the ``parquet`` sink: the folder and its manifest), then, for ``iceberg`` and
``delta``, publishes that snapshot as the table format's first commit over the same files
(pyiceberg's SQL catalog on SQLite in the folder; delta-rs). Runs are interleaved and repeated;
the best wall time of each sink counts. Reported: each sink's total (compaction + commit +
publication) against the Parquet sink's (target: at most 1.1x), the publication alone, and
``1 + publish / parquet``: the publication's cost on top of a Parquet-sink run (less noisy than
the ratio of two best-of wall times). Modules the sinks import are imported before the clock
(this machine sets PYTHONDONTWRITEBYTECODE, so every process compiles them anew). The exit
status is 0 whether or not the target is met; on a machine shared with other work the ratios
carry the load's noise.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SINKS = ("parquet", "iceberg", "delta")
TARGET = 1.1


def _child(sink: str, table: str, out: str, compression: str) -> None:
    """One measured run: compaction and commit, then the sink's publication."""
    import airflow_provider_acid.engine.compaction  # noqa: F401 - imported before the clock
    from airflow_provider_acid.engine.compaction import compact_table
    from airflow_provider_acid.engine.options import CompactionOptions
    from airflow_provider_acid.output.sinks import open_sink

    # the format's library imported before the clock too (this machine may compile it from
    # source on every import: PYTHONDONTWRITEBYTECODE leaves no bytecode cache)
    if sink == "iceberg":
        import pyiceberg.catalog.sql  # noqa: F401
        import pyiceberg.io.pyarrow  # noqa: F401
        import pyiceberg.table  # noqa: F401
        import rich.console  # noqa: F401 - pyiceberg's schema check imports it on first use
        import rich.table  # noqa: F401
        import sqlalchemy.dialects.sqlite  # noqa: F401
    elif sink == "delta":
        import deltalake  # noqa: F401
    if sink != "parquet":
        open_sink(sink, out)
    options = CompactionOptions(max_workers=1, reuse=False, compression=compression)
    started = time.perf_counter()
    result = compact_table(table, out, options=options)
    committed = time.perf_counter()
    version = None
    if sink != "parquet":
        version = open_sink(sink, out).publish(result).table_version
    done = time.perf_counter()
    print(
        json.dumps(
            {
                "seconds": done - started,
                "publish_seconds": done - committed,
                "rows": result.rows_written,
                "files": len(result.files),
                "table_version": version,
            }
        )
    )


def _measure(sink: str, table: Path, compression: str, scratch: Path) -> dict[str, Any]:
    out = Path(tempfile.mkdtemp(prefix=f"{sink}-", dir=scratch))
    command = [sys.executable, __file__, "_run", sink, str(table), str(out), compression]
    try:
        done = subprocess.run(command, capture_output=True, text=True)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "?"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def _table(args: argparse.Namespace) -> Path:
    """The benchmark table of ``benchmarks/compaction.py`` (generated there when missing)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_table import DELTA_FRACTION, generate_in_child

    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    table = workdir / f"table-{args.buckets}x{args.rows_per_bucket}"
    base = args.buckets * args.rows_per_bucket
    delta = int(base * DELTA_FRACTION)
    generate_in_child(table, args.buckets, base, delta, delta)
    return table


def benchmark_sinks(args: argparse.Namespace) -> dict[str, Any]:
    table = _table(args)
    scratch = Path(tempfile.mkdtemp(prefix="sinks-", dir=args.workdir))
    runs: dict[str, list[dict[str, Any]]] = {s: [] for s in SINKS}
    try:
        for round_number in range(args.repeat):
            for sink in SINKS:
                result = _measure(sink, table, args.compression, scratch)
                runs[sink].append(result)
                shown = f"{result['seconds']:7.2f} s" if "error" not in result else result["error"]
                print(f"  round {round_number + 1} sink {sink:<8} {shown}", file=sys.stderr)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    best: dict[str, Any] = {}
    for sink, results in runs.items():
        good = [r for r in results if "error" not in r]
        if not good:
            best[sink] = {"error": results[0]["error"]}
            continue
        best[sink] = {
            "seconds": min(r["seconds"] for r in good),
            "publish_seconds": min(r["publish_seconds"] for r in good),
            "rows": good[0]["rows"],
            "files": good[0]["files"],
        }
    parquet = best["parquet"]
    for sink in ("iceberg", "delta"):
        if "error" not in best[sink] and "error" not in parquet:
            best[sink]["vs_parquet"] = best[sink]["seconds"] / parquet["seconds"]
            # the publication's own cost on top of the same run's compaction: less noisy than
            # the ratio of two best-of wall times on a loaded machine
            best[sink]["publish_vs_parquet"] = best[sink]["publish_seconds"] / parquet["seconds"]
            if best[sink]["rows"] != parquet["rows"]:
                raise RuntimeError(f"the {sink} run wrote other rows than the parquet one: {best}")
    return {
        "table": str(table),
        "compression": args.compression,
        "repeat": args.repeat,
        "load_average": os.getloadavg(),
        "results": best,
        "target": TARGET,
    }


def format_sinks(report: dict[str, Any]) -> str:
    load = ", ".join(f"{x:.1f}" for x in report["load_average"])
    lines = [
        f"sinks    one worker, compaction + commit + publication, best of {report['repeat']}; "
        f"load average {load}",
        f"{'':<10}{'wall':>10}{'publish':>10}{'/ parquet':>11}{'1 + publish/parquet':>21}"
        f"{'files':>7}",
    ]
    for sink, result in report["results"].items():
        if "error" in result:
            lines.append(f"{sink:<10}not measured: {result['error']}")
            continue
        ratio = f"{result['vs_parquet']:.2f}x" if "vs_parquet" in result else "-"
        added = (
            f"{1 + result['publish_vs_parquet']:.2f}x" if "publish_vs_parquet" in result else "-"
        )
        publish = f"{result['publish_seconds']:.2f}s" if sink != "parquet" else "-"
        lines.append(
            f"{sink:<10}{result['seconds']:>9.2f}s{publish:>10}{ratio:>11}{added:>21}"
            f"{result['files']:>7}"
        )
    met = [
        f"{sink} {'met' if r['vs_parquet'] <= report['target'] else 'MISSED'}"
        for sink, r in report["results"].items()
        if "vs_parquet" in r
    ]
    lines.append(f"target   at most {report['target']}x the parquet sink: {', '.join(met)}")
    return "\n".join(lines)


def sinks_section(args: argparse.Namespace) -> str:
    """What ``benchmarks/compaction.py`` prints after its own report."""
    return format_sinks(benchmark_sinks(args))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "_run":
        _child(argv[1], argv[2], argv[3], argv[4])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--buckets", type=int, default=4)
    parser.add_argument("--rows-per-bucket", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--compression", default="snappy")
    parser.add_argument(
        "--workdir", default=os.path.join(tempfile.gettempdir(), "airflow-acid-benchmark")
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    report = benchmark_sinks(args)
    print(json.dumps(report, indent=2) if args.json else format_sinks(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
