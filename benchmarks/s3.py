"""Benchmark: compaction and a one-partition manifest on a real S3 server that is far away.

    python benchmarks/s3.py [--latency 0.02] [--bandwidth MB_PER_S] [--repeat 2] [--warm-up 2]
                            [--workers 1] [--manifest-partitions 2000]
                            [--manifest-files-per-partition 500] [--no-manifest]
                            [--manifest-only]

The server is S3Proxy with its filesystem backend (``scripts/s3.py``, started here unless it
runs, in ``.cache/s3proxy/run``); every request goes through the fault proxy
(:mod:`airflow_provider_acid.testing.fault_proxy`, in this process), which adds ``--latency``
seconds to each request (20 ms: a distant region's round trip), optionally caps the bandwidth,
and counts every request and every body byte it passes.

1. **Compaction.** The 4M-row, 4-bucket table of ``benchmarks/compaction.py`` (generated once
   under ``--workdir``; a base, 3 insert and 3 delete deltas of 5%) is laid into the bucket's
   folder of the filesystem backend (the server serves it as objects). Measured in the same run,
   each in a fresh process set up as the CLI's: the Arrow memory pool the CLI and the operators
   use (:func:`.memory_pool.use_worker_memory_pool`), and pandas left unimported
   (:func:`.pandas_probe.keep_pandas_unimported`); wall time inside it; peak RSS from the kernel,
   best of ``--repeat``: the compaction of the local copy into a local folder (the reference),
   and the compaction of the table on S3 into S3 through the proxy. Printed: their ratio; the
   bytes the proxy passed for the table's files against the ORC bytes the compaction needs
   (measured independently: the union of the byte ranges pyorc and pyarrow read of each file,
   locally, for what the compaction reads of it: the footer and every stripe, all columns of
   data files, the identity columns of delete deltas); the requests per data file (all the
   compaction's requests, listing and writes included, over the data and delete-delta files);
   the peak RSS per worker. Before them, ``--warm-up`` untimed S3 compactions (2 by default,
   through the proxy with no added latency; each one's time and peak RSS printed): S3Proxy's
   JVM compiles its hot paths in the first requests after it starts, which a real store has
   long done. A fresh S3Proxy made the next two compactions 0.5 and 0.17 s slower than later
   ones.
2. **Manifest on 1M objects.** ``--manifest-partitions`` x ``--manifest-files-per-partition``
   copies of one tiny ACID file (``testing.many_partitions``) are laid into the backend's
   folder as hard links (made once, kept in ``.cache/s3proxy/run``), with a column-stats index
   of them all written through the server. Then the manifest of ``p = 7 AND amount = 7`` is
   computed through the proxy, best of ``--repeat``: its requests and time, with no added
   latency and with ``--latency``. The index is written once per index layout (its folder
   and marker name the layout). ``--manifest-only`` runs only this part (its last line is
   ``s3: manifest 1M: N requests, T.TT s``).

The last line: ``s3 +20ms: compaction X.XXx local, bytes Y.YYx needed, Z.Z requests/file;
manifest 1M: N requests, T.TT s`` (the manifest figures without added latency). Targets
(issue #25): compaction at most 1.5x local, bytes at most 1.1x, at most 4 requests a file,
the manifest at most 10 requests and 2 s, at most 300 MiB RSS a worker.
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
from collections import Counter
from pathlib import Path
from typing import Any

import compaction as compaction_bench

REPO = Path(__file__).resolve().parents[1]
BUCKET = "warehouse"
TARGETS = {"ratio": 1.5, "bytes": 1.1, "requests": 4.0, "manifest_requests": 10, "seconds": 2.0}
TARGET_RSS_MIB = 300
DELETE_COLUMNS = ["operation", "originalTransaction", "bucket", "rowId"]


def start_server() -> tuple[str, Path]:
    """The running S3Proxy (started by scripts/s3.py unless running): endpoint, data folder."""
    out = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "s3.py"), "start"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    state = json.loads((REPO / ".cache" / "s3proxy" / "run" / "state.json").read_text())
    print(f"server   {out.strip().splitlines()[0]}", file=sys.stderr)
    return state["endpoint"], Path(state["data"])


def options_for(endpoint: str) -> dict[str, Any]:
    """fsspec options for the server's key (scripts/s3.py's) at ``endpoint``."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("s3_script", REPO / "scripts" / "s3.py")
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    return {
        "key": script.ACCESS_KEY,
        "secret": script.SECRET_KEY,
        "client_kwargs": {"endpoint_url": endpoint, "region_name": "us-east-1"},
    }


