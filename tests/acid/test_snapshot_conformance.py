"""Snapshot resolution against Hive 3's answers (AcidUtils.getAcidState), case by case."""

import pytest

from airflow_provider_acid.acid.listing import StoredFile
from airflow_provider_acid.acid.read_view import (
    AcidLayoutError,
    ExclusionReason,
    FileRole,
    NotEnoughHistoryError,
)
from airflow_provider_acid.acid.resolution import resolve_files
from airflow_provider_acid.acid.writeids import RangeValidity, ValidTxnList, ValidWriteIdList

T = "default.t"


def resolve(paths, write_ids=None, txns=None, **kwargs):
    files = [StoredFile(f"/t/{p}", 100) for p in paths]
    return resolve_files(
        "/t",
        files,
        ValidWriteIdList.parse(write_ids) if write_ids else None,
        ValidTxnList.parse(txns) if txns else None,
        **kwargs,
    )


def chosen(snapshot, partition=0):
    part = snapshot.partitions[partition]
    names = [d.folder.name for d in part.deltas]
    return ([part.base.name] if part.base else []) + names


def excluded(snapshot):
    return {e.path.rsplit("/", 1)[-1]: e.reason for e in snapshot.excluded}


def bucket(folder, n=0):
    return f"{folder}/bucket_{n:05d}"


def test_base_with_open_and_aborted_writes_above_it():
    snap = resolve(
        [
            bucket("base_0000005"),
            bucket("delta_0000006_0000006_0000"),
            bucket("delta_0000007_0000007_0000"),
            bucket("delta_0000008_0000008_0000"),
        ],
        f"{T}:8:7:7:6",
    )
    assert chosen(snap) == ["base_0000005", "delta_0000008_0000008_0000"]
    assert excluded(snap) == {
        "delta_0000006_0000006_0000": ExclusionReason.ABORTED,
        "delta_0000007_0000007_0000": ExclusionReason.NOT_VISIBLE,
    }


def test_two_bases_the_older_is_obsolete_with_the_deltas_it_covers():
    snap = resolve(
        [
            bucket("base_0000005"),
            bucket("base_0000010"),
            bucket("delta_0000006_0000006_0000"),
            bucket("delete_delta_0000009_0000009_0000"),
            bucket("delta_0000011_0000011_0000"),
        ]
    )
    assert chosen(snap) == ["base_0000010", "delta_0000011_0000011_0000"]
    reasons = excluded(snap)
    assert set(reasons.values()) == {ExclusionReason.OBSOLETE}
    assert set(reasons) == {
        "base_0000005",
        "delta_0000006_0000006_0000",
        "delete_delta_0000009_0000009_0000",
    }
    obsolete = {e.path.rsplit("/", 1)[-1]: e.detail for e in snap.excluded}
    assert "base_0000010" in obsolete["base_0000005"]


def test_insert_overwrite_base_above_the_high_watermark_is_not_used():
    snap = resolve(
        [bucket("base_0000005"), bucket("delta_0000006_0000006_0000"), bucket("base_0000012")],
        f"{T}:10:9223372036854775807::",
    )
    assert chosen(snap) == ["base_0000005", "delta_0000006_0000006_0000"]
    assert excluded(snap) == {"base_0000012": ExclusionReason.INVALID_BASE}


def test_insert_overwrite_base_with_an_open_write_below_it_is_still_used():
    # An IOW base holds its whole history, so only its own write must be committed.
    snap = resolve([bucket("base_0000008"), bucket("delta_0000009_0000009_0000")], f"{T}:9:6:6:")
    assert chosen(snap) == ["base_0000008", "delta_0000009_0000009_0000"]


def test_compacted_base_with_an_open_write_below_it_is_not_used():
    snap = resolve(
        [
            bucket("base_0000002"),
            bucket("base_0000008_v0000050"),
            bucket("delta_0000003_0000003_0000"),
        ],
        f"{T}:9:6:6:",
    )
    assert chosen(snap) == ["base_0000002", "delta_0000003_0000003_0000"]
    assert excluded(snap)["base_0000008_v0000050"] is ExclusionReason.INVALID_BASE


