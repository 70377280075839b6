"""Partition-scoped listing: partition folders level by level, the predicate's partition
conjuncts evaluated on their values, and only the kept partitions listed.

What must hold: the files listed are exactly the whole listing's files of the kept partitions
(plus what lies outside any partition folder), so the snapshot and the manifest of those
partitions are those of the whole listing; a folder value that cannot be read as its column's
type is kept, never dropped; and the cost no longer grows with the partitions left out (the
``getdents64`` count of ``airflow-acid manifest``, when strace is there).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from fsspec.implementations.local import LocalFileSystem

from airflow_provider_acid.acid.inspection import read_view_to_dict
from airflow_provider_acid.acid.listing import list_table_files
from airflow_provider_acid.acid.partition_listing import (
    list_partitions,
    resolve_partitions,
    spec_filter,
)
from airflow_provider_acid.acid.partitions import Partition
from airflow_provider_acid.acid.read_view import UnplacedFilesError
from airflow_provider_acid.acid.resolution import resolve_files
from airflow_provider_acid.pruning.manifest import compute_manifest
from airflow_provider_acid.pruning.partition_pruning import (
    PredicateFolderFilter,
    partition_only,
    partition_types_of,
)
from airflow_provider_acid.pruning.sql_where import parse_sql_where
from airflow_provider_acid.testing.demo_table import generate_demo_table
from airflow_provider_acid.testing.many_partitions import (
    DELTA,
    tiny_acid_file,
    write_many_partitions,
)

REPO = Path(__file__).resolve().parents[2]


class CountingFileSystem(LocalFileSystem):
    """The local filesystem, counting the listings it is asked for (``ls`` and ``find``; the
    ``ls`` calls a ``find`` makes inside itself are its own)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.calls: list[tuple[str, str]] = []
        self._inside = threading.local()

    def ls(self, path, detail=False, **kwargs):
        if not getattr(self._inside, "find", False):
            self.calls.append(("ls", self._strip_protocol(path)))
        return super().ls(path, detail=detail, **kwargs)

    def find(self, path, *args, **kwargs):
        self.calls.append(("find", self._strip_protocol(path)))
        self._inside.find = True
        try:
            return super().find(path, *args, **kwargs)
        finally:
            self._inside.find = False


def counting_fs() -> CountingFileSystem:
    return CountingFileSystem(skip_instance_cache=True)


def whole_files_of(root: Path, kept: set[str]) -> list[str]:
    """The whole listing's paths, of the kept partitions and of what is in no partition."""
    out = []
    for f in list_table_files(LocalFileSystem(), str(root)):
        relative = f.path[len(str(root)) + 1 :]
        parts = relative.split("/")
        partition = "/".join(p for p in parts[:-1] if re.match(r"^[^_.][^=]*=", p))
        if not partition or partition in kept or any(partition.startswith(k + "/") for k in kept):
            out.append(f.path)
    return out


def partition_documents(snapshot) -> dict[str, dict]:
    return {p["path"]: p for p in read_view_to_dict(snapshot)["partitions"]}


def two_level_table(root: Path) -> None:
    """dt=2024-01-0D/hr=H partitions with one data file each, plus a hidden staging folder."""
    data = tiny_acid_file()
    for day in range(1, 4):
        for hour in (0, 5, 12):
            folder = root / f"dt=2024-01-0{day}" / f"hr={hour}" / DELTA
            folder.mkdir(parents=True)
            (folder / "bucket_00000").write_bytes(data)
    staging = root / "dt=2024-01-01" / ".hive-staging_1" / "x"
    staging.mkdir(parents=True)
    (staging / "junk").write_bytes(b"not data")


# -- the listing -----------------------------------------------------------------------------


def test_one_partition_lists_only_that_partition(tmp_path):
    root = tmp_path / "t"
    write_many_partitions(str(root), 30)
    fs = counting_fs()
    listing = list_partitions(fs, str(root), PredicateFolderFilter(parse_sql_where("p = 7")))

    assert [str(p) for p in listing.kept] == ["p=7"]
    assert listing.partitions_total == 30
    assert [f.path for f in listing.files] == whole_files_of(root, {"p=7"})
    # the root, then the kept partition, whose recursive listing shows it is a leaf
    assert fs.calls == [("ls", str(root)), ("find", f"{root}/p=7")]