def lay_tree(source: Path, target: Path) -> None:
    """Copy a local table into the backend's bucket folder once (a marker says it is whole)."""
    marker = target / "_laid"
    if marker.exists():
        return
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("_generated.json"))
    marker.touch()


# -- the compaction runs (each in its own process) --------------------------------------------


def run_child(table: str, out: str, workers: int, options: dict[str, Any] | None) -> dict:
    """Compact ``table`` into ``out`` in a fresh process: wall time, rows, peak RSS (MiB)."""
    command = [sys.executable, __file__, "_run", table, out, str(workers), json.dumps(options)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(process.pid, 0)
    output = process.stdout.read() if process.stdout else ""
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"the compaction of {table} failed")
    result = json.loads(output.strip().splitlines()[-1])
    result["peak_rss_mib"] = usage.ru_maxrss / 1024
    result["cpu_seconds"] = usage.ru_utime + usage.ru_stime
    return result


def _child(table: str, out: str, workers: int, options: dict[str, Any] | None) -> None:
    from airflow_provider_acid.engine.pandas_probe import keep_pandas_unimported

    keep_pandas_unimported()  # as the CLI does, before any conversion

    # what either run imports, imported before the clock starts (as compaction.py does)
    import pyarrow.orc  # noqa: F401
    import s3fs  # noqa: F401

    from airflow_provider_acid.engine.compaction import compact_table
    from airflow_provider_acid.engine.memory_pool import use_worker_memory_pool
    from airflow_provider_acid.engine.options import CompactionOptions

    use_worker_memory_pool()  # as the CLI and the operators do
    started = time.perf_counter()
    result = compact_table(
        table,
        out,
        storage_options=options,
        options=CompactionOptions(
            max_workers=workers, reuse=False, timestamp_unit=compaction_bench.TIMESTAMP_UNIT
        ),
    )
    print(json.dumps({"seconds": time.perf_counter() - started, "rows": result.rows_written}))


# -- what the compaction needs of each file ---------------------------------------------------


class _Recording:
    """A local file that records the byte ranges read of it."""

    def __init__(self, path: str) -> None:
        self.handle = open(path, "rb")  # noqa: SIM115 - closed by the caller
        self.spans: list[tuple[int, int]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.handle, name)

    def read(self, size: int = -1) -> bytes:
        start = self.handle.tell()
        data = self.handle.read(size)
        self.spans.append((start, start + len(data)))
        return data

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


def _union(spans: list[tuple[int, int]]) -> int:
    total, end = 0, -1
    for start, stop in sorted(spans):
        if stop <= end:
            continue
        total += stop - max(start, end)
        end = stop
    return total


def needed_bytes(table: str) -> tuple[int, int, dict[str, int]]:
    """(bytes needed, files, needed bytes by file name relative to ``table``): what pyorc's
    footer read and pyarrow's stripe reads (the columns the compaction reads) touch."""
    import pyarrow.orc as orc
    import pyorc

    from airflow_provider_acid.acid.resolution import resolve_read_view

    needed: dict[str, int] = {}
    for bucket_slice in resolve_read_view(table).slices:
        for data_file, columns in [
            *((f, None) for f in bucket_slice.data_files),
            *((f, DELETE_COLUMNS) for f in bucket_slice.delete_delta_files),
        ]:
            recording = _Recording(data_file.path)
            try:
                pyorc.Reader(recording)
                recording.seek(0)
                reader = orc.ORCFile(recording)
                for index in range(reader.nstripes):
                    reader.read_stripe(index, columns=columns)
            finally:
                recording.handle.close()
            needed[os.path.relpath(data_file.path, table)] = _union(recording.spans)
    return sum(needed.values()), len(needed), needed


# -- the manifest on 1M objects ---------------------------------------------------------------


