"""Resolution's shortcuts give what the plain way gives.

The resolver parses each folder once (from its parent's) and each distinct file name once,
and builds slices per role and bucket. Here a reference places every file of random listings
the plain way, one path at a time, and the slices, partitions and unrecognised entries must
be exactly what it expects, given the folders the walk chose (the walk itself is checked
case by case in test_snapshot_conformance.py).
"""

import pickle
from collections import defaultdict
from dataclasses import FrozenInstanceError

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_provider_acid.acid.listing import StoredFile
from airflow_provider_acid.acid.listing_groups import bucket_id_of
from airflow_provider_acid.acid.names import (
    DeltaDir,
    is_hidden,
    is_side_file,
    parse_acid_dir,
    parse_bucket_file,
)
from airflow_provider_acid.acid.partitions import Partition, parse_partition_component
from airflow_provider_acid.acid.read_view import (
    AcidLayoutError,
    BucketSlice,
    DataFile,
    FileRole,
    NotEnoughHistoryError,
    _new_bucket_slice,
    _new_data_file,
)
from airflow_provider_acid.acid.resolution import resolve_files
from airflow_provider_acid.acid.writeids import ValidTxnList, ValidWriteIdList

ROOT = "/t"


def test_objects_made_through_their_slots_are_those_their_init_makes():
    stored = StoredFile("/t/dt=1/delta_0000002_0000004/bucket_00001", 10, "v1")
    folder = parse_acid_dir("delta_0000002_0000004")
    data_file = _new_data_file(stored, FileRole.DELTA, 1, folder, (3,), True)
    expected_file = DataFile(stored, FileRole.DELTA, 1, folder, (3,), True)
    partition = Partition.from_components(["dt=1"])
    bucket_slice = _new_bucket_slice(partition, 1, (), (), (data_file,), ())
    expected_slice = BucketSlice(partition, 1, delta_files=(expected_file,))
    for made, expected in ((data_file, expected_file), (bucket_slice, expected_slice)):
        assert made == expected and hash(made) == hash(expected)
        assert repr(made) == repr(expected)
        assert pickle.loads(pickle.dumps(made)) == expected
        with pytest.raises(FrozenInstanceError):
            made.bucket_id = 2  # type: ignore[misc]


class ReferencePlacement:
    """Each file of a listing placed on its own: its partition, its folder, data or not."""

    def __init__(self, files: list[StoredFile], insert_only: bool) -> None:
        self.partitions: set[str] = set()
        self.folders: dict[str, set[str]] = defaultdict(set)  # partition -> folder names
        self.data: dict[tuple[str, str | None], list[StoredFile]] = defaultdict(list)
        self.side_files: dict[tuple[str, str], set[str]] = defaultdict(set)
        self.unrecognised: list[str] = []
        for stored in files:
            self._place(stored, insert_only)

    def _place(self, stored: StoredFile, insert_only: bool) -> None:
        parts = stored.path.removeprefix(ROOT + "/").split("/")
        if any(is_hidden(part) and not is_side_file(part) for part in parts):
            return
        depth = 0
        while depth < len(parts) - 1 and parse_partition_component(parts[depth]) is not None:
            depth += 1
        partition, rest, name = "/".join(parts[:depth]), parts[depth:], parts[-1]
        self.partitions.add(partition)
        folder = parse_acid_dir(rest[0]) if len(rest) > 1 else None
        if folder is None:  # an original file (any name), or not a data file at all
            if is_side_file(name) or stored.size == 0:
                return
            below = rest[1:-1]  # folders below a non-ACID folder
            if any(parse_acid_dir(f) or parse_partition_component(f) for f in below):
                self.unrecognised.append(stored.path)
            else:
                self.data[(partition, None)].append(stored)
            return
        in_delete_delta = isinstance(folder, DeltaDir) and folder.is_delete
        if insert_only and in_delete_delta:
            self.unrecognised.append(stored.path)
            return
        self.folders[partition].add(folder.name)
        if len(rest) > 2:
            self.unrecognised.append(stored.path)
        elif is_side_file(name):
            self.side_files[(partition, folder.name)].add(name)
        elif stored.size == 0:
            return
        elif in_delete_delta and parse_bucket_file(name) is None:
            self.unrecognised.append(stored.path)
        else:
            self.data[(partition, folder.name)].append(stored)

    def slices(self, partition, chosen, originals: bool) -> list[tuple]:
        """(bucket, originals, base, deltas, delete deltas) of one partition's chosen folders:
        ``chosen`` is (role, folder, invalid write ids) in the walk's order."""
        by_bucket: dict[int, dict[FileRole, list[DataFile]]] = defaultdict(
            lambda: defaultdict(list)
        )
        if originals:
            for stored in sorted(self.data[(partition, None)], key=lambda f: f.path):
                bucket = bucket_id_of(stored.name)
                by_bucket[bucket][FileRole.ORIGINAL].append(
                    DataFile(stored, FileRole.ORIGINAL, bucket)
                )
        for role, folder, invalid in chosen:
            marked = "_orc_acid_version" in self.side_files[(partition, folder.name)]
            for stored in sorted(self.data[(partition, folder.name)], key=lambda f: f.path):
                bucket = bucket_id_of(stored.name)
                data_file = DataFile(stored, role, bucket, folder, invalid, marked)
                by_bucket[bucket][role].append(data_file)
        roles = (FileRole.ORIGINAL, FileRole.BASE, FileRole.DELTA, FileRole.DELETE_DELTA)
        return [
            (bucket, *(tuple(by_bucket[bucket][role]) for role in roles))
            for bucket in sorted(by_bucket)
        ]


