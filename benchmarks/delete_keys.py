"""Benchmark: the memory of one bucket's delete keys, and the delete-key budget.

    python benchmarks/delete_keys.py [--keys 20000000] [--extra-rows 5000000]
                                     [--budget 256MiB] [--workdir DIR] [--json]

Writes (once, cached under ``--workdir``) one bucket of a full-ACID table with Hive 3's
layout: ``base_0000001/bucket_00000`` holding KEYS + EXTRA rows (``id bigint``) and
``delete_delta_0000002_0000002_0000/bucket_00000`` deleting KEYS of them (every row but one in
``(KEYS + EXTRA) / EXTRA``), as Hive's ORC writers do (``write_acid_file``). A copy without the
delete delta is the floor. Then measures, each in its own process (peak RSS: the process's
own ``VmHWM``, Linux):

* ``floor``: compacting the bucket without its delete delta (a straight copy);
* ``compaction``: compacting it with its KEYS delete keys, under the default budget;
* ``keys only``: building the bucket's ``DeleteKeySet`` alone (what the set holds at the end);
* ``over budget``: the compaction with ``ACID_DELETE_KEY_BUDGET=BUDGET``: it must fail with
  the budget error naming the slice, before the keys are all read.

Prints peak RSS of each and the delete-key memory per key: (compaction - floor) / KEYS, the
figure behind ``memory_budget.PEAK_BYTES_PER_KEY``. Timings are printed for information only.
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

MIB = 1 << 20


def build(root: Path, keys: int, extra: int) -> None:
    """The bucket (and its floor copy ``root``-floor) unless already there."""
    import numpy
    import pyarrow as pa
    import pyarrow.compute as pc
    from fsspec.implementations.local import LocalFileSystem

    from airflow_provider_acid.acid.hive_types import HiveType
    from airflow_provider_acid.testing.acid_format import acid_events, encode_bucket_v1
    from airflow_provider_acid.testing.orc_writer import orc_arrow_type, write_acid_file

    done = root / "done.json"
    if done.exists():
        built = json.loads(done.read_text())
        if (built.get("keys"), built.get("extra")) == (keys, extra):
            return
    shutil.rmtree(root, ignore_errors=True)
    fs = LocalFileSystem()
    row_type = HiveType.parse("struct<id:bigint>")
    total = keys + extra
    bucket = encode_bucket_v1(0)
    ids = pa.array(numpy.arange(total, dtype="int64"))
    row = pa.StructArray.from_arrays([ids], fields=list(orc_arrow_type(row_type)))
    n = len(ids)

    def repeat(value: int, count: int, kind: pa.DataType) -> pa.Array:
        return pa.repeat(pa.scalar(value, kind), count)

    base = acid_events(
        0,
        repeat(1, n, pa.int64()),
        repeat(bucket, n, pa.int32()),
        ids,
        repeat(1, n, pa.int64()),
        row,
    )
    table = root / "table"
    write_acid_file(
        fs,
        str(table / "base_0000001" / "bucket_00000"),
        base,
        row_type,
        sort=False,
        stripe_rows=1_000_000,
        compression="zstd",
    )
    step = max(2, -(-total // max(1, extra)))  # keep one row in `step`
    remainder = pc.subtract(ids, pc.multiply(pc.divide(ids, step), step))
    deleted = pc.filter(ids, pc.not_equal(remainder, 0)).slice(0, keys)
    m = len(deleted)
    deletes = acid_events(
        2,
        repeat(1, m, pa.int64()),
        repeat(bucket, m, pa.int32()),
        deleted,
        repeat(2, m, pa.int64()),
        pa.nulls(m, row.type),
    )
    write_acid_file(
        fs,
        str(table / "delete_delta_0000002_0000002_0000" / "bucket_00000"),
        deletes,
        row_type,
        sort=False,
        stripe_rows=1_000_000,
        compression="zstd",
    )
    floor = root / "floor"
    shutil.copytree(table / "base_0000001", floor / "base_0000001")
    done.write_text(json.dumps({"keys": keys, "extra": extra, "deleted": m}))


def child(kind: str, root: str, out: str) -> None:
    """One measured run (in its own process)."""
    started = time.perf_counter()
    if kind == "keys":
        from fsspec.implementations.local import LocalFileSystem

        from airflow_provider_acid.acid.resolution import resolve_read_view
        from airflow_provider_acid.acid.rows import SliceReader, TableColumns
        from airflow_provider_acid.engine.delete_keys import DeleteKeySet
        from airflow_provider_acid.engine.options import CompactionOptions

        fs = LocalFileSystem()
        snapshot = resolve_read_view(root, filesystem=fs)
        [bucket_slice] = snapshot.slices
        reader = SliceReader(
            bucket_slice,
            fs,
            TableColumns.from_dict([{"name": "id", "hive_type": "bigint"}]),
            snapshot.write_ids,
            batch_rows=CompactionOptions().batch_rows,
        )
        keys = DeleteKeySet.from_batches(reader.delete_batches())
        report = {"keys": len(keys), "set_bytes": keys.nbytes}
    else:
        from airflow_provider_acid.engine.compaction import compact_table
        from airflow_provider_acid.engine.memory_budget import DeleteKeyBudgetError
        from airflow_provider_acid.engine.options import CompactionOptions

        try:
            result = compact_table(root, out, options=CompactionOptions(max_workers=1))
            report = {
                "rows_written": result.rows_written,
                "delete_keys": result.buckets[0].delete_keys,
            }
        except DeleteKeyBudgetError as exc:
            report = {"budget_error": str(exc)}
    report["seconds"] = round(time.perf_counter() - started, 2)
    report["peak_rss_mib"] = peak_rss_mib()
    print(json.dumps(report))


def peak_rss_mib() -> float:
    """This process's peak RSS (``VmHWM``: of its own address space since its exec, unlike
    ``ru_maxrss``, which a child inherits from the parent it was forked from)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) * 1024 / MIB, 1)
    raise RuntimeError("no VmHWM in /proc/self/status (Linux only)")


