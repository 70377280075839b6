"""Benchmark: the change feed of 1% changed rows against a full compaction of the same table.

    python benchmarks/changes.py [--buckets 4] [--rows 4000000] [--repeat 2] [--workdir DIR]
                                 [--json]

Generates (once, cached under ``--workdir``) three tables like the compaction benchmark's
(``bench_table.py``): a base of ROWS rows (write 1, INSERT OVERWRITE, in id order), then 3
insert deltas and 3 delete deltas (writes 2..7) that together change 1% of the rows (0.5%
inserted, 0.5% of the base deleted). They differ in which rows the deletes hit and in their
stripes:

* ``random``: deletes drawn at random; 100,000 rows a stripe (the simulator's default);
* ``clustered``: the lowest ids deleted (``DELETE ... WHERE id <= N``, a retention job on a
  column that follows insertion order); 100,000 rows a stripe;
* ``clustered-1-stripe``: the same deletes, one stripe a bucket file, as Hive's writer would
  cut it (its stripes hold 64 MiB, ``orc.stripe.size``; a bucket file here is 11 MB).

Then measures, in this process, interleaved and repeated (best time of each):

* ``compaction``: :func:`compact_table` of the table at write 7 (one worker), what a full
  snapshot costs (of each table: each feed is compared with its own table's);
* ``feed (1, 7]``: :func:`compute_changes` of the six writes (inserts, and deletes with the
  deleted rows' values);
* ``feed (1, 4]``: the inserts alone (the same in all tables: measured on ``random``).

A delete event holds only the deleted row's identity, so a delete's values (the row the feed
shows) can only be read from the file holding the row: here the base. The feed reads the
base's identity columns to find the deleted rows, and its other columns only in the stripes
holding one: the whole stripe (ORC decodes a stripe whole), or, when the deleted rows span
under 1/128 of it, just that span by seeking (a Python value a row). Random deletes hit every
stripe, so their feed decodes the whole base, about what a compaction reads; clustered
deletes hit a stripe or two of each bucket file, or a short span of its one stripe.

It counts the data files each run opens (a counting filesystem) and checks that the feeds open
only the deltas of their range and, for deletes, the base files of the buckets those deletes
touch. Target (issue #22): the feed at most 5% of the compaction. The ratios are of runs
measured in the same invocation; the exit status is 0 whether or not the target is met.
"""

from __future__ import annotations

import argparse
import json
import posixpath
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_table import generate_in_child
from fsspec.implementations.local import LocalFileSystem

TARGET = 0.05
CHANGED = 0.01  # of the base's rows: half inserted, half deleted
#: The tables: which rows the deletes hit, and rows per ORC stripe (None: one stripe a file,
#: as Hive's 64 MiB stripes cut a bucket file of this size).
KINDS = {"random": 100_000, "clustered": 100_000, "clustered-1-stripe": None}


class CountingFileSystem(LocalFileSystem):
    """The local filesystem, remembering every file opened for reading (one instance a run:
    not fsspec's cached one)."""

    cachable = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.opened: list[str] = []

    def _open(self, path: str, mode: str = "rb", *args: Any, **kwargs: Any) -> Any:
        if "r" in mode:
            self.opened.append(self._strip_protocol(path))
        return super()._open(path, mode, *args, **kwargs)


def _folders(paths: list[str], root: str) -> set[str]:
    return {posixpath.relpath(posixpath.dirname(p), root) for p in paths}


def _write_of(delta: str) -> int:
    """The highest write id of a ``delta_A_B_S`` or ``delete_delta_A_B_S`` folder."""
    return int(delta.split("_")[-2])


def _compaction(table: str, write_ids: str, out: Path) -> tuple[float, CountingFileSystem]:
    from airflow_provider_acid.engine.compaction import CompactionOptions, compact_table

    shutil.rmtree(out, ignore_errors=True)
    fs = CountingFileSystem()
    started = time.perf_counter()
    compact_table(
        table, str(out), write_ids=write_ids, filesystem=fs,
        options=CompactionOptions(max_workers=1, reuse=False),
    )  # fmt: skip
    return time.perf_counter() - started, fs


