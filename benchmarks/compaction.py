"""Benchmark: per-bucket anti-join compaction against its floor and against DuckDB.

    python benchmarks/compaction.py [--buckets 4] [--rows-per-bucket 1000000] [--repeat 5]
                                    [--workers N] [--workdir DIR] [--no-rss-check] [--json]

Generates (once, cached under ``--workdir``) a full-ACID table written by the Hive simulator:
a base of BUCKETS x ROWS rows (INSERT OVERWRITE), then 3 insert deltas and 3 delete deltas of
5% each. Then measures, each run in a separate process (wall time inside it, peak RSS from the
kernel through ``wait4``), runs interleaved and repeated (best time, highest RSS):

* ``compaction``: :func:`compact_table` (reading ORC through fsspec, zstd Parquet);
* ``floor``: plain pyarrow reading the same data files' stripes and writing their rows as
  Parquet with the same settings (zstd, same dictionary choice), no identity, no join: the
  least any compaction has to do;
* ``duckdb``: the same data files and delete keys read into Arrow tables with pyarrow, then
  DuckDB's ``ANTI JOIN`` on the full key and ``COPY ... TO`` zstd Parquet, bucket by bucket.

All three use the same number of workers (threads). Unless ``--no-rss-check``, a second
table with a 4x larger base and the same inserts and deletes is compacted to show that peak
memory follows the delete set and the batch size, not the data size.

Targets: compaction at most 1.3x the floor's time, no slower than DuckDB, and peak RSS within
20% when the base grows 4x. The exit status is 0 whether or not they are met.
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
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

DELTA_FRACTION = 0.05
INSERT_DELTAS = 3
DELETE_DELTAS = 3
KINDS = ("floor", "compaction", "duckdb")

# -- the table ---------------------------------------------------------------------------------


def _rows(first_id: int, count: int) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    ones = pa.repeat(pa.scalar(1, pa.int64()), count)
    ids = pc.add(pc.cumulative_sum(ones), pa.scalar(first_id - 1, pa.int64()))
    mixed = pc.bit_wise_and(
        pc.multiply(ids, pa.scalar(2654435761, pa.int64())), pa.scalar(0xFFFFFFF, pa.int64())
    )
    categories = pa.array(["books", "games", "garden", "music", "tools", "toys", "video"])
    category = pc.take(categories, pc.cast(pc.divide(mixed, 38347923), pa.int32()))
    cents = pc.cast(pc.divide(mixed, 97), pa.decimal128(19, 0))
    amount = pc.cast(
        pc.divide(cents, pa.scalar(100, pa.decimal128(3, 0))), pa.decimal128(12, 2), safe=False
    )
    micros = pc.add(pc.multiply(mixed, 1000), 1_704_067_200_000_000)
    note = pc.binary_join_element_wise("order ", pc.cast(ids, pa.string()), "")
    return pa.table(
        {
            "id": ids,
            "category": category,
            "amount": amount,
            "ts": pc.cast(pc.cast(micros, pa.timestamp("us")), pa.timestamp("ns")),
            "note": note,
        }
    )


def generate(root: Path, buckets: int, base_rows: int, delta_rows: int, delete_rows: int) -> str:
    """Write the table (unless already there); returns its valid write-id list."""
    marker = root / "_generated.json"
    if marker.exists():
        return json.loads(marker.read_text())["write_ids"]
    from airflow_provider_acid.testing.table_writer import AcidTableWriter

    shutil.rmtree(root, ignore_errors=True)
    started = time.perf_counter()
    table = AcidTableWriter(
        str(root),
        [
            ("id", "bigint"),
            ("category", "string"),
            ("amount", "decimal(12,2)"),
            ("ts", "timestamp"),
            ("note", "string"),
        ],
        buckets=buckets,
        bucket_by="id",
        table_name="bench",
    )
    table.insert_overwrite(_rows(1, base_rows))
    next_id = base_rows + 1
    for _ in range(INSERT_DELTAS):
        table.insert(_rows(next_id, delta_rows))
        next_id += delta_rows
    for seed in range(DELETE_DELTAS):
        live = table.expected_identities().num_rows
        table.delete(table.sample_identities(delete_rows / live, seed=seed))
    write_ids = table.valid_write_ids()
    marker.write_text(json.dumps({"write_ids": write_ids}))
    print(f"  generated {root} in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    return write_ids


# -- the three contenders (each run in its own process) ----------------------------------------


def run_compaction(table: str, out: str, workers: int) -> int:
    from airflow_provider_acid.acid.compaction import CompactionOptions, compact_table

    result = compact_table(table, out, options=CompactionOptions(max_workers=workers, reuse=False))
    return result.rows_written


def _row_table(events: Any) -> Any:
    """The table columns of ACID events (a record batch or a table): the ``row`` struct's."""
    import pyarrow as pa

    row = events.column("row")
    chunks = row.chunks if isinstance(row, pa.ChunkedArray) else [row]
    fields = [f.name for f in row.type]
    columns = [
        pa.chunked_array([c.field(i) for c in chunks], row.type.field(i).type)
        for i in range(len(fields))
    ]
    return pa.Table.from_arrays(columns, names=fields)