def test_metadata_acid_marks_a_compacted_base():
    paths = [bucket("base_0000008"), "base_0000008/_metadata_acid"]
    with pytest.raises(NotEnoughHistoryError, match=r"\(9,6\).*base_0000008"):
        resolve(paths, f"{T}:9:6:6:")
    # Without the marker it is an insert-overwrite base and stays valid.
    assert chosen(resolve(paths[:1], f"{T}:9:6:6:")) == ["base_0000008"]


def test_bases_present_but_none_valid_is_hives_not_enough_history_error():
    with pytest.raises(NotEnoughHistoryError, match="Not enough history available for"):
        resolve([bucket("base_0000010_v0000020")], f"{T}:12:4:4:")


def test_minor_compacted_delta_makes_the_deltas_it_covers_obsolete():
    snap = resolve(
        [
            bucket("delta_0000001_0000001_0000"),
            bucket("delta_0000002_0000002_0000"),
            bucket("delete_delta_0000002_0000002_0000"),
            bucket("delta_0000001_0000002_v0000010"),
            bucket("delete_delta_0000001_0000002_v0000010"),
            bucket("delta_0000003_0000003_0000"),
        ]
    )
    assert chosen(snap) == [
        "delete_delta_0000001_0000002_v0000010",
        "delta_0000001_0000002_v0000010",
        "delta_0000003_0000003_0000",
    ]
    assert set(excluded(snap)) == {
        "delta_0000001_0000001_0000",
        "delta_0000002_0000002_0000",
        "delete_delta_0000002_0000002_0000",
    }


def test_a_delete_delta_pairs_with_its_delta():
    snap = resolve(
        [
            bucket("delta_0000001_0000001_0000"),
            bucket("delta_0000003_0000003_0000"),
            bucket("delete_delta_0000003_0000003_0000"),
        ]
    )
    assert chosen(snap) == [
        "delta_0000001_0000001_0000",
        "delete_delta_0000003_0000003_0000",
        "delta_0000003_0000003_0000",
    ]
    (slice_,) = snap.slices
    assert [f.file.name for f in slice_.delete_delta_files] == ["bucket_00000"]
    assert slice_.delete_delta_files[0].role is FileRole.DELETE_DELTA


def test_several_statements_of_one_write_are_all_kept():
    snap = resolve(
        [
            bucket("delta_0000004_0000004_0000"),
            bucket("delta_0000004_0000004_0001"),
            bucket("delete_delta_0000004_0000004_0001"),
            bucket("delta_0000004_0000004_0002"),
        ]
    )
    assert chosen(snap) == [
        "delta_0000004_0000004_0000",
        "delete_delta_0000004_0000004_0001",
        "delta_0000004_0000004_0001",
        "delta_0000004_0000004_0002",
    ]
    assert excluded(snap) == {}


def test_an_aborted_range_is_dropped():
    snap = resolve(
        [bucket("delta_0000001_0000001_0000"), bucket("delta_0000002_0000003")],
        f"{T}:3:9223372036854775807::2,3",
    )
    assert chosen(snap) == ["delta_0000001_0000001_0000"]
    assert excluded(snap) == {"delta_0000002_0000003": ExclusionReason.ABORTED}