def _feed(table: str, write_ids: str, out: Path, to: int) -> tuple[float, CountingFileSystem, Any]:
    from airflow_provider_acid.engine.change_runs import compute_changes

    shutil.rmtree(out, ignore_errors=True)
    fs = CountingFileSystem()
    started = time.perf_counter()
    feed = compute_changes(
        table, str(out), from_write_id=1, to_write_id=to, write_ids=write_ids, key=["id"],
        filesystem=fs,
    )  # fmt: skip
    return time.perf_counter() - started, fs, feed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--buckets", type=int, default=4)
    parser.add_argument("--rows", type=int, default=4_000_000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "acid-bench")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    changed = int(args.rows * CHANGED / 2 / 3)  # rows per insert delta and per delete delta
    tables = {}
    for kind, stripe_rows in KINDS.items():
        suffix = "" if kind == "random" else f"-{kind}"
        root = args.workdir / f"changes-{args.buckets}x{args.rows}{suffix}"
        sizes = (args.buckets, args.rows, changed, changed)
        write_ids = generate_in_child(
            root / "table", *sizes, clustered=kind.startswith("clustered"),
            stripe_rows=stripe_rows or args.rows,
        )  # fmt: skip
        tables[kind] = (root, write_ids)
    best: dict[str, float] = {}
    opened: dict[str, set[str]] = {}
    counts: dict[str, Any] = {}
    reference: dict[str, str] = {}  # each run's compaction
    for _ in range(args.repeat):
        for kind, (root, write_ids) in tables.items():
            table = str(root / "table")
            runs = [("feed (1, 7]", 7)] + ([("feed (1, 4]", 4)] if kind == "random" else [])
            compaction = f"compaction {kind}"
            seconds, fs = _compaction(table, write_ids, root / "snapshot")
            best[compaction] = min(best.get(compaction, seconds), seconds)
            opened[compaction] = _folders(fs.opened, table)
            for feed_name, to in runs:
                name = f"{feed_name} {kind}"
                seconds, fs, feed = _feed(table, write_ids, root / f"feed-{to}", to)
                best[name] = min(best.get(name, seconds), seconds)
                opened[name] = _folders(fs.opened, table)
                counts[name] = dict(feed.counts)
                reference[name] = compaction
    checks = {}
    for name, compaction in reference.items():
        # what a feed may open: the deltas of its range, and for deletes the base
        to = int(name.split("]")[0].split(", ")[1])
        deltas = {f for f in opened[compaction] if "delta_" in f and _write_of(f) <= to}
        has_deletes = any(f.startswith("delete_delta_") for f in deltas)
        bases = {f for f in opened[compaction] if f.startswith("base_") and has_deletes}
        allowed = deltas | bases
        checks[f"{name} opens only its range's deltas (and the base for deletes)"] = (
            opened[name] <= allowed
        )
    result = {
        "rows": args.rows,
        "buckets": args.buckets,
        "changed_rows": {k: sum(v.values()) for k, v in counts.items()},
        "seconds": best,
        "ratio": {k: best[k] / best[c] for k, c in reference.items()},
        "target": TARGET,
        "folders_opened": {k: sorted(v) for k, v in opened.items()},
        "checks": checks,
    }
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        print(f"table: {args.rows:,} rows in {args.buckets} buckets, write-id list {write_ids}")
        for name, seconds in best.items():
            ratio = f"  {result['ratio'][name]:.3f}x compaction" if name in reference else ""
            changes = counts.get(name)
            shown = f"  changes {changes}" if changes else ""
            print(f"{name:<24} {seconds:8.2f} s{ratio}{shown}")
            print(f"{'':<24} opened {sorted(opened[name])}")
        for check, ok in checks.items():
            print(f"{'ok' if ok else 'FAILED'}: {check}")
        print(f"target: a feed at most {TARGET:.0%} of the compaction")
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
