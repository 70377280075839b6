"""Files at a partition root, and nothing silently left out.

Hive's rule (``AcidUtils.getChildState``): every non-hidden file directly in a partition folder
is an *original file*, whatever its name, and (``AcidUtils.findOriginals``) so is every file
below a folder that is neither a base nor a delta. How such a file is read is decided by its
schema: Impala's ``HdfsOrcScanner::Open`` reads a file with the full-ACID schema as ACID events
(``acid_original_file_ = is_table_full_acid && !is_file_full_acid``), a plain one as an
original with synthetic row ids. Files that still cannot be placed (Hive never writes their
layout) fail ``compact`` and ``manifest`` naming them, unless the caller leaves them out with
``--ignore-unrecognised`` / ``ignore_unrecognised=True``; what was left out is recorded.

Every table here is laid out from the real Hive-written ORC files of the fixtures' README
(copied into a temporary folder).
"""

from __future__ import annotations

import collections
import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pytest
from hive_fixtures import FIXTURES

from airflow_provider_acid.acid.listing_groups import bucket_id_of
from airflow_provider_acid.acid.read_view import FileRole, UnplacedFilesError
from airflow_provider_acid.acid.resolution import IGNORED_PREFIX, check_placed, resolve_read_view
from airflow_provider_acid.cli import main
from airflow_provider_acid.engine.compaction import compact_table
from airflow_provider_acid.engine.options import CompactionOptions
from airflow_provider_acid.engine.plan import plan_snapshot
from airflow_provider_acid.pruning.manifest import compute_manifest

NATION_FILE = FIXTURES / "trino/nationFile25kRowsSortedOnNationKey/bucket_00000"
NATION_DELETES = FIXTURES / "trino/nation_delete_deltas"
NATION_ORIGINALS = FIXTURES / "trino/fullacidNationTableWithOriginalFiles"
DUMMY = FIXTURES / "trino/dummy_id_data_orc"
HCUBE_DELTA = FIXTURES / "hive3/test_hcube_2.db/tbl/delta_0000001_0000001_0000"


def copy(source: Path, destination: Path) -> None:
    destination.parent.mkdir(parents=True, exist_ok=True)
    if source.is_dir():
        shutil.copytree(source, destination, dirs_exist_ok=True)
    else:
        shutil.copyfile(source, destination)
    for path in [destination, *destination.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)


def nation_at_root(table: Path) -> Path:
    """The Trino nation file as a bare ``bucket_00000`` in the partition folder, next to the
    two delete deltas: the README says it is stored as a bare file."""
    copy(NATION_FILE, table / "bucket_00000")
    copy(NATION_DELETES, table)
    return table


def read_rows(result) -> pa.Table:
    return ds.dataset(result.file_paths(), format="parquet").to_table()


def nation_key_counts(rows: pa.Table) -> collections.Counter:
    return collections.Counter(rows.column("n_nationkey").to_pylist())


def assert_nation_snapshot(rows: pa.Table) -> None:
    """The README's expected snapshot: 23,000 rows, keys 5 and 19 absent, others 1,000 times."""
    counts = nation_key_counts(rows)
    assert rows.num_rows == 23_000
    assert counts == {k: 1_000 for k in range(25) if k not in (5, 19)}


# -- placing files as Hive does -----------------------------------------------------------


def test_a_full_acid_bucket_file_at_the_partition_root_is_read_as_acid_events(tmp_path):
    """Conformance: Hive ``AcidUtils.getChildState`` takes any non-directory child of a
    partition folder as an original file (``directory.getOriginalFiles().add(...)``), and
    Impala ``HdfsOrcScanner::Open`` reads one with the full-ACID v2 schema as ACID events
    (``acid_original_file_ = is_table_full_acid && !is_file_full_acid``). So ``bucket_00000``
    at the root is data of bucket 0 (``AcidUtils.parseBucketId``), its rows keep their own
    identities, and the delete deltas delete from them.

    Before: listed as unrecognised, and ``compact`` committed an empty snapshot, exit 0."""
    table = nation_at_root(tmp_path / "nation")
    snap = resolve_read_view(str(table))
    assert snap.unrecognised == ()
    (slice_,) = snap.slices
    assert slice_.bucket_id == 0
    assert [(f.file.name, f.role) for f in slice_.original_files] == [
        ("bucket_00000", FileRole.ORIGINAL)
    ]
    assert len(slice_.delete_delta_files) == 2

    result = compact_table(str(table), str(tmp_path / "out"))
    assert_nation_snapshot(read_rows(result))
    assert result.totals()["rows_deleted"] == 2_000