def test_keeping_none_looks_into_the_first_folder_to_find_the_leaf_level(tmp_path):
    root = tmp_path / "t"
    write_many_partitions(str(root), 5)
    fs = counting_fs()
    listing = list_partitions(fs, str(root), PredicateFolderFilter(parse_sql_where("p = 70")))

    assert listing.kept == () and listing.whole and listing.partitions_total == 5
    assert fs.calls == [("ls", str(root)), ("ls", f"{root}/p=0"), ("find", str(root))]


def test_the_snapshot_of_the_kept_partitions_is_the_whole_listings(tmp_path):
    root = tmp_path / "demo"
    generate_demo_table(str(root), partitions=4, buckets=2, rows_per_bucket=40, insert_deltas=2)
    (root / "stray_file").write_bytes(b"x" * 10)  # no partition: always listed, as before
    keep = PredicateFolderFilter(parse_sql_where("dt IN ('2024-01-02', '2024-01-04') AND id > 3"))
    scoped = resolve_partitions(str(root), keep)
    whole = resolve_files(str(root), list_table_files(LocalFileSystem(), str(root)))

    assert scoped.scoped
    kept = partition_documents(scoped.snapshot)
    assert sorted(kept) == ["", "dt=2024-01-02", "dt=2024-01-04"]
    everything = partition_documents(whole)
    assert len(everything) == 5
    for path, document in kept.items():
        assert document == everything[path]
    assert (
        read_view_to_dict(scoped.snapshot)["unrecognised"]
        == read_view_to_dict(whole)["unrecognised"]
    )


def test_two_levels_are_listed_level_by_level_and_pruned_on_both(tmp_path):
    root = tmp_path / "t"
    two_level_table(root)
    fs = counting_fs()
    expr = parse_sql_where("dt = '2024-01-02' AND hr >= 5 AND id = 0")
    listing = list_partitions(fs, str(root), PredicateFolderFilter(expr))

    assert [str(p) for p in listing.kept] == ["dt=2024-01-02/hr=12", "dt=2024-01-02/hr=5"]
    assert listing.partitions_total == 9
    assert [f.path for f in listing.files] == whole_files_of(
        root, {"dt=2024-01-02/hr=5", "dt=2024-01-02/hr=12"}
    )
    # the first dt folder kept, recursively (it holds hr folders: no leaf); the kept hr
    # folders below it are answered from that listing
    finds = sorted(path for call, path in fs.calls if call == "find")
    assert finds == [f"{root}/dt=2024-01-02"]
    # the root; the first level whole (so hr's type is inferred from all of its values)
    assert sum(call == "ls" for call, _ in fs.calls) == 1 + 3


def test_a_value_that_is_no_value_of_its_type_is_kept():
    partitions = [Partition.from_components([f"p={v}"]) for v in ("1", "abc", "7")]
    keep = PredicateFolderFilter(parse_sql_where("p = 7"), {"p": "bigint"})
    assert keep(partitions) == [False, True, True]
    # inferred, the type is string (not every value is an integer): nothing to misread
    assert partition_types_of(partitions) == {"p": "string"}
    assert PredicateFolderFilter(parse_sql_where("p = '7'"))(partitions) == [False, False, True]


def test_an_unreadable_folder_value_still_fails_the_manifest_as_before(tmp_path):
    root = tmp_path / "t"
    write_many_partitions(str(root), 3)
    shutil.copytree(root / "p=1", root / "p=abc")
    with pytest.raises(Exception) as scoped:
        compute_manifest(str(root), "p = 2", partition_types={"p": "bigint"})
    assert "abc" in str(scoped.value)


def test_a_predicate_without_partition_terms_lists_the_table_once(tmp_path):
    root = tmp_path / "t"
    write_many_partitions(str(root), 5)
    assert partition_only(parse_sql_where("id = 1 OR p = 2"), ["p"]) == parse_sql_where("TRUE")
    fs = counting_fs()
    keep = PredicateFolderFilter(parse_sql_where("id = 1 OR p = 2"))
    listing = list_partitions(fs, str(root), keep)
    assert len(listing.kept) == 5
    assert [f.path for f in listing.files] == whole_files_of(root, {f"p={i}" for i in range(5)})