partitions = st.sampled_from(["", "dt=1", "dt=2/h=%3A", "dt=__HIVE_DEFAULT_PARTITION__", "k="])
folders = st.sampled_from(
    [
        "base_0000004",
        "base_4",
        "base_0000007_v0000020",
        "delta_0000001_0000001_0000",
        "delta_0000005_0000006",
        "delta_0000005_0000005_0000",
        "delta_0000005_0000005_0001",
        "delete_delta_0000005_0000005_0000",
        "delta_0000008_0000009_0000",
        "delete_delta_0000008_0000008_0000",
        "",
        "junk",
        "_tmp.delta_0000002_0000002_0000",
        ".hive-staging",
    ]
)
nested = st.sampled_from(["", "", "", "", "sub/", "_sub/", "delta_0000003_0000003_0000/", "k=v/"])
names = st.sampled_from(
    [
        "bucket_00000",
        "bucket_00001",
        "bucket_00001_2",
        "bucket_00003",
        "000000_0",
        "000001_0_copy_1",
        "part-0000.orc",
        "_orc_acid_version",
        "_metadata_acid",
        "bucket_00000_flush_length",
        "_SUCCESS",
        ".bucket_00000.crc",
    ]
)


def _stored(partition: str, folder: str, below: str, name: str, size: int) -> StoredFile:
    path = "/".join(p for p in (ROOT, partition, folder) if p) + "/" + (below if folder else "")
    return StoredFile(path + name, size, "v1")


listings = st.lists(
    st.builds(_stored, partitions, folders, nested, names, st.sampled_from([0, 10, 10, 10])),
    max_size=40,
)
write_id_lists = st.sampled_from(
    [
        None,
        "db.t:9:9223372036854775807::",
        "db.t:9:5:5:",
        "db.t:9:9223372036854775807::5",
        "db.t:6:2:2:",
        "db.t:9:9223372036854775807::1,8",
    ]
)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    files=listings,
    write_ids=write_id_lists,
    txn_hwm=st.one_of(st.none(), st.just(10), st.just(30)),
    insert_only=st.booleans(),
)
def test_slices_and_unrecognised_entries_match_a_file_by_file_reference(
    files, write_ids, txn_hwm, insert_only
):
    try:
        snap = resolve_files(
            ROOT,
            files,
            ValidWriteIdList.parse(write_ids) if write_ids else None,
            None if txn_hwm is None else ValidTxnList(txn_hwm),
            insert_only=insert_only,
        )
    except (NotEnoughHistoryError, AcidLayoutError):
        return  # documented errors of the walk, for layouts a reader cannot serve
    reference = ReferencePlacement(files, insert_only)
    assert [p.partition.path for p in snap.partitions] == sorted(reference.partitions)
    assert [u.path for u in snap.unrecognised] == reference.unrecognised
    for part in snap.partitions:
        path = part.partition.path
        chosen = [(FileRole.BASE, part.base, ())] if part.base else []
        chosen += [
            (
                FileRole.DELETE_DELTA if d.folder.is_delete else FileRole.DELTA,
                d.folder,
                d.invalid_write_ids,
            )
            for d in part.deltas
        ]
        expected = reference.slices(path, chosen, originals=part.base is None)
        assert [
            (s.bucket_id, s.original_files, s.base_files, s.delta_files, s.delete_delta_files)
            for s in part.slices
        ] == expected
        # every folder present is chosen or excluded; nothing else but original files is
        chosen_names = {folder.name for _, folder, _ in chosen}
        excluded_names = {e.path.rsplit("/", 1)[-1] for e in part.excluded}
        originals = {f.name for f in reference.data[(path, None)]}
        assert chosen_names <= reference.folders[path]
        assert reference.folders[path] <= chosen_names | excluded_names
        assert excluded_names <= reference.folders[path] | originals