def run_floor(table: str, out: str, workers: int) -> int:
    import pyarrow.orc as orc
    import pyarrow.parquet as pq

    from airflow_provider_acid.acid.compaction import dictionary_columns
    from airflow_provider_acid.acid.snapshot import resolve_snapshot

    os.makedirs(out, exist_ok=True)

    def copy(bucket_slice: Any) -> int:
        writer, rows = None, 0
        for data_file in bucket_slice.data_files:
            reader = orc.ORCFile(data_file.path)
            for index in range(reader.nstripes):
                rows_table = _row_table(reader.read_stripe(index))
                if writer is None:
                    path = f"{out}/part-{bucket_slice.bucket_id:05d}.parquet"
                    writer = pq.ParquetWriter(  # the Parquet settings compaction uses
                        path,
                        rows_table.schema,
                        compression="zstd",
                        use_dictionary=dictionary_columns(rows_table),
                        version="2.6",
                    )
                writer.write_table(rows_table)
                rows += rows_table.num_rows
        if writer is not None:
            writer.close()
        return rows

    with ThreadPoolExecutor(max_workers=workers) as pool:
        return sum(pool.map(copy, resolve_snapshot(table).slices))


def run_duckdb(table: str, out: str, workers: int) -> int:
    import duckdb
    import pyarrow as pa
    import pyarrow.orc as orc

    from airflow_provider_acid.acid.snapshot import resolve_snapshot

    os.makedirs(out, exist_ok=True)
    con = duckdb.connect()
    con.execute(f"SET threads = {workers}")
    keys = ["originalTransaction", "bucket", "rowId"]
    written = 0
    for bucket_slice in resolve_snapshot(table).slices:
        parts = []
        for data_file in bucket_slice.data_files:
            events = orc.read_table(data_file.path)
            rows = _row_table(events)
            for name in keys:
                rows = rows.append_column(name, events[name])
            parts.append(rows)
        data = pa.concat_tables(parts)
        deletes = pa.concat_tables(
            [orc.read_table(f.path, columns=keys) for f in bucket_slice.delete_delta_files]
        )
        con.register("data", data)
        con.register("deletes", deletes)
        columns = ", ".join(f'd."{n}"' for n in data.column_names if n not in keys)
        target = f"{out}/part-{bucket_slice.bucket_id:05d}.parquet"
        con.execute(
            f"COPY (SELECT {columns} FROM data d ANTI JOIN deletes x ON "
            + " AND ".join(f'd."{k}" = x."{k}"' for k in keys)
            + f") TO '{target}' (FORMAT parquet, COMPRESSION zstd)"
        )
        written += con.execute(f"SELECT count(*) FROM '{target}'").fetchall()[0][0]
        con.unregister("data")
        con.unregister("deletes")
        del data, deletes, parts
    return written


RUNNERS = {"compaction": run_compaction, "floor": run_floor, "duckdb": run_duckdb}