def test_not_is_pushed_down_before_data_terms_are_dropped():
    partitions = [Partition.from_components([f"p={v}"]) for v in range(4)]
    # NOT (p = 1 AND id = 5) can match p = 1 (rows with id != 5): p = 1 must stay
    keep = PredicateFolderFilter(parse_sql_where("NOT (p = 1 AND id = 5) AND p < 3"))
    assert keep(partitions) == [True, True, True, False]


def test_keeping_no_partition_falls_back_to_the_whole_listing(tmp_path):
    root = tmp_path / "t"
    write_many_partitions(str(root), 4)
    listing = list_partitions(
        LocalFileSystem(), str(root), PredicateFolderFilter(parse_sql_where("p = 99"))
    )
    assert listing.whole and listing.kept == ()
    assert [f.path for f in listing.files] == whole_files_of(root, {f"p={i}" for i in range(4)})
    manifest = compute_manifest(str(root), "p = 99")
    assert manifest.slices == () and manifest.metrics.partitions_total == 4


def test_spec_filter_keeps_partial_specs_and_unknown_columns_keep_nothing(tmp_path):
    partitions = [
        Partition.from_components(["dt=2024-01-01", "hr=1"]),
        Partition.from_components(["dt=2024-01-02", "hr=1"]),
    ]
    assert spec_filter(["dt=2024-01-02"])(partitions) == [False, True]
    assert spec_filter([{"hr": "1"}])(partitions) == [True, True]
    assert spec_filter(["region=eu"])(partitions) == [False, False]


def test_unrecognised_files_outside_partition_folders_still_refuse(tmp_path):
    root = tmp_path / "t"
    write_many_partitions(str(root), 3)
    odd = root / "misc" / "p=9"  # a partition folder below a non-partition folder
    odd.mkdir(parents=True)
    (odd / "data").write_bytes(b"x" * 20)
    with pytest.raises(UnplacedFilesError, match="misc"):
        compute_manifest(str(root), "p = 1")


# -- the manifest ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "where",
    [
        "dt = '2024-01-02'",
        "dt >= '2024-01-03' AND id < 90",
        "dt IN ('2024-01-01', '2024-01-04') OR amount > 1000000",
        "NOT (dt = '2024-01-01')",
    ],
)
def test_the_manifest_keeps_what_the_whole_listing_keeps(tmp_path, where):
    root = tmp_path / "demo"
    generate_demo_table(str(root), partitions=4, buckets=2, rows_per_bucket=40, insert_deltas=2)
    index = str(tmp_path / "index")
    compute_manifest(str(root), index_uri=index, refresh=True)  # a refresh lists it whole
    scoped = compute_manifest(str(root), where, index_uri=index)

    # the same steps over the whole listing, as compute_manifest made them before
    from airflow_provider_acid.acid.schema import table_schema
    from airflow_provider_acid.pruning.binding import bind
    from airflow_provider_acid.pruning.manifest import build_manifest, parse_predicate

    fs = LocalFileSystem()
    whole = resolve_files(str(root), list_table_files(fs, str(root)))
    schema = table_schema(whole, fs)
    names = schema.names[: len(schema.names) - 1]
    before = build_manifest(
        whole, bind(parse_predicate(where), schema), schema, index, index_columns=names
    )

    assert [s.to_dict() for s in scoped.slices] == [s.to_dict() for s in before.slices]
    assert scoped.predicate == before.predicate
    assert scoped.metrics.partitions_total == before.metrics.partitions_total == 4
    assert scoped.metrics.partitions_kept == before.metrics.partitions_kept
    if "OR amount" not in where:  # partitions were left unlisted: their files are not counted
        assert scoped.metrics.files_total < before.metrics.files_total


# -- the cost --------------------------------------------------------------------------------


