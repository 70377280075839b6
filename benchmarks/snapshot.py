"""Snapshot resolution time over synthetic listings of 100k and 1M data files.

The listing is the one benchmarks/manifest.py builds (8 buckets per partition, 4 data files
per slice plus a delete delta: 1.25 listed files per data file, 32 data files a partition).
For each size it prints the best of ``--repeat`` runs of :func:`resolve_files` over the
listing already in memory, and, measured in the same run (best of at least 5), a reference
pass that any resolution makes at least once: cutting every path at its last ``/``.
The ratio of the two is resolution's cost per file in units of that pass; it moves less with
the machine's load than seconds do. The 1M/100k ratio of the resolution times shows whether
resolution stays linear in the number of files. Each run's CPU time is printed too: on a
machine shared with other work the wall time is mostly waiting for a core.

What is timed is resolution as issue #14 means it: from the listed files (``StoredFile``
objects already in memory) to the partitions' bucket slices. Listing storage, and turning
fsspec's listing dicts into ``StoredFile`` objects, is not part of it (benchmarks/listing.py
times the whole path on an S3 server).

Every partition of that listing is laid out alike (the same folder and file names), as when
the same statements wrote them all, and resolution makes every partition after the first of a
layout from that one's template (``acid/alike_partitions.py``). So two more figures are
printed per size, measured in the same run: a consumer walking every data file of the snapshot
made (``[f for s in snapshot.slices for f in s.data_files]``: the files are made during
resolution, so this is only the walk), and the same listing with every partition laid out its
own way (each partition's folders with write ids of its own, as when each partition is
compacted on its own), whose partitions are shaped alike and made from one template by folder
position (``acid/shaped_partitions.py``); its ratio to the reference pass is printed too.

Targets: resolution of 1M data files under 2 s (issue #14), and so with every partition laid
out its own way (issue #25).

    python benchmarks/snapshot.py [--sizes 100000 1000000] [--repeat 3] [--no-distinct]
"""

from __future__ import annotations

import argparse
import os
import re
import time

from manifest import ROOT, synthetic_files

from airflow_provider_acid.acid.listing import StoredFile
from airflow_provider_acid.acid.resolution import resolve_files


def reference_pass(files: list[StoredFile]) -> int:
    """Cut every path into folder and file name, keeping nothing."""
    cut = 0
    for stored in files:
        folder, _, _ = stored.path.rpartition("/")
        cut += len(folder)
    return cut


TARGET_1M_SECONDS = 2.0
_WRITE_IDS = re.compile(r"/dt=(\d+)/(base|delta|delete_delta)_(\d+)(?:_(\d+))?")


def distinct_layouts(files: list[StoredFile]) -> list[StoredFile]:
    """The same listing with each partition's write ids moved by 10 times its number: no two
    partitions laid out alike (and the same files chosen)."""

    def moved(match: re.Match[str]) -> str:
        shift = int(match[1]) * 10
        ids = [f"{int(w) + shift:07d}" for w in match.groups()[2:] if w is not None]
        return f"/dt={match[1]}/{match[2]}_{'_'.join(ids)}"

    return [StoredFile(_WRITE_IDS.sub(moved, f.path, 1), f.size, f.version) for f in files]


def walk(snapshot) -> int:
    """What a consumer that reads every data file does first."""
    return len([f for s in snapshot.slices for f in s.data_files])


def best_of(repeat: int, run) -> tuple[float, float]:
    """The best wall and the best CPU seconds of ``repeat`` runs."""
    best, best_cpu = float("inf"), float("inf")
    for _ in range(repeat):
        cpu, started = time.process_time(), time.perf_counter()
        result = run()
        best = min(best, time.perf_counter() - started)
        best_cpu = min(best_cpu, time.process_time() - cpu)
        del result
    return best, best_cpu


def measure(size: int, repeat: int, distinct: bool) -> dict[str, float]:
    files = synthetic_files(size)
    snapshot = resolve_files(ROOT, files)
    data_files = walk(snapshot)
    slices = len(snapshot.slices)
    del snapshot
    resolve_s, resolve_cpu_s = best_of(repeat, lambda: resolve_files(ROOT, files))
    snapshot = resolve_files(ROOT, files)
    walk_s, walk_cpu_s = best_of(repeat, lambda: walk(snapshot))
    del snapshot
    result = {
        "listed": len(files),
        "data_files": data_files,
        "slices": slices,
        "resolve_s": resolve_s,
        "resolve_cpu_s": resolve_cpu_s,
        "walk_s": walk_s,
        "walk_cpu_s": walk_cpu_s,
        "reference_s": best_of(max(repeat, 5), lambda: reference_pass(files))[0],  # it is short
    }
    if distinct:
        files = distinct_layouts(files)
        snapshot = resolve_files(ROOT, files)
        assert walk(snapshot) == data_files and len(snapshot.slices) == slices
        del snapshot
        result["distinct_s"], result["distinct_cpu_s"] = best_of(
            repeat, lambda: resolve_files(ROOT, files)
        )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--no-distinct",
        dest="distinct",
        action="store_false",
        help="skip the listing with every partition laid out its own way",
    )
    args = parser.parse_args()
    results = {}
    for size in args.sizes:
        r = results[size] = measure(size, args.repeat, args.distinct)
        print(
            f"{r['data_files']:>9,} data files ({r['listed']:,} listed, {r['slices']:,} slices)  "
            f"resolve {r['resolve_s']:6.2f} s ({r['resolve_s'] / r['listed'] * 1e6:.1f} us "
            f"a file; CPU {r['resolve_cpu_s']:.2f} s)  reference pass {r['reference_s']:.3f} s  "
            f"ratio {r['resolve_s'] / r['reference_s']:.0f}x",
            flush=True,
        )
        print(
            f"{'':>9}   walking every data file of it afterwards: {r['walk_s']:.2f} s "
            f"(CPU {r['walk_cpu_s']:.2f} s; resolution plus walk "
            f"{r['resolve_s'] + r['walk_s']:.2f} s)",
            flush=True,
        )
        if args.distinct:
            print(
                f"{'':>9}   every partition laid out its own way: {r['distinct_s']:.2f} s "
                f"(CPU {r['distinct_cpu_s']:.2f} s; ratio "
                f"{r['distinct_s'] / r['reference_s']:.0f}x the reference pass, "
                f"{r['distinct_s'] / r['resolve_s']:.1f}x the alike listing)",
                flush=True,
            )
        if size == 1_000_000:
            for label, key in [("alike", "resolve"), ("own way", "distinct")]:
                if f"{key}_s" not in r:
                    continue
                met = "met" if r[f"{key}_s"] < TARGET_1M_SECONDS else "MISSED"
                print(
                    f"1M data files, partitions laid out {label}: {r[f'{key}_s']:.2f} s wall, "
                    f"{r[f'{key}_cpu_s']:.2f} s CPU (target under {TARGET_1M_SECONDS:.0f} s: "
                    f"{met}; {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f})",
                    flush=True,
                )
    if 100_000 in results and 1_000_000 in results:
        ratio = results[1_000_000]["resolve_s"] / results[100_000]["resolve_s"]
        print(f"1M/100k resolution time ratio: {ratio:.1f} (10 is linear)")


if __name__ == "__main__":
    main()