def run(kind: str, root: Path, out: Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    """One ``child`` run in its own process; it reports its own peak RSS."""
    shutil.rmtree(out, ignore_errors=True)
    process = subprocess.Popen(
        [sys.executable, __file__, "--child", kind, str(root), str(out)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )
    stdout, _ = process.communicate()
    report = json.loads(stdout.strip().splitlines()[-1]) if stdout.strip() else {}
    report["exit"] = process.returncode
    return report


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--child"]:
        child(args[1], args[2], args[3])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, default=20_000_000)
    parser.add_argument("--extra-rows", type=int, default=5_000_000)
    parser.add_argument("--budget", default="256MiB", help="the over-budget run's budget")
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--json", action="store_true")
    options = parser.parse_args(args)
    from airflow_provider_acid.engine.memory_budget import (
        BUDGET_VARIABLE,
        PEAK_BYTES_PER_KEY,
        delete_key_budget,
    )

    work = options.workdir or Path(tempfile.gettempdir()) / "acid-bench-delete-keys"
    work.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    build(work, options.keys, options.extra_rows)
    built = json.loads((work / "done.json").read_text())
    print(
        f"bucket: {built['keys'] + built['extra']:,} rows, {built['deleted']:,} delete keys "
        f"({time.perf_counter() - started:.0f} s to build or reuse)",
        file=sys.stderr,
    )
    results = {
        "floor": run("compaction", work / "floor", work / "out-floor"),
        "compaction": run("compaction", work / "table", work / "out"),
        "keys only": run("keys", work / "table", work / "out-keys"),
        "over budget": run(
            "compaction", work / "table", work / "out-budget", {BUDGET_VARIABLE: options.budget}
        ),
    }
    keys = built["deleted"]
    per_key = (
        (results["compaction"]["peak_rss_mib"] - results["floor"]["peak_rss_mib"]) * MIB / keys
    )
    summary = {
        "delete_keys": keys,
        "default_budget_mib": round(delete_key_budget() / MIB),
        "peak_bytes_per_key_assumed": PEAK_BYTES_PER_KEY,
        "measured_bytes_per_key": round(per_key, 1),
        "set_bytes_per_key": round(results["keys only"].get("set_bytes", 0) / keys, 1),
        "runs": results,
    }
    if options.json:
        print(json.dumps(summary, indent=1))
        return 0
    for name, r in results.items():
        extra = r.get("budget_error") or (
            f"{r['rows_written']:,} rows written"
            if "rows_written" in r
            else f"{r.get('keys', 0):,} keys, set {r.get('set_bytes', 0) / MIB:,.0f} MiB"
        )
        print(
            f"{name:12s} peak RSS {r['peak_rss_mib']:8,.0f} MiB  {r['seconds']:6.1f} s  "
            f"exit {r['exit']}  {extra}"
        )
    print(
        f"delete keys {keys:,}: {per_key:.1f} bytes/key at the peak (compaction - floor); "
        f"the set holds {summary['set_bytes_per_key']} bytes/key; budget check assumes "
        f"{PEAK_BYTES_PER_KEY} bytes/key; default budget {summary['default_budget_mib']:,} MiB"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