def test_a_v_base_whose_transaction_is_not_yet_visible():
    paths = [
        bucket("base_0000005"),
        bucket("base_0000010_v0000020"),
        bucket("delta_0000011_0000011_0000"),
    ]
    snap = resolve(paths, f"{T}:11:9223372036854775807::", "15:9223372036854775807::")
    assert chosen(snap) == ["base_0000005", "delta_0000011_0000011_0000"]
    assert excluded(snap)["base_0000010_v0000020"] is ExclusionReason.NOT_VISIBLE
    # Once the compactor's transaction is visible, the compacted base wins.
    later = resolve(paths, f"{T}:11:9223372036854775807::", "25:9223372036854775807::")
    assert chosen(later) == ["base_0000010_v0000020", "delta_0000011_0000011_0000"]
    # An aborted compactor transaction: its folder is garbage.
    aborted = resolve(paths, f"{T}:11:9223372036854775807::", "25:9223372036854775807::20")
    assert excluded(aborted)["base_0000010_v0000020"] is ExclusionReason.ABORTED


def test_original_files_without_a_base_come_in_hives_order():
    snap = resolve(
        [
            "000002_0_copy_2",
            "000000_0",
            "000002_0",
            "000002_0_copy_1",
            "000001_0",
            bucket("delete_delta_10000001_10000001_0000"),
        ]
    )
    assert chosen(snap) == ["delete_delta_10000001_10000001_0000"]
    by_bucket = {s.bucket_id: [f.file.name for f in s.original_files] for s in snap.slices}
    assert by_bucket == {
        0: ["000000_0"],
        1: ["000001_0"],
        2: ["000002_0", "000002_0_copy_1", "000002_0_copy_2"],
    }
    assert [f.file.name for f in snap.slices[0].delete_delta_files] == ["bucket_00000"]


def test_original_files_are_obsolete_under_a_base():
    snap = resolve(["000000_0", "000001_0", bucket("base_0000003_v0000009")])
    assert chosen(snap) == ["base_0000003_v0000009"]
    assert excluded(snap) == {
        "000000_0": ExclusionReason.OBSOLETE,
        "000001_0": ExclusionReason.OBSOLETE,
    }
    assert [s.original_files for s in snap.slices] == [()]


def test_a_partly_valid_streaming_range_is_flagged():
    snap = resolve([bucket("delta_0000001_0000010")], f"{T}:10:9223372036854775807::3,7")
    (delta,) = snap.partitions[0].deltas
    assert delta.validity is RangeValidity.SOME
    assert delta.invalid_write_ids == (3, 7)
    (data_file,) = snap.slices[0].delta_files
    assert data_file.invalid_write_ids == (3, 7)


def test_partly_valid_delete_delta_is_flagged_too():
    snap = resolve(
        [bucket("delta_0000001_0000001_0000"), bucket("delete_delta_0000002_0000004")],
        f"{T}:4:3:3:",
    )
    assert snap.slices[0].delete_delta_files[0].invalid_write_ids == (3,)


def test_insert_only_table_resolves_plain_files():
    snap = resolve(
        [
            "delta_0000001_0000001_0000/000000_0",
            "delta_0000001_0000001_0000/000001_0",
            "delta_0000002_0000002_0000/000000_0",
            "base_0000003/000000_0",
            "delta_0000004_0000004_0000/000000_0",
            "delete_delta_0000005_0000005_0000/bucket_00000",
        ],
        insert_only=True,
    )
    assert chosen(snap) == ["base_0000003", "delta_0000004_0000004_0000"]
    assert snap.insert_only
    assert [u.path for u in snap.unrecognised] == [
        "/t/delete_delta_0000005_0000005_0000/bucket_00000"
    ]
    assert {s.bucket_id for s in snap.slices} == {0}


def test_partitioned_table_with_escaped_values_and_the_default_partition():
    snap = resolve(
        [
            bucket("dt=2024-01-01/ts=10%3A00/delta_0000001_0000001_0000"),
            bucket("dt=2024-01-01/ts=__HIVE_DEFAULT_PARTITION__/delta_0000001_0000001_0000"),
            bucket("dt=2024-01-02/ts=a%2Fb/delta_0000002_0000002_0000", 3),
        ]
    )
    assert [p.partition.values for p in snap.partitions] == [
        (("dt", "2024-01-01"), ("ts", "10:00")),
        (("dt", "2024-01-01"), ("ts", None)),
        (("dt", "2024-01-02"), ("ts", "a/b")),
    ]
    assert [s.key for s in snap.slices] == [
        "dt=2024-01-01/ts=10%3A00#0",
        "dt=2024-01-01/ts=__HIVE_DEFAULT_PARTITION__#0",
        "dt=2024-01-02/ts=a%2Fb#3",
    ]
    assert snap.partition_keys() == ("dt", "ts")