def test_a_partitioned_table_with_the_acid_file_at_a_partition_root(tmp_path, capsys):
    """Conformance (as above, per partition: ``getAcidState`` runs per partition folder), and
    the CLI's ``compact`` commits the rows instead of an empty snapshot."""
    table = tmp_path / "t"
    nation_at_root(table / "p=1")
    copy(NATION_ORIGINALS / "000000_0", table / "p=2" / "000000_0")
    out = tmp_path / "out"
    assert main(["compact", str(table), "--out", str(out), "--json", "--quiet"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["manifest"]["totals"]["rows_written"] == 23_000 + 25
    by_slice = {s["slice_key"]: s["rows_written"] for s in summary["manifest"]["slices"]}
    assert by_slice == {"p=1#0": 23_000, "p=2#0": 25}


def test_names_outside_the_original_pattern_are_original_files_of_bucket_0(tmp_path):
    """Conformance: Hive ``AcidUtils.getChildState`` places a file by being a file, not by its
    name; ``AcidUtils.parseBucketId`` gives N for ``N_M``, ``N_M_copy_K`` and ``bucket_N``,
    and -1 for any other name, which no row id can carry (``BucketCodec.V1`` refuses it):
    here such files count as bucket 0, an unbucketed table's one bucket."""
    table = tmp_path / "t"
    copy(DUMMY / "000001_0", table / "000001_0")
    copy(DUMMY / "000000_0", table / "part-00000-1b2c.orc")
    copy(DUMMY / "000002_0", table / "data.orc")
    assert [bucket_id_of(n) for n in ("000001_0", "bucket_00003_1", "part-00000-1b2c.orc")] == [
        1,
        3,
        0,
    ]
    snap = resolve_read_view(str(table))
    assert snap.unrecognised == ()
    assert {s.bucket_id: [f.file.name for f in s.original_files] for s in snap.slices} == {
        0: ["data.orc", "part-00000-1b2c.orc"],
        1: ["000001_0"],
    }
    result = compact_table(str(table), str(tmp_path / "out"))
    ids = sorted(read_rows(result).column("id").to_pylist())
    assert ids == [0, 1, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]


def test_files_below_a_plain_subfolder_are_original_files_with_their_row_ids(tmp_path):
    """Conformance: Hive ``AcidUtils.findOriginals`` recurses into a partition's folders that
    are neither base nor delta (``HIVE_UNION_SUBDIR_1`` of a union insert) and takes their
    files as original files; Impala's ``AcidUtils.filterFilesForAcidState`` keeps every file
    not in a base or delta ("probably a post-upgrade file"). Their synthetic row ids count
    as at the root: the README's delete of (0, bucket 0, rowId 24) removes nation key 24."""
    table = tmp_path / "t"
    copy(NATION_ORIGINALS / "000000_0", table / "HIVE_UNION_SUBDIR_1" / "000000_0")
    deletes = "delete_delta_10000001_10000001_0000"
    copy(NATION_ORIGINALS / deletes, table / deletes)
    snap = resolve_read_view(str(table))
    assert snap.unrecognised == ()
    (slice_,) = snap.slices
    assert [f.path.split("/t/", 1)[1] for f in slice_.original_files] == [
        "HIVE_UNION_SUBDIR_1/000000_0"
    ]
    rows = read_rows(compact_table(str(table), str(tmp_path / "out")))
    assert rows.num_rows == 24
    assert 24 not in rows.column("n_nationkey").to_pylist()


# -- refusing what cannot be placed -------------------------------------------------------


def table_with_a_stray(tmp_path: Path) -> tuple[Path, str]:
    """The nation table (delta + delete deltas), and a real Hive delta folder below a folder
    that is neither a partition nor a base/delta (a repl-dump ``data/`` folder copied in):
    Hive never writes that layout, and reading it as original files would lose its write id."""
    table = tmp_path / "nation"
    copy(NATION_FILE, table / "delta_0000002_0000002_0000" / "bucket_00000")
    copy(NATION_DELETES, table)
    copy(HCUBE_DELTA, table / "data" / "delta_0000001_0000001_0000")
    return table, "data/delta_0000001_0000001_0000/bucket_00000"


def test_an_unplaceable_file_fails_compact_naming_it_and_commits_nothing(tmp_path):
    table, stray = table_with_a_stray(tmp_path)
    snap = resolve_read_view(str(table))
    assert [u.path.split("/nation/", 1)[1] for u in snap.unrecognised] == [stray]
    with pytest.raises(UnplacedFilesError, match=stray) as raised:
        check_placed(snap)
    assert [e.path for e in raised.value.entries] == [u.path for u in snap.unrecognised]
    out = tmp_path / "out"
    with pytest.raises(UnplacedFilesError, match=f"{stray}.*--ignore-unrecognised"):
        compact_table(str(table), str(out))
    with pytest.raises(UnplacedFilesError, match=stray):
        plan_snapshot(str(table), str(out))
    assert not out.exists() or not list(out.rglob("manifest.json"))


def test_the_explicit_option_leaves_it_out_and_records_it(tmp_path):
    table, stray = table_with_a_stray(tmp_path)
    result = compact_table(str(table), str(tmp_path / "out"), ignore_unrecognised=True)
    assert_nation_snapshot(read_rows(result))
    (left_out,) = [w for w in result.warnings if w.startswith(IGNORED_PREFIX)]
    assert stray in left_out and "write ids" in left_out
    manifest = json.loads(Path(result.manifest_path).read_text())
    assert left_out in manifest["source"]["warnings"]
    # the same choice through the options (what the Airflow operators pass)
    again = compact_table(
        str(table),
        str(tmp_path / "out2"),
        options=CompactionOptions(ignore_unrecognised=True),
    )
    assert again.snapshot_id == result.snapshot_id and left_out in again.warnings


def test_leaving_files_out_is_part_of_the_snapshot_id(tmp_path):
    """A snapshot that left a file out is not the same snapshot as one that had none to leave
    out: once the stray is gone, planning again gives a new id (and no stale warning)."""
    table, _ = table_with_a_stray(tmp_path)
    out = tmp_path / "out"
    with_stray = compact_table(str(table), str(out), ignore_unrecognised=True)
    shutil.rmtree(table / "data")
    without = compact_table(str(table), str(out))
    assert without.snapshot_id != with_stray.snapshot_id
    assert not [w for w in without.warnings if w.startswith(IGNORED_PREFIX)]


def test_cli_compact_fails_naming_the_file_and_succeeds_with_the_option(tmp_path, capsys):
    table, stray = table_with_a_stray(tmp_path)
    out = tmp_path / "out"
    assert main(["compact", str(table), "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "airflow-acid compact: error:" in err and stray in err
    assert "--ignore-unrecognised" in err
    assert not out.exists() or not list(out.rglob("manifest.json"))

    args = ["compact", str(table), "--out", str(out), "--quiet", "--json"]
    assert main([*args, "--ignore-unrecognised"]) == 0
    captured = capsys.readouterr()
    summary = json.loads(captured.out)
    assert summary["manifest"]["totals"]["rows_written"] == 23_000
    assert any(stray in w for w in summary["manifest"]["source"]["warnings"])
    assert f"warning: {IGNORED_PREFIX}{stray}" in captured.err


def test_manifest_fails_naming_the_file_and_succeeds_with_the_option(tmp_path, capsys):
    table, stray = table_with_a_stray(tmp_path)
    with pytest.raises(UnplacedFilesError, match=stray):
        compute_manifest(str(table), "n_nationkey = 5")
    manifest = compute_manifest(str(table), "n_nationkey = 5", ignore_unrecognised=True)
    assert manifest.slice_keys == ["#0"]
    assert any(w.startswith(IGNORED_PREFIX) and stray in w for w in manifest.warnings)

    args = ["manifest", str(table), "--where", "n_nationkey = 5", "--json"]
    assert main(args) == 2
    assert stray in capsys.readouterr().err
    out = tmp_path / "m.json"
    assert main([*args, "--ignore-unrecognised", "--out", str(out)]) == 0
    capsys.readouterr()
    written = json.loads(out.read_text())
    assert any(stray in w for w in written["warnings"])


def test_inspect_keeps_reporting_unplaceable_files(tmp_path, capsys):
    table, stray = table_with_a_stray(tmp_path)
    assert main(["inspect", str(table), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [u["path"] for u in data["unrecognised"]] == [stray]
    assert main(["inspect", str(table)]) == 0
    assert f"unrecognised {stray}" in capsys.readouterr().out


def test_a_file_nested_inside_a_delta_cannot_be_placed(tmp_path):
    """A base or delta folder holds its bucket files directly; a file in a folder below one is
    no part of any slice, and refuses the plan rather than being dropped."""
    table = tmp_path / "t"
    copy(NATION_FILE, table / "delta_0000002_0000002_0000" / "bucket_00000")
    copy(NATION_FILE, table / "delta_0000002_0000002_0000" / "sub" / "bucket_00000")
    with pytest.raises(UnplacedFilesError, match="delta_0000002_0000002_0000/sub/bucket_00000"):
        compact_table(str(table), str(tmp_path / "out"))


def test_rows_of_an_acid_file_at_the_root_follow_the_write_id_list(tmp_path):
    """Impala IMPALA-9512 (Milestone 2: validate each row against the valid write id list):
    an ACID file outside a delta carries its writes in its rows only (currentTransaction 2
    here); a reader for which write 2 is aborted must not see them."""
    table = nation_at_root(tmp_path / "nation")
    result = compact_table(
        str(table),
        str(tmp_path / "out"),
        write_ids="default.nation:4:9223372036854775807::2",
    )
    assert result.rows_written == 0


# -- the Airflow operators ----------------------------------------------------------------


def test_the_operators_refuse_unless_told_and_record_what_was_left_out(tmp_path):
    pytest.importorskip("airflow")
    from airflow_provider_acid.operators.acid import (
        AcidCompactOperator,
        AcidSliceManifestOperator,
    )

    table, stray = table_with_a_stray(tmp_path)
    out = str(tmp_path / "out")
    manifest_task = AcidSliceManifestOperator(
        task_id="manifest", table_uri=str(table), output_uri=out, where="n_nationkey = 5"
    )
    with pytest.raises(UnplacedFilesError, match=stray):
        manifest_task.execute({})
    manifest_task = AcidSliceManifestOperator(
        task_id="manifest",
        table_uri=str(table),
        output_uri=out,
        where="n_nationkey = 5",
        ignore_unrecognised=True,
    )
    summary = manifest_task.execute({})
    assert any(stray in w for w in summary["warnings"])

    compact_task = AcidCompactOperator(task_id="compact", table_uri=str(table), output_uri=out)
    with pytest.raises(UnplacedFilesError, match=stray):
        compact_task.execute({})
    for source in ({"table_uri": str(table)}, {"manifest_uri": summary["manifest_uri"]}):
        compact_task = AcidCompactOperator(
            task_id="compact", output_uri=out, ignore_unrecognised=True, **source
        )
        done = compact_task.execute({})
        assert any(stray in w for w in done["warnings"]), done