def _getdents64_calls(table: Path, where: str, tmp_path: Path) -> int:
    out = tmp_path / f"strace-{table.name}.txt"
    subprocess.run(
        [
            "strace",
            "-c",
            "-f",
            "-e",
            "trace=getdents64",
            "-o",
            str(out),
            sys.executable,
            "-m",
            "airflow_provider_acid.cli",
            "manifest",
            str(table),
            "--where",
            where,
            "--json",
        ],
        check=True,
        capture_output=True,
        timeout=300,
        cwd=REPO,
    )
    for line in out.read_text().splitlines():
        fields = line.split()
        if fields and fields[-1] == "getdents64":
            return int(fields[3])
    raise AssertionError(f"no getdents64 line in {out.read_text()!r}")


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed")
def test_a_one_partition_manifest_costs_no_more_directory_reads_on_2000_partitions(tmp_path):
    small, large = tmp_path / "t20", tmp_path / "t2000"
    write_many_partitions(str(small), 20)
    write_many_partitions(str(large), 2000)
    calls_small = _getdents64_calls(small, "p = 7", tmp_path)
    calls_large = _getdents64_calls(large, "p = 7", tmp_path)
    # the figures, listing the whole table: 178 and 8,099 calls
    assert calls_large - calls_small <= 100, (calls_small, calls_large)
    # and the whole listing still costs what it did (a check that the count counts)
    whole_large = _getdents64_calls(large, "amount = 7", tmp_path)
    assert whole_large - calls_small > 2000, (calls_small, whole_large)


def test_the_cli_manifest_reports_every_partition_folder(tmp_path):
    root = tmp_path / "t"
    write_many_partitions(str(root), 12)
    result = subprocess.run(
        [sys.executable, "-m", "airflow_provider_acid.cli", "manifest", str(root)]
        + ["--where", "p = 3", "--json"],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    metrics = json.loads(result.stdout)["metrics"]
    assert metrics["partitions_total"] == 12 and metrics["partitions_kept"] == 1


# -- inspect --partition, index --partition, compact --partition ---------------------------


def _cli(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "airflow_provider_acid.cli", *argv],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )


def test_inspect_partition_shows_and_lists_only_that_partition(tmp_path):
    root = tmp_path / "t"
    write_many_partitions(str(root), 6)
    shown = _cli("inspect", str(root), "--partition", "p=4", "--json")
    assert shown.returncode == 0, shown.stderr
    assert [p["path"] for p in json.loads(shown.stdout)["partitions"]] == ["p=4"]
    missing = _cli("inspect", str(root), "--partition", "p=44")
    assert missing.returncode != 0
    assert "'p=44' matches no partition" in missing.stderr and str(root) in missing.stderr


def test_index_partition_refreshes_that_partition_and_keeps_the_others(tmp_path):
    from airflow_provider_acid.pruning.index import read

    root, index = tmp_path / "t", str(tmp_path / "index")
    write_many_partitions(str(root), 5)
    for partition in ("p=1", "p=3"):
        done = _cli("index", str(root), "--index", index, "--partition", partition, "--json")
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["added"] == 1 and json.loads(done.stdout)["removed"] == 0
    indexed = sorted(p.split("/")[-3] for p in read(index, ["id"]).column("path").to_pylist())
    assert indexed == ["p=1", "p=3"]
    whole = json.loads(_cli("index", str(root), "--index", index, "--json").stdout)
    assert (whole["added"], whole["kept"], whole["removed"]) == (3, 2, 0)


def test_compact_partition_lists_and_compacts_only_that_partition(tmp_path):
    from airflow_provider_acid.engine.compaction import compact_table

    root = tmp_path / "t"
    write_many_partitions(str(root), 8, rows=3)
    fs = counting_fs()
    result = compact_table(str(root), str(tmp_path / "out"), partitions=["p=6"], filesystem=fs)
    assert {b.slice_key for b in result.buckets} == {"p=6#0"}
    assert result.rows_written == 3
    recursive = {path for call, path in fs.calls if call == "find"}
    assert recursive == {f"{root}/p=6"}  # the plan's listing and the worker's
    # the output's partition column is typed as a whole listing types it (all values count)
    assert result.settings["partition_columns"] == [{"name": "p", "hive_type": "bigint"}]
