"""Every real Hive fixture table resolves to the files its README describes."""

import json
import shutil

import fsspec
import pytest

from airflow_provider_acid.acid.inspection import read_view_to_dict
from airflow_provider_acid.acid.read_view import FileRole
from airflow_provider_acid.acid.resolution import resolve_read_view
from airflow_provider_acid.cli import main


def names(files):
    return [f.path.split("/tables/", 1)[1].split("/", 1)[1] for f in files]


def test_nation_is_one_delta_and_two_delete_deltas(hive_table):
    snap = resolve_read_view(str(hive_table("nation")))
    (slice_,) = snap.slices
    assert slice_.bucket_id == 0
    assert names(slice_.delta_files) == ["delta_0000002_0000002_0000/bucket_00000"]
    assert names(slice_.delete_delta_files) == [
        "delete_delta_0000003_0000003_0000/bucket_00000",
        "delete_delta_0000004_0000004_0000/bucket_00000",
    ]
    assert snap.excluded == () and snap.unrecognised == ()
    # A reader whose list stops at write 3 sees only the first delete delta.
    older = resolve_read_view(str(hive_table("nation")), "default.nation:3:9223372036854775807::")
    assert len(older.slices[0].delete_delta_files) == 1


def test_nation_with_original_file(hive_table):
    (slice_,) = resolve_read_view(str(hive_table("nation_originals"))).slices
    assert names(slice_.original_files) == ["000000_0"]
    assert slice_.original_files[0].role is FileRole.ORIGINAL
    assert names(slice_.delete_delta_files) == ["delete_delta_10000001_10000001_0000/bucket_00000"]


def test_dummy_id_data_originals_and_copies_per_bucket(hive_table):
    snap = resolve_read_view(str(hive_table("dummy_id_data")))
    assert {s.bucket_id: names(s.original_files) for s in snap.slices} == {
        0: ["000000_0"],
        1: ["000001_0"],
        2: ["000002_0", "000002_0_copy_1", "000002_0_copy_2"],
    }
    assert [len(s.delete_delta_files) for s in snap.slices] == [1, 0, 0]


def test_delete_deltas_only_minor_compacted_name_wins(hive_table):
    snap = resolve_read_view(str(hive_table("delete_deltas_only")))
    (slice_,) = snap.slices
    assert names(slice_.delete_delta_files) == [
        "delete_delta_0000004_0000004/bucket_00000",
        "delete_delta_0000007_0000007_0000/bucket_00000",
    ]
    assert [e.path.rsplit("/", 1)[-1] for e in snap.excluded] == [
        "delete_delta_0000004_0000004_0000"
    ]


@pytest.mark.parametrize(
    ("table", "deltas"),
    [("hcube_tbl", 1), ("hcube_tbl1", 3), ("hcube_tbl2", 2), ("hcube_tbl5", 1)],
)
def test_hcube_tables(hive_table, table, deltas):
    snap = resolve_read_view(str(hive_table(table)), "test_hcube_2.t:3:9223372036854775807::")
    assert len(snap.slices[0].delta_files) == deltas
    assert all(f.acid_version_marked for f in snap.files)


def test_hcube_partitioned_table(hive_table):
    snap = resolve_read_view(str(hive_table("hcube_tbl6_partitioned")))
    assert [p.partition.as_dict() for p in snap.partitions] == [{"fld1": "1"}, {"fld1": "2"}]
    assert [s.key for s in snap.slices] == ["fld1=1#0", "fld1=2#0"]


def test_load_data_raw_files_sit_in_their_delta(hive_table):
    snap = resolve_read_view(str(hive_table("load_data")))
    (slice_,) = snap.slices
    assert len(slice_.delta_files) == 2 and snap.unrecognised == ()


def test_the_repl_dump_layout_is_reported_not_dropped(tmp_path):
    from hive_fixtures import FIXTURES

    table = tmp_path / "tbl6"
    shutil.copytree(FIXTURES / "hive3/repl_dump/hive/test_hcube_2/tbl6", table)
    snap = resolve_read_view(str(table))
    assert snap.slices == ()
    assert len(snap.unrecognised) == 2
    assert "folder 'data' is neither a partition" in snap.unrecognised[0].detail


def relative(data):
    data = dict(data)
    data.pop("table")
    return data


def test_memory_and_local_give_identical_results(hive_table):
    local = hive_table("dummy_id_data")
    memory = fsspec.filesystem("memory")
    memory.put(str(local), "/fixture/dummy_id_data", recursive=True)
    try:
        from_local = read_view_to_dict(resolve_read_view(str(local)))
        from_memory = read_view_to_dict(resolve_read_view("memory://fixture/dummy_id_data"))
    finally:
        memory.rm("/fixture", recursive=True)
    assert from_memory["totals"]["files"] == 6
    assert relative(from_local) == relative(from_memory)


def test_cli_inspect_json_and_text(hive_table, capsys):
    table = str(hive_table("nation"))
    write_ids = ["--valid-write-ids", "default.n:4:9223372036854775807::3"]
    assert main(["inspect", table, "--json", *write_ids]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["format"] == "airflow-acid/inspect" and data["version"] == 1
    (part,) = data["partitions"]
    assert [d["folder"] for d in part["deltas"]] == [
        "delta_0000002_0000002_0000",
        "delete_delta_0000004_0000004_0000",
    ]
    assert part["excluded"] == [
        {
            "path": "delete_delta_0000003_0000003_0000",
            "reason": "aborted",
            "detail": "every write in its range aborted",
        }
    ]
    assert main(["inspect", table, *write_ids]) == 0
    text = capsys.readouterr().out
    assert "skipped  delete_delta_0000003_0000003_0000  [aborted]" in text


def test_cli_errors_are_one_clear_line(tmp_path, capsys):
    assert main(["inspect", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err
    assert "does not exist" in err and str(tmp_path / "missing") in err
    assert main(["inspect", str(tmp_path), "--valid-write-ids", "t:x:1::"]) == 2
    assert "'x'" in capsys.readouterr().err


DATA_FILES = {
    "nation": 1,
    "nation_originals": 1,
    "dummy_id_data": 5,
    "delete_deltas_only": 0,
    "acid_version_hive_3": 1,
    "plain_file_as_original": 1,
    "plain_file_in_delta": 1,
    "load_data": 2,
    "hcube_tbl6_partitioned": 2,
    "hcube_tbl": 1,
    "hcube_tbl1": 3,
    "hcube_tbl2": 2,
    "hcube_tbl3": 1,
    "hcube_tbl4": 1,
    "hcube_tbl5": 1,
    "hcube_tbl6": 1,
}


@pytest.mark.parametrize("table", sorted(DATA_FILES))
def test_every_fixture_table_resolves_with_nothing_unrecognised(hive_table, table):
    from hive_fixtures import FIXTURE_TABLES

    assert set(DATA_FILES) == set(FIXTURE_TABLES)
    snap = resolve_read_view(str(hive_table(table)))
    assert snap.unrecognised == ()
    assert sum(len(s.data_files) for s in snap.slices) == DATA_FILES[table]
