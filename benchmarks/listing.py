"""The whole manifest path on an S3 server (moto, on 127.0.0.1): listing, resolution, index
read and evaluation, timed, with every HTTP request counted.

The table has ``--partitions`` one-level partitions ``p=0 .. p=N-1`` (2,000 by default) of
``--files-per-partition`` bucket files each, laid out as Hive ACID
(``p=N/delta_0000001_0000001_0000/bucket_0000B``; copies of one tiny ACID ORC file written by
the project's simulator, :mod:`airflow_provider_acid.testing.many_partitions`). Its
column-stats index (on the same server) holds every file, written once in bulk from that
file's footer statistics (a refresh would read the same footer 100k times).

Three manifests are measured, best of ``--repeat``, in one run:

* **whole table**, the reference: the manifest as it was made before partition-scoped listing
  (one recursive listing of the table, then resolution, index read and evaluation), for the
  one-partition predicate;
* **one partition**, ``p = 7``: partition folders listed with one delimited listing, only
  ``p=7`` listed;
* **10%**, ``p < N/10``: a tenth of the partitions, listed 16 at a time, or, when one
  recursive listing of the table takes fewer requests (estimated from the first kept
  partition), the table listed whole and the partitions left out dropped.

Then an index refresh of ``--refresh-files`` footers from the server, one at a time and 16 at a
time (each footer one ranged GET here: the files are small).

For each it prints the requests the server received (by S3 operation) and the time, and their
ratio against the whole-table reference. Target (issue #14): the one-partition manifest makes
at most 1% of the whole table's requests.

    python benchmarks/listing.py                          # 2,000 partitions x 50 files = 100k
    python benchmarks/listing.py --files-per-partition 5  # a scaled table of 10k files

The objects are put into moto's in-process backend directly (one HTTP PUT each would take
many minutes for 100k on a loaded 2-core machine); everything measured goes over HTTP. moto
sorts every key of the bucket for each listing page; :class:`SortedKeys` answers the same
pages from a sorted list of names instead (``--moto-listing``: moto's own), so that a table
of 1M objects (``--files-per-partition 500``) can be listed in minutes.

The least any manifest of one partition can make is 2 requests (a listing of the partition,
and one read of the index); against one page per 1,000 objects for the whole table, 1% is
within reach only from about 200k objects.
"""

from __future__ import annotations

import argparse
import bisect
import os
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs

import s3fs
from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
from werkzeug.serving import make_server

from airflow_provider_acid.acid.listing import StoredFile, list_table_files, resolve_filesystem
from airflow_provider_acid.acid.resolution import resolve_files
from airflow_provider_acid.acid.schema import table_schema
from airflow_provider_acid.pruning.binding import bind
from airflow_provider_acid.pruning.index import write_tables
from airflow_provider_acid.pruning.index_records import stats_tables
from airflow_provider_acid.pruning.manifest import (
    build_manifest,
    compute_manifest,
    file_key,
    index_columns_tag,
    parse_predicate,
)
from airflow_provider_acid.pruning.stats import read_file_stats
from airflow_provider_acid.testing.many_partitions import partition_file_paths, tiny_acid_file

BUCKET = "warehouse"


class Requests:
    """WSGI middleware: every request's S3 operation, thread-safe."""

    def __init__(self, app: Callable) -> None:
        self.app = app
        self.lock = threading.Lock()
        self.seen: list[str] = []

    @staticmethod
    def operation(environ: dict[str, Any]) -> str:
        method = environ["REQUEST_METHOD"]
        query = parse_qs(environ.get("QUERY_STRING", ""), keep_blank_values=True)
        key = environ.get("PATH_INFO", "/").lstrip("/").partition("/")[2]
        if not key and method == "GET":
            return "ListObjectsV2" if query.get("list-type") == ["2"] else "ListObjects"
        return {"GET": "GetObject", "HEAD": "HeadObject", "PUT": "PutObject"}.get(method, method)

    def __call__(self, environ: dict[str, Any], start_response: Callable) -> Any:
        with self.lock:
            self.seen.append(self.operation(environ))
        return self.app(environ, start_response)

    def mark(self) -> int:
        with self.lock:
            return len(self.seen)

    def since(self, mark: int) -> Counter:
        with self.lock:
            return Counter(self.seen[mark:])