def measure(kind: str, table: Path, workers: int, scratch: Path) -> dict[str, Any]:
    """Run one contender in a fresh process: its wall time and peak RSS."""
    out = Path(tempfile.mkdtemp(prefix=f"{kind}-", dir=scratch))
    command = [sys.executable, __file__, "_run", kind, str(table), str(out), str(workers)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(process.pid, 0)
    output = process.stdout.read() if process.stdout else ""
    process.returncode = os.waitstatus_to_exitcode(status)
    shutil.rmtree(out, ignore_errors=True)
    if process.returncode != 0:
        raise RuntimeError(f"{kind} failed with status {process.returncode}")
    result = json.loads(output.strip().splitlines()[-1])
    result["peak_rss_mib"] = usage.ru_maxrss / 1024  # KiB on Linux
    return result


def _child(kind: str, table: str, out: str, workers: int) -> None:
    import resource

    started = time.perf_counter()
    rows = RUNNERS[kind](table, out, workers)
    seconds = time.perf_counter() - started
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu = usage.ru_utime + usage.ru_stime
    print(json.dumps({"kind": kind, "seconds": seconds, "cpu_seconds": cpu, "rows": rows}))


def generate_in_child(root: Path, *sizes: int) -> str:
    """:func:`generate` in its own process: this one stays small, so the peak RSS the kernel
    reports for the measured processes (forked from it) is theirs alone."""
    command = [sys.executable, __file__, "_generate", str(root), *map(str, sizes)]
    output = subprocess.run(command, check=True, stdout=subprocess.PIPE, text=True).stdout
    return output.strip().splitlines()[-1]


# -- the report --------------------------------------------------------------------------------


def benchmark(args: argparse.Namespace) -> dict[str, Any]:
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="runs-", dir=workdir))
    base = args.buckets * args.rows_per_bucket
    delta = int(base * DELTA_FRACTION)
    table = workdir / f"table-{args.buckets}x{args.rows_per_bucket}"
    write_ids = generate_in_child(table, args.buckets, base, delta, delta)

    runs: dict[str, list[dict[str, Any]]] = {k: [] for k in KINDS}
    for round_number in range(args.repeat):
        for kind in KINDS:
            runs[kind].append(measure(kind, table, args.workers, scratch))
            last = runs[kind][-1]
            print(
                f"  round {round_number + 1} {kind:<10} {last['seconds']:7.2f} s "
                f"{last['peak_rss_mib']:7.0f} MiB",
                file=sys.stderr,
            )
    best = {
        k: {
            "seconds": min(r["seconds"] for r in v),
            "cpu_seconds": min(r["cpu_seconds"] for r in v),
            "peak_rss_mib": max(r["peak_rss_mib"] for r in v),
            "rows": v[0]["rows"],
        }
        for k, v in runs.items()
    }
    report: dict[str, Any] = {
        "table": {
            "buckets": args.buckets,
            "base_rows": base,
            "insert_deltas": INSERT_DELTAS,
            "delete_deltas": DELETE_DELTAS,
            "rows_per_delta": delta,
            "write_ids": write_ids,
        },
        "workers": args.workers,
        "repeat": args.repeat,
        "results": best,
        "ratios": {
            "compaction_vs_floor": best["compaction"]["seconds"] / best["floor"]["seconds"],
            "compaction_vs_duckdb": best["compaction"]["seconds"] / best["duckdb"]["seconds"],
        },
        "cpu_ratios": {  # steadier than wall time on a shared machine
            "compaction_vs_floor": best["compaction"]["cpu_seconds"] / best["floor"]["cpu_seconds"],
            "compaction_vs_duckdb": best["compaction"]["cpu_seconds"]
            / best["duckdb"]["cpu_seconds"],
        },
    }
    if best["compaction"]["rows"] != best["duckdb"]["rows"]:
        raise RuntimeError(f"compaction and DuckDB disagree on the rows: {best}")
    if args.rss_check:
        big = workdir / f"table-{args.buckets}x{args.rows_per_bucket * 4}-fixed-deletes"
        generate_in_child(big, args.buckets, base * 4, delta, delta)
        large = [measure("compaction", big, args.workers, scratch) for _ in range(args.repeat)]
        small = best["compaction"]["peak_rss_mib"]
        peak = max(r["peak_rss_mib"] for r in large)
        report["rss_flatness"] = {
            "base_rows": base * 4,
            "rows": large[0]["rows"],
            "seconds": min(r["seconds"] for r in large),
            "peak_rss_mib": peak,
            "peak_rss_mib_at_1x": small,
            "growth": peak / small - 1,
        }
    report["targets"] = {
        "at_most_1.3x_floor": report["ratios"]["compaction_vs_floor"] <= 1.3,
        "no_slower_than_duckdb": report["ratios"]["compaction_vs_duckdb"] <= 1.0,
    }
    if "rss_flatness" in report:
        report["targets"]["rss_within_20pct_at_4x_base"] = (
            abs(report["rss_flatness"]["growth"]) <= 0.2
        )
    shutil.rmtree(scratch, ignore_errors=True)
    return report


