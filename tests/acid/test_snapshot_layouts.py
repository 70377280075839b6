"""Partitions laid out alike share one choice of folders, yet each gets its own paths, and a
base's ``_metadata_acid`` makes a layout of its own (the choice is reused per layout)."""

from __future__ import annotations

from airflow_provider_acid.acid.listing import StoredFile
from airflow_provider_acid.acid.read_view import ExclusionReason
from airflow_provider_acid.acid.resolution import resolve_files
from airflow_provider_acid.acid.writeids import ValidWriteIdList

ROOT = "/t"
FOLDERS = (
    "base_0000005",
    "base_0000010",
    "delta_0000003_0000003_0000",
    "delta_0000011_0000011_0000",
)


def _listing(metadata_in: set[str]) -> list[StoredFile]:
    files = []
    for partition in ("dt=1", "dt=2", "dt=3"):
        for folder in FOLDERS:
            files.append(StoredFile(f"{ROOT}/{partition}/{folder}/bucket_00000", 10))
            if folder == "base_0000010" and partition in metadata_in:
                files.append(StoredFile(f"{ROOT}/{partition}/{folder}/_metadata_acid", 10))
    return sorted(files, key=lambda f: f.path)


def test_alike_partitions_get_their_own_paths_and_metadata_acid_changes_the_choice():
    # write 8 open: a compacted base_10 is not valid, an insert-overwrite base_10 is
    write_ids = ValidWriteIdList.parse("db.t:20:8:8:")
    snap = resolve_files(ROOT, _listing({"dt=2"}), write_ids)
    by_path = {p.partition.path: p for p in snap.partitions}
    assert sorted(by_path) == ["dt=1", "dt=2", "dt=3"]
    for name in ("dt=1", "dt=3"):
        part = by_path[name]
        assert part.base is not None and part.base.name == "base_0000010"
        assert part.base_path == f"{ROOT}/{name}/base_0000010"
        assert [(e.path, e.reason) for e in part.excluded] == [
            (f"{ROOT}/{name}/base_0000005", ExclusionReason.OBSOLETE),
            (f"{ROOT}/{name}/delta_0000003_0000003_0000", ExclusionReason.OBSOLETE),
        ]
        assert [d.path for d in part.deltas] == [f"{ROOT}/{name}/delta_0000011_0000011_0000"]
        files = [f.path for s in part.slices for f in s.files]
        assert files == [
            f"{ROOT}/{name}/base_0000010/bucket_00000",
            f"{ROOT}/{name}/delta_0000011_0000011_0000/bucket_00000",
        ]
    part = by_path["dt=2"]
    assert part.base is not None and part.base.name == "base_0000005"
    assert [(e.path, e.reason) for e in part.excluded] == [
        (f"{ROOT}/dt=2/base_0000010", ExclusionReason.INVALID_BASE),
        (f"{ROOT}/dt=2/delta_0000003_0000003_0000", ExclusionReason.OBSOLETE),
    ]
    assert [d.path for d in part.deltas] == [
        f"{ROOT}/dt=2/delta_0000011_0000011_0000",
    ]