def test_delete_deltas_match_data_by_bucket_id_not_file_name():
    snap = resolve(
        [
            bucket("delta_0000001_0000001_0000", 1),
            bucket("delta_0000001_0000001_0000", 2),
            "delete_delta_0000002_0000002_0000/bucket_00001_1",
        ]
    )
    by_bucket = {s.bucket_id: len(s.delete_delta_files) for s in snap.slices}
    assert by_bucket == {1: 1, 2: 0}


def test_side_hidden_and_empty_files_are_never_data_and_strays_are_reported():
    """Hidden, side and empty files are never data (Hive's ``AcidUtils.hiddenFileFilter`` and
    ``ignoreEmptyFiles``); any other file outside base/delta folders is an original file,
    whatever its name (``AcidUtils.getChildState``), so ``notes.txt`` is read (and fails the
    read, naming it, if it is not ORC) rather than reported; a file nested in a delta is not
    placeable and is reported."""
    files = [
        StoredFile("/t/delta_0000001_0000001_0000/bucket_00000", 10),
        StoredFile("/t/delta_0000001_0000001_0000/_orc_acid_version", 1),
        StoredFile("/t/delta_0000001_0000001_0000/bucket_00000_flush_length", 8),
        StoredFile("/t/delta_0000001_0000001_0000/bucket_00001", 0),
        StoredFile("/t/.hive-staging_123/-ext-10000/000000_0", 10),
        StoredFile("/t/_SUCCESS", 0),
        StoredFile("/t/notes.txt", 10),
        StoredFile("/t/delta_0000001_0000001_0000/sub/bucket_00000", 10),
    ]
    snap = resolve_files("/t", files)
    assert [(f.path, f.role) for f in snap.files] == [
        ("/t/notes.txt", FileRole.ORIGINAL),
        ("/t/delta_0000001_0000001_0000/bucket_00000", FileRole.DELTA),
    ]
    assert snap.files[1].acid_version_marked
    assert [u.path for u in snap.unrecognised] == [
        "/t/delta_0000001_0000001_0000/sub/bucket_00000",
    ]


def test_partly_overlapping_ranges_are_an_error_not_duplicated_rows():
    with pytest.raises(
        AcidLayoutError, match="delta_0000003_0000008.*overlaps delta_0000001_0000005"
    ):
        resolve([bucket("delta_0000001_0000005"), bucket("delta_0000003_0000008")])


def test_two_compactions_of_one_range_are_read_once():
    snap = resolve(
        [
            bucket("delta_0000001_0000002_v0000005"),
            bucket("delta_0000001_0000002_v0000007"),
            bucket("delete_delta_0000001_0000002_v0000005"),
            bucket("delete_delta_0000001_0000002_v0000007"),
        ]
    )
    assert chosen(snap) == [
        "delete_delta_0000001_0000002_v0000005",
        "delta_0000001_0000002_v0000005",
    ]
    details = {e.path.rsplit("/", 1)[-1]: e.detail for e in snap.excluded}
    assert (
        details["delta_0000001_0000002_v0000007"] == "duplicate of delta_0000001_0000002_v0000005"
    )


def test_a_range_reaching_past_the_high_watermark_flags_the_writes_above_it():
    snap = resolve([bucket("delta_0000001_0000003")], f"{T}:2:9223372036854775807::")
    assert snap.partitions[0].deltas[0].invalid_write_ids == (3,)
