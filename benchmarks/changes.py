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

Then measures, in this process, interleaved and repeated (``--repeat`` runs, 3 by default):

* ``compaction``: :func:`compact_table` of the table at write 7 (one worker), what a full
  snapshot costs (of each table: each feed is compared with its own table's);
* ``feed (1, 7]``: :func:`compute_changes` of the six writes (inserts, and deletes with the
  deleted rows' values);
* ``feed (1, 4]``: the inserts alone (the same in all tables: measured on ``random``);
* ``feed (1, 7] no delete values`` (on ``random``): the six writes, each delete with the
  deleted row's identity only (``delete_values=False``, what a table published with its row
  identity applies): only the range's deltas are read;
* ``base decoded alone`` (on ``random``): pyarrow decoding every stripe of the base's files
  (``rowId`` and ``row``) and nothing else, the floor of that table's feed (1, 7]: no reader
  of the deleted rows' values decodes less when the deletes hit every stripe.

A delete event holds only the deleted row's identity, so a delete's values (the row the feed
shows) can only be read from the file holding the row: here the base. The feed passes over
the base's stripes whose identity bounds (ORC stripe statistics) hold no deleted identity.
Of the others, it reads the identity columns to find the deleted rows (unless the statistics
show the rows numbered in order: then row i holds rowId lowest + i), and their other columns
only in the stripes holding one, the cheapest way: the whole stripe (pyarrow decodes a stripe
whole), its first rows up to the last deleted (a view of the file listing fewer rows), or
just their span by seeking (pyorc, a Python value a value). Random deletes hit every stripe,
so their feed decodes the whole base, about what a compaction reads; clustered deletes are
the first 5,000 rows of each bucket file (5% of a 100,000-row stripe, or 0.5% of the one
stripe), decoded as the stripe's first rows, without the identity.

It counts the data files each run opens (a counting filesystem) and checks that the feeds open
only the deltas of their range and, for deletes, the base files of the buckets those deletes
touch (the feed without delete values: its range's deltas only). Target (issue #22): the
feed at most 5% of the compaction. Each run's ratio is a
feed's time over its table's compaction measured just before it in the same run; the figures
shown are the median over the runs (and the lowest and highest ratio), the times the median
of each measure. The machine's load average is printed before and after (other work on the
machine slows both, not always alike). Then each feed's rows sha256 (its rows sorted, from the
last run; the last of them over all four feeds: code that changes no output row keeps it). The
last line gives the median ratio of each feed. The exit status is 0 whether or not the target
is met (1 when a feed opened a file it should not).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import posixpath
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_table import generate_in_child
from fsspec.implementations.local import LocalFileSystem

TARGET = 0.05
#: The name of the measure of the random table's base decoded alone (:func:`_decode_base`).
FLOOR = "base decoded alone"
#: The name of the feeds whose deletes hold the deleted row's identity only.
NO_VALUES = "no delete values"
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


def _feed(
    table: str, write_ids: str, out: Path, to: int, values: bool = True
) -> tuple[float, CountingFileSystem, Any]:
    from airflow_provider_acid.engine.change_runs import compute_changes

    shutil.rmtree(out, ignore_errors=True)
    fs = CountingFileSystem()
    started = time.perf_counter()
    feed = compute_changes(
        table, str(out), from_write_id=1, to_write_id=to, write_ids=write_ids,
        key=["id"] if values else (), delete_values=values, filesystem=fs,
    )  # fmt: skip
    return time.perf_counter() - started, fs, feed


def _decode_base(table: str) -> float:
    """Seconds pyarrow takes to decode every stripe of the base's files (the ``rowId`` and
    ``row`` columns the feed reads) and nothing else: the least a feed of deletes that hit
    every stripe costs, as a delete event holds only the deleted row's identity."""
    import pyarrow.orc as pa_orc

    started = time.perf_counter()
    for path in sorted(Path(table).glob("base_*/bucket_*")):
        orc = pa_orc.ORCFile(str(path))
        for index in range(orc.nstripes):
            orc.read_stripe(index, columns=["rowId", "row"])
    return time.perf_counter() - started