class SortedKeys:
    """moto answers each ``ListObjectsV2`` page by sorting every key of the bucket (linear in
    the bucket, so the 1,000 pages of a 1M-object table take an hour); this answers the same
    pages, key for key, from a sorted list of the names, kept until an object is put or
    deleted, with binary search. What it answers (keys, common prefixes, truncation and
    continuation tokens) is what moto's own listing answers; only its cost differs, and the
    requests counted are the same. ``--moto-listing`` keeps moto's own."""

    def __init__(self) -> None:
        self.generation = 0
        self.sorted: dict[str, tuple[int, list[str]]] = {}

    def install(self) -> None:
        from moto.s3.models import S3Backend

        keys = self
        put, delete, delete_many = (
            S3Backend.put_object,
            S3Backend.delete_object,
            S3Backend.delete_objects,
        )

        def changed(method: Callable) -> Callable:
            def call(*args: Any, **kwargs: Any) -> Any:
                keys.generation += 1
                return method(*args, **kwargs)

            return call

        def list_objects_v2(
            backend, bucket, prefix, delimiter, continuation_token, start_after, max_keys
        ):  # noqa: E501
            names = keys.names(bucket)
            prefix = prefix or ""
            after = (
                backend._pagination_tokens.get(continuation_token)
                if continuation_token
                else start_after
            )
            at = bisect.bisect_left(names, prefix)
            if after:
                folder = bool(delimiter) and after.endswith(delimiter) and after.startswith(prefix)
                at = max(
                    at,
                    bisect.bisect_left(names, _successor(after))
                    if folder
                    else bisect.bisect_right(names, after),
                )
            page: list[Any] = []
            while at < len(names) and names[at].startswith(prefix) and len(page) <= max_keys:
                rest = names[at][len(prefix) :]
                if delimiter and delimiter in rest:
                    common = prefix + rest.split(delimiter, 1)[0] + delimiter
                    page.append(common)
                    at = bisect.bisect_left(names, _successor(common), at)
                else:
                    page.append(bucket.keys[names[at]])
                    at += 1
            return backend._truncate_result(page, max_keys)

        S3Backend.put_object = changed(put)
        S3Backend.delete_object = changed(delete)
        S3Backend.delete_objects = changed(delete_many)
        S3Backend.list_objects_v2 = list_objects_v2

    def names(self, bucket: Any) -> list[str]:
        cached = self.sorted.get(bucket.name)
        if cached is None or cached[0] != self.generation:
            cached = self.sorted[bucket.name] = (self.generation, sorted(bucket.keys.keys()))
        return cached[1]


def _successor(prefix: str) -> str:
    """The least string after every string that starts with ``prefix``."""
    return prefix[:-1] + chr(ord(prefix[-1]) + 1)


class Quiet(MotoRequestHandler):
    def log_request(self, *args: Any, **kwargs: Any) -> None:
        pass