def lay_many(data: Path, name: str, partitions: int, files: int) -> str:
    """The many-partition table as hard links in the backend's folder (once); its URL."""
    from airflow_provider_acid.testing.many_partitions import partition_file_paths, tiny_acid_file

    root = data / BUCKET / name
    marker = data / BUCKET / f".{name}.laid"
    if not marker.exists():
        shutil.rmtree(root, ignore_errors=True)
        sources = data / f".{name}-sources"
        sources.mkdir(exist_ok=True)
        tiny = tiny_acid_file()
        made: set[str] = set()
        started = time.perf_counter()
        for number, path in enumerate(partition_file_paths(str(root), partitions, files)):
            if number % 60_000 == 0:  # ext4 allows 65,000 links to a file
                source = sources / f"tiny-{number // 60_000}"
                source.write_bytes(tiny)
                os.utime(source, (1_700_000_000, 1_700_000_000))  # one version for all
            folder = os.path.dirname(path)
            if folder not in made:
                os.makedirs(folder, exist_ok=True)
                made.add(folder)
            os.link(source, path)
        marker.touch()
        print(f"  laid {partitions * files:,} objects in {time.perf_counter() - started:.0f} s",
              file=sys.stderr)  # fmt: skip
    return f"s3://{BUCKET}/{name}"


def write_many_index(table: str, index: str, partitions: int, files: int, options: dict) -> None:
    """The index of every file, from one partition's listing (the copies are alike: same size,
    same version) and the one footer they share."""
    from airflow_provider_acid.acid.listing import StoredFile, list_table_files, resolve_filesystem
    from airflow_provider_acid.acid.resolution import resolve_files
    from airflow_provider_acid.acid.schema import table_schema
    from airflow_provider_acid.pruning.index import write_tables
    from airflow_provider_acid.pruning.index_records import stats_tables
    from airflow_provider_acid.pruning.manifest import file_key, index_columns_tag
    from airflow_provider_acid.pruning.stats import read_file_stats
    from airflow_provider_acid.testing.many_partitions import partition_file_paths

    fs, root = resolve_filesystem(table, storage_options=options)
    (listed,) = list_table_files(fs, f"{root}/p=0")[:1]
    stored = [
        StoredFile(p, listed.size, listed.version)
        for p in partition_file_paths(root, partitions, files)
    ]
    snapshot = resolve_files(root, stored)
    names = table_schema(snapshot, fs).names[:-1]
    tag = index_columns_tag(names)
    data_files = [f for s in snapshot.slices for f in s.data_files]
    one = read_file_stats(fs, data_files[0].path, column_names=names)
    keys, stats = {}, []
    for f in data_files:
        key = file_key(f)
        keys[f.path] = type(key)(key.path, key.size, f"{key.version}#{tag}")
        stats.append(type(one)(f.path, one.format, one.row_count, one.columns))
    tables = stats_tables(stats, keys)
    write_tables(index, *tables, storage_options=options)


def manifest_once(table: str, index: str, options: dict) -> Any:
    import s3fs

    from airflow_provider_acid.pruning.manifest import compute_manifest

    s3fs.S3FileSystem.clear_instance_cache()
    return compute_manifest(
        table,
        "p = 7 AND amount = 7",
        index_uri=index,
        storage_options=options,
        index_storage_options=options,
    )


# -- the run ----------------------------------------------------------------------------------