def _rows_hash(feed: Any) -> str:
    """The sha256 of a feed's rows, sorted (as text, one row a line): the same rows give the
    same hash whatever their files, order and row groups."""
    import pyarrow.parquet as pq

    lines = []
    for path in feed.result.file_paths() if feed.result else []:
        for row in pq.read_table(path).to_pylist():
            lines.append(repr(sorted(row.items())))
    return hashlib.sha256("\n".join(sorted(lines)).encode()).hexdigest()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--buckets", type=int, default=4)
    parser.add_argument("--rows", type=int, default=4_000_000)
    parser.add_argument("--repeat", type=int, default=3)
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
    times: dict[str, list[float]] = {}
    ratios: dict[str, list[float]] = {}  # each run's feed over that run's compaction
    opened: dict[str, set[str]] = {}
    counts: dict[str, Any] = {}
    hashes: dict[str, str] = {}  # each feed's rows, from the last run
    reference: dict[str, str] = {}  # each feed's compaction
    load_before = os.getloadavg()
    for _ in range(args.repeat):
        for kind, (root, write_ids) in tables.items():
            table = str(root / "table")
            runs = [("feed (1, 7]", 7, True)]
            if kind == "random":
                runs += [("feed (1, 4]", 4, True), (f"feed (1, 7] {NO_VALUES}", 7, False)]
            compaction = f"compaction {kind}"
            reference_seconds, fs = _compaction(table, write_ids, root / "snapshot")
            times.setdefault(compaction, []).append(reference_seconds)
            opened[compaction] = _folders(fs.opened, table)
            for feed_name, to, values in runs:
                name = f"{feed_name} {kind}"
                seconds, fs, feed = _feed(table, write_ids, root / f"feed-{to}", to, values)
                times.setdefault(name, []).append(seconds)
                ratios.setdefault(name, []).append(seconds / reference_seconds)
                opened[name] = _folders(fs.opened, table)
                counts[name] = dict(feed.counts)
                hashes[name] = _rows_hash(feed)
                reference[name] = compaction
            if kind == "random":  # the floor of its feed (1, 7]: the base decoded alone
                name = f"{FLOOR} {kind}"
                seconds = _decode_base(table)
                times.setdefault(name, []).append(seconds)
                ratios.setdefault(name, []).append(seconds / reference_seconds)
                reference[name] = compaction
    load_after = os.getloadavg()
    median = {k: statistics.median(v) for k, v in times.items()}
    checks = {}
    for name, compaction in reference.items():
        if name.startswith(FLOOR):
            continue
        # what a feed may open: the deltas of its range, and for deletes the base
        to = int(name.split("]")[0].split(", ")[1])
        deltas = {f for f in opened[compaction] if "delta_" in f and _write_of(f) <= to}
        # the base holds the deleted rows' values (not read without them)
        has_deletes = NO_VALUES not in name and any(f.startswith("delete_delta_") for f in deltas)
        bases = {f for f in opened[compaction] if f.startswith("base_") and has_deletes}
        allowed = deltas | bases
        checks[f"{name} opens only its range's deltas (and the base for deletes)"] = (
            opened[name] <= allowed
        )
    result = {
        "rows": args.rows,
        "buckets": args.buckets,
        "runs": args.repeat,
        "load_average_before": load_before,
        "load_average_after": load_after,
        "changed_rows": {k: sum(v.values()) for k, v in counts.items()},
        "seconds": median,
        "seconds_each_run": times,
        "ratio": {k: statistics.median(v) for k, v in ratios.items()},
        "ratio_each_run": ratios,
        "target": TARGET,
        "folders_opened": {k: sorted(v) for k, v in opened.items()},
        "checks": checks,
        "rows_sha256": hashes,
        "all_rows_sha256": hashlib.sha256(  # the four feeds with the deleted rows' values
            "".join(v for k, v in hashes.items() if NO_VALUES not in k).encode()
        ).hexdigest(),
    }
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        loads = " / ".join(f"{a:.2f} {b:.2f} {c:.2f}" for a, b, c in (load_before, load_after))
        print(f"table: {args.rows:,} rows in {args.buckets} buckets, write-id list {write_ids}")
        print(f"{args.repeat} runs; load average (1, 5, 15 min) before / after: {loads}")
        for name, seconds in median.items():
            ratio = ""
            if name in reference:
                low, high = min(ratios[name]), max(ratios[name])
                ratio = f"  {result['ratio'][name]:.3f}x compaction ({low:.3f}..{high:.3f})"
            changes = counts.get(name)
            shown = f"  changes {changes}" if changes else ""
            print(f"{name:<30} {seconds:6.2f} s{ratio}{shown}")
            if name in opened:
                print(f"{'':<30} opened {sorted(opened[name])}")
        for name, digest in hashes.items():
            print(f"{name:<30} rows sha256 {digest}")
        print(f"{'all four feeds':<30} rows sha256 {result['all_rows_sha256']}")
        for check, ok in checks.items():
            print(f"{'ok' if ok else 'FAILED'}: {check}")
        shown = ", ".join(f"{k} {v:.3f}x" for k, v in result["ratio"].items())
        print(f"feed / compaction, median of {args.repeat} runs: {shown} (target {TARGET:.2f}x)")
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