def start_server() -> tuple[Any, Requests, dict[str, Any]]:
    os.environ.setdefault("NO_PROXY", "127.0.0.1,localhost")
    requests = Requests(DomainDispatcherApplication(create_backend_app))
    server = make_server("127.0.0.1", 0, requests, threaded=True, request_handler=Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    host, port = server.server_address[:2]
    options = {
        "key": "benchmark-access-key",
        "secret": "benchmark-secret-key",
        "client_kwargs": {"endpoint_url": f"http://{host}:{port}", "region_name": "us-east-1"},
        "skip_instance_cache": True,
    }
    s3fs.S3FileSystem(**options).call_s3("create_bucket", Bucket=BUCKET)
    return server, requests, options


def write_table_objects(table: str, partitions: int, files_per_partition: int) -> int:
    """The table's objects, put straight into the in-process moto backend the server serves
    (an HTTP PUT per object takes minutes for 100k on a loaded machine); they are listed and
    read over HTTP like any other object."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.s3.models import s3_backends

    backend = s3_backends[DEFAULT_ACCOUNT_ID]["global"]
    data = tiny_acid_file()
    root = table.removeprefix(f"s3://{BUCKET}/")
    paths = partition_file_paths(root, partitions, files_per_partition)
    for path in paths:
        backend.put_object(BUCKET, path, data)
    return len(paths)


def write_index(table: str, index: str, options: dict[str, Any]) -> int:
    """The index of every data file, from the one footer they all share."""
    fs, root = resolve_filesystem(table, storage_options=options)
    snapshot = resolve_files(root, list_table_files(fs, root))
    names = table_schema(snapshot, fs).names[:-1]  # the data columns, then p
    tag = index_columns_tag(names)
    data_files = [f for s in snapshot.slices for f in s.data_files]
    one = read_file_stats(fs, data_files[0].path, column_names=names)
    keys = {}
    stats = []
    for f in data_files:
        key = file_key(f)
        keys[f.path] = type(key)(key.path, key.size, f"{key.version}#{tag}")
        stats.append(type(one)(f.path, one.format, one.row_count, one.columns))
    files, columns = stats_tables(stats, keys)
    write_tables(index, files, columns, storage_options=options)
    return len(stats)


def whole_table_manifest(table: str, where: str, index: str, options: dict[str, Any]) -> Any:
    """The manifest as compute_manifest made it before: one recursive listing of the table."""
    fs, root = resolve_filesystem(table, storage_options=options)
    files: list[StoredFile] = list_table_files(fs, root)
    snapshot = resolve_files(root, files)
    schema = table_schema(snapshot, fs)
    names = schema.names[: len(schema.names) - len(snapshot.partition_keys())]
    bound = bind(parse_predicate(where), schema)
    return build_manifest(
        snapshot, bound, schema, index, index_storage_options=options, index_columns=names
    )


def refresh_footers(
    table: str, options: dict[str, Any], files: int, workers: int, requests: Requests
) -> tuple[float, Counter]:
    """An index refresh of the first ``files`` data files into a fresh index on the server,
    ``workers`` footers at a time: its time and requests."""
    from airflow_provider_acid.pruning.index import FileKey, refresh

    fs, root = resolve_filesystem(table, storage_options=options)
    listed: list[StoredFile] = []
    partition = 0
    while len(listed) < files:
        listed += list_table_files(fs, f"{root}/p={partition}")
        partition += 1
    keys = [FileKey(f.path, f.size, f.version or "") for f in listed[:files]]
    index = f"s3://{BUCKET}/refresh-{workers}-{time.monotonic_ns()}"
    mark = requests.mark()
    started = time.perf_counter()
    refresh(index, keys, fs, max_workers=workers, storage_options=options)
    return time.perf_counter() - started, requests.since(mark)


def measure(run: Callable[[], Any], requests: Requests, repeat: int) -> tuple[float, Counter, Any]:
    best, counted, result = float("inf"), Counter(), None
    for _ in range(repeat):
        s3fs.S3FileSystem.clear_instance_cache()  # no listing cached from an earlier run
        mark = requests.mark()
        started = time.perf_counter()
        result = run()
        elapsed = time.perf_counter() - started
        counted = requests.since(mark)
        best = min(best, elapsed)
    return best, counted, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=2000)
    parser.add_argument("--files-per-partition", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--refresh-files", type=int, default=1000)
    parser.add_argument(
        "--moto-listing",
        action="store_true",
        help="moto's own ListObjectsV2 (linear in the bucket a page) instead of SortedKeys",
    )
    args = parser.parse_args()
    if not args.moto_listing:
        SortedKeys().install()

    server, requests, options = start_server()
    try:
        table = f"s3://{BUCKET}/sales"
        index = f"s3://{BUCKET}/sales_acid/_index"
        started = time.perf_counter()
        n_files = write_table_objects(table, args.partitions, args.files_per_partition)
        indexed = write_index(table, index, options)
        setup = time.perf_counter() - started
        print(
            f"table          {args.partitions:,} partitions x {args.files_per_partition} files = "
            f"{n_files:,} data files on moto S3 (127.0.0.1); index of {indexed:,} files; "
            f"set up in {setup:.1f} s"
        )
        print(f"tiny file      {len(tiny_acid_file()):,} bytes; cores {os.cpu_count()}")
        # a data column too, so that the index is read (all rows have amount = 7)
        one = "p = 7 AND amount = 7"
        tenth = f"p < {max(1, args.partitions // 10)} AND amount = 7"
        cases = [
            ("whole table", lambda: whole_table_manifest(table, one, index, options)),
            (
                f"one ({one})",
                lambda: compute_manifest(
                    table,
                    one,
                    index_uri=index,
                    storage_options=options,
                    index_storage_options=options,
                ),
            ),  # noqa: E501
            (
                f"10% ({tenth})",
                lambda: compute_manifest(
                    table,
                    tenth,
                    index_uri=index,
                    storage_options=options,
                    index_storage_options=options,
                ),
            ),  # noqa: E501
        ]
        results = [(name, *measure(run, requests, args.repeat)) for name, run in cases]
        footers = [
            (workers, *refresh_footers(table, options, args.refresh_files, workers, requests))
            for workers in (1, 16)
        ]
    finally:
        server.shutdown()
    _, ref_time, ref_requests, _ = results[0]
    ref_total = sum(ref_requests.values())
    print()
    print(f"{'manifest':<30}{'requests':>10}{'of whole':>10}{'time':>10}{'of whole':>10}  kept")
    for name, elapsed, counted, manifest in results:
        total = sum(counted.values())
        kept = f"{manifest.metrics.partitions_kept:,} of {manifest.metrics.partitions_total:,}"
        print(
            f"{name:<30}{total:>10,}{total / ref_total:>10.2%}{elapsed:>9.3f}s"
            f"{elapsed / ref_time:>10.2%}  {kept} partitions"
        )
        print(f"{'':<30}{dict(sorted(counted.items()))}")
    print()
    print(f"index refresh of {args.refresh_files:,} footers (ranged reads, at most 2 a file)")
    for workers, elapsed, counted in footers:
        gets = counted.get("GetObject", 0)
        print(
            f"  {workers:>2} at a time  {elapsed:7.2f} s  {gets:,} GetObject "
            f"({gets / args.refresh_files:.2f} a file, with the index's own)"
        )
    print(f"  parallel / sequential time: {footers[1][1] / footers[0][1]:.2f}")
    _, _, one_requests, one_manifest = results[1]
    same = [s.to_dict() for s in one_manifest.slices] == [s.to_dict() for s in results[0][3].slices]
    print(f"one-partition manifest keeps the whole table's slices: {'yes' if same else 'NO'}")
    share = sum(one_requests.values()) / ref_total
    verdict = "met" if share <= 0.01 else "NOT met"
    print()
    print(f"target: one-partition requests <= 1% of the whole table's: {share:.2%} ({verdict})")
    print(f"best of {args.repeat}; machine: {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