def compaction_figures(args: argparse.Namespace, proxy: Any, by_key: Counter, data: Path) -> dict:
    """Part 1: the local and the S3 compactions, best of ``--repeat``; printed as they run."""
    workdir = Path(args.workdir)
    base = args.buckets * args.rows_per_bucket
    delta = int(base * compaction_bench.DELTA_FRACTION)
    local = workdir / f"table-{args.buckets}x{args.rows_per_bucket}"
    compaction_bench.generate_in_child(local, args.buckets, base, delta, delta)
    name = f"bench-{args.buckets}x{args.rows_per_bucket}"
    lay_tree(local, data / BUCKET / name)
    table_url = f"s3://{BUCKET}/{name}"
    options = options_for(proxy.endpoint_url)
    bandwidth = args.bandwidth * 1e6 if args.bandwidth else None
    label = f"+{args.latency * 1000:.0f}ms"
    needed, n_files, _ = needed_bytes(str(local))
    for warm_up in range(args.warm_up):  # S3Proxy's JVM compiles its hot paths meanwhile
        out = f"s3://{BUCKET}/warm-up-{os.getpid()}-{warm_up}"
        done = run_child(table_url, out, args.workers, options)
        shutil.rmtree(data / BUCKET / out.rpartition("/")[2], ignore_errors=True)
        print(
            f"  warm-up {warm_up + 1} (untimed, no added latency): S3 {done['seconds']:.2f} s, "
            f"{done['peak_rss_mib']:.0f} MiB",
            file=sys.stderr,
        )
    locals_, remotes = [], []
    for round_number in range(args.repeat):
        scratch = Path(tempfile.mkdtemp(prefix="s3-bench-", dir=workdir))
        locals_.append(run_child(str(local), str(scratch / "out"), args.workers, None))
        shutil.rmtree(scratch, ignore_errors=True)
        out = f"s3://{BUCKET}/out-{os.getpid()}-{round_number}"
        by_key.clear()
        mark = len(proxy.seen())
        with proxy.shaped(args.latency, bandwidth):
            remote = run_child(table_url, out, args.workers, options)
        seen = proxy.seen()[mark:]
        remote["requests"] = Counter(r.operation for r in seen)
        remote["fetched"] = sum(v for k, v in by_key.items() if k.startswith(f"{name}/"))
        remotes.append(remote)
        shutil.rmtree(data / BUCKET / out.rpartition("/")[2], ignore_errors=True)
        print(
            f"  round {round_number + 1}: local {locals_[-1]['seconds']:.2f} s "
            f"(CPU {locals_[-1]['cpu_seconds']:.2f} s), S3 {label} {remote['seconds']:.2f} s "
            f"(CPU {remote['cpu_seconds']:.2f} s; {sum(remote['requests'].values())} "
            f"requests, {remote['peak_rss_mib']:.0f} MiB)",
            file=sys.stderr,
        )
    best_local = min(locals_, key=lambda r: r["seconds"])
    best_remote = min(remotes, key=lambda r: r["seconds"])
    if best_local["rows"] != best_remote["rows"]:
        raise RuntimeError(f"local and S3 compactions disagree: {best_local} {best_remote}")
    return {
        "base": base,
        "delta": delta,
        "needed": needed,
        "n_files": n_files,
        "best_local": best_local,
        "best_remote": best_remote,
        "ratio": best_remote["seconds"] / best_local["seconds"],
        "fetched": best_remote["fetched"] / needed,
        "requests": sum(best_remote["requests"].values()) / n_files,
        "rss": max(r["peak_rss_mib"] for r in remotes) / args.workers,
    }