def format_report(report: dict[str, Any]) -> str:
    t, r = report["table"], report["results"]
    lines = [
        f"table    {t['buckets']} buckets, base {t['base_rows']:,} rows, "
        f"{t['insert_deltas']} insert + {t['delete_deltas']} delete deltas of "
        f"{t['rows_per_delta']:,} rows",
        f"workers  {report['workers']}, best of {report['repeat']} runs, each in its own process",
        "",
        f"{'':<28}{'wall':>9}{'CPU':>9}{'peak RSS':>12}{'rows out':>13}",
    ]
    names = {
        "floor": "floor (ORC -> Parquet)",
        "compaction": "compaction (anti-join)",
        "duckdb": "DuckDB anti-join on Arrow",
    }
    for kind in KINDS:
        lines.append(
            f"{names[kind]:<28}{r[kind]['seconds']:>8.2f}s{r[kind]['cpu_seconds']:>8.2f}s"
            f"{r[kind]['peak_rss_mib']:>8.0f} MiB"
            f"{r[kind]['rows']:>13,}"
        )
    ratios, cpu = report["ratios"], report["cpu_ratios"]
    lines += [
        "",
        f"compaction / floor   {ratios['compaction_vs_floor']:.2f}x wall, "
        f"{cpu['compaction_vs_floor']:.2f}x CPU   (target <= 1.3x)",
        f"compaction / DuckDB  {ratios['compaction_vs_duckdb']:.2f}x wall, "
        f"{cpu['compaction_vs_duckdb']:.2f}x CPU   (target <= 1.0x)",
    ]
    flat = report.get("rss_flatness")
    if flat:
        lines.append(
            f"peak RSS, base x4 ({flat['base_rows']:,} rows, same deletes): "
            f"{flat['peak_rss_mib']:.0f} MiB vs {flat['peak_rss_mib_at_1x']:.0f} MiB "
            f"({flat['growth']:+.0%}, target within 20%; {flat['seconds']:.2f}s)"
        )
    met = ", ".join(f"{k}: {'met' if v else 'MISSED'}" for k, v in report["targets"].items())
    lines.append(f"targets  {met}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "_run":
        _child(argv[1], argv[2], argv[3], int(argv[4]))
        return 0
    if argv and argv[0] == "_generate":
        print(generate(Path(argv[1]), *(int(a) for a in argv[2:6])))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--buckets", type=int, default=4)
    parser.add_argument("--rows-per-bucket", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--workers", type=int, default=min(4, os.cpu_count() or 1))
    parser.add_argument(
        "--workdir",
        default=os.path.join(tempfile.gettempdir(), "airflow-acid-benchmark"),
        help="where tables are generated (and kept for the next run)",
    )
    parser.add_argument("--no-rss-check", dest="rss_check", action="store_false")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    report = benchmark(args)
    print(json.dumps(report, indent=2) if args.json else format_report(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