def manifest_figures(args: argparse.Namespace, proxy: Any, data: Path) -> tuple[int, float]:
    """Part 2: the one-partition manifest on 1M objects, best of ``--repeat``, without and
    with ``--latency``; printed as measured. Returns (requests, seconds) without latency."""
    options = options_for(proxy.endpoint_url)
    count = args.manifest_partitions * args.manifest_files_per_partition
    many = lay_many(
        data,
        f"many-{args.manifest_partitions}x{args.manifest_files_per_partition}",
        args.manifest_partitions,
        args.manifest_files_per_partition,
    )
    # one index per layout of the index (segments of path ranges since issue #25), so runs of
    # an earlier checkout and of this one in the same data folder each read their own
    from airflow_provider_acid.pruning.index_format import SEGMENT_FILES

    layout = f"ranges-{SEGMENT_FILES}"
    index = f"{many}_acid/_index-{layout}"
    marker = data / BUCKET / f".{many.rpartition('/')[2]}.indexed-{layout}"
    if not marker.exists():
        started = time.perf_counter()
        write_many_index(many, index, args.manifest_partitions,
                         args.manifest_files_per_partition, options)  # fmt: skip
        marker.touch()
        print(f"  index written in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    figures = {}
    for latency in (0.0, args.latency):
        best: tuple = (float("inf"), Counter(), None)
        for _ in range(args.repeat):
            mark = len(proxy.seen())
            with proxy.shaped(latency, None):
                started = time.perf_counter()
                made = manifest_once(many, index, options)
                elapsed = time.perf_counter() - started
            ops = Counter(r.operation for r in proxy.seen()[mark:])
            best = min(best, (elapsed, ops, made.metrics), key=lambda b: b[0])
        figures[latency] = best
        print(
            f"manifest {count:,} objects, p = 7, +{latency * 1000:.0f}ms: "
            f"{sum(best[1].values())} requests {dict(best[1])}, {best[0]:.2f} s, of which "
            f"index read {best[2].index_read_seconds:.2f} s "
            f"({best[2].partitions_kept} partition kept)"
        )
    m_seconds, ops, _ = figures[0.0]
    return sum(ops.values()), m_seconds


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "_run":
        _child(argv[1], argv[2], int(argv[3]), json.loads(argv[4]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--latency", type=float, default=0.02, help="seconds added a request")
    parser.add_argument("--bandwidth", type=float, default=None, help="MB/s cap (none: none)")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument(
        "--warm-up", type=int, default=2, help="untimed S3 compactions first (a JVM warms up)"
    )
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--buckets", type=int, default=4)
    parser.add_argument("--rows-per-bucket", type=int, default=1_000_000)
    parser.add_argument("--manifest-partitions", type=int, default=2000)
    parser.add_argument("--manifest-files-per-partition", type=int, default=500)
    parser.add_argument("--no-manifest", dest="manifest", action="store_false")
    parser.add_argument("--manifest-only", action="store_true", help="skip the compaction")
    parser.add_argument(
        "--workdir", default=os.path.join(tempfile.gettempdir(), "airflow-acid-benchmark")
    )
    args = parser.parse_args(argv)
    os.environ.setdefault("NO_PROXY", "127.0.0.1,localhost")
    from airflow_provider_acid.testing.fault_proxy import FaultProxy

    endpoint, data = start_server()
    by_key: Counter = Counter()
    proxy = FaultProxy(endpoint, answered=lambda key, size: by_key.update({key: size})).start()
    label = f"+{args.latency * 1000:.0f}ms"
    try:
        c = None if args.manifest_only else compaction_figures(args, proxy, by_key, data)
        manifest_line = "manifest skipped"
        m_requests, m_seconds = 0, float("nan")
        if args.manifest or args.manifest_only:
            m_requests, m_seconds = manifest_figures(args, proxy, data)
            manifest_line = f"manifest 1M: {m_requests} requests, {m_seconds:.2f} s"
    finally:
        proxy.stop()

    met = {}
    if c is not None:
        best_local, best_remote = c["best_local"], c["best_remote"]
        print(
            f"table    {args.buckets} buckets, base {c['base']:,} rows, 3 insert + 3 delete "
            f"deltas of {c['delta']:,} rows; {c['n_files']} ORC files, "
            f"{c['needed'] / 1e6:.1f} MB needed"
        )
        print(f"local    {best_local['seconds']:.2f} s, {best_local['peak_rss_mib']:.0f} MiB "
              f"({args.workers} worker(s), best of {args.repeat})")  # fmt: skip
        print(
            f"S3 {label:<5} {best_remote['seconds']:.2f} s, {c['rss']:.0f} MiB a worker; "
            f"{best_remote['fetched'] / 1e6:.1f} MB fetched; requests "
            f"{dict(best_remote['requests'])}"
        )
        met = {
            "compaction": c["ratio"] <= TARGETS["ratio"],
            "bytes": c["fetched"] <= TARGETS["bytes"],
            "requests/file": c["requests"] <= TARGETS["requests"],
            "rss": c["rss"] <= TARGET_RSS_MIB,
        }
    if args.manifest or args.manifest_only:
        met["manifest"] = m_requests <= TARGETS["manifest_requests"] and (
            m_seconds <= TARGETS["seconds"]
        )
    print("targets  " + ", ".join(f"{k}: {'met' if v else 'MISSED'}" for k, v in met.items())
          + f"; {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")  # fmt: skip
    if c is None:
        print(f"s3: {manifest_line}")
    else:
        print(
            f"s3 {label}: compaction {c['ratio']:.2f}x local, bytes {c['fetched']:.2f}x needed, "
            f"{c['requests']:.1f} requests/file; {manifest_line}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
