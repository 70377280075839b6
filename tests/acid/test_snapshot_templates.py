"""Partitions laid out alike are made from the first one's template, and give what the plain
way gives.

The plain way is the resolver's own walk (``group_listing`` and ``resolve_partition`` over
the whole listing, checked file by file in test_snapshot_reference.py). Here listings repeat
one partition layout many times, with odd partitions and odd files among them (other
layouts, empty files, files at the partition or table root, nested partitions, the listing
out of order), and every partition, slice, file and entry must equal what the plain way
makes, as must the errors.
"""

import pickle
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from plain_resolution import ROOT, plainly, resolved

from airflow_provider_acid.acid.alike_partitions import Resolver
from airflow_provider_acid.acid.listing import StoredFile
from airflow_provider_acid.acid.read_view import AcidLayoutError
from airflow_provider_acid.acid.resolution import resolve_files
from airflow_provider_acid.acid.writeids import ValidTxnList, ValidWriteIdList

LAYOUT = [
    "base_0000004/_metadata_acid",
    "base_0000004/bucket_00000",
    "base_0000004/bucket_00001",
    "delta_0000002_0000002_0000/bucket_00000",
    "delta_0000005_0000005_0000/_orc_acid_version",
    "delta_0000005_0000005_0000/bucket_00001",
    "delta_0000005_0000005_0000/bucket_00000",
    "delta_0000006_0000007_0000/bucket_00002",
    "delete_delta_0000006_0000006_0000/bucket_00000",
    "delta_0000008_0000008_0000/.bucket_00000.crc",
    "delta_0000008_0000008_0000/bucket_00000",
]


def alike_table(partitions: int, layout=LAYOUT) -> list[StoredFile]:
    return [
        StoredFile(f"{ROOT}/dt={p:03d}/{relative}", 10 + k, f"v{p}")
        for p in range(partitions)
        for k, relative in enumerate(layout)
    ]


@pytest.mark.parametrize(
    "write_ids",
    [
        None,
        "db.t:9:9223372036854775807::",
        "db.t:9:7:7:",  # a partly valid delta (writes 6..7, 7 open)
        "db.t:9:9223372036854775807::5",  # delta 5 aborted
        "db.t:3:9223372036854775807::",  # the base is above the high watermark
    ],
)
def test_partitions_laid_out_alike_are_made_as_the_plain_way_makes_them(write_ids):
    files = alike_table(20)
    parsed = ValidWriteIdList.parse(write_ids) if write_ids else None
    expected = plainly(files, parsed)
    assert resolved(files, parsed) == expected
    if not isinstance(expected[0], type):
        snapshot = resolve_files(ROOT, files, parsed)
        assert len(snapshot.partitions) == 20 and snapshot.slices
        assert pickle.loads(pickle.dumps(snapshot)) == snapshot
        assert {f.file.version for f in snapshot.partitions[7].slices[0].files} == {"v7"}


def test_the_first_partition_of_a_layout_is_the_template_of_the_others():
    files = alike_table(5)
    resolver = Resolver(ValidWriteIdList.all_committed(), None, False)
    for p in range(5):
        from airflow_provider_acid.acid.partitions import Partition

        in_partition = files[p * len(LAYOUT) : (p + 1) * len(LAYOUT)]
        assert resolver.add(
            Partition.from_components([f"dt={p:03d}"]), in_partition, f"/t/dt={p:03d}/"
        )
    assert len(resolver.resolved) == 1  # resolved the plain way; the other four from it
    ((_, alike),) = resolver.alike.values()
    assert len(alike) == 4
    assert tuple(resolver.snapshots()) == plainly(files)[0]


def test_an_error_of_a_layout_is_raised_as_the_plain_way_raises_it():
    # partly overlapping deltas: every partition of the layout is refused, the first named
    layout = ["delta_0000001_0000005_0000/bucket_00000", "delta_0000003_0000008_0000/bucket_00000"]
    files = alike_table(4, layout)
    expected = plainly(files)
    assert expected[0] is AcidLayoutError and "dt=000" in expected[1]
    assert resolved(files) == expected


def test_unused_templates_stop_being_made():
    # each partition laid out its own way: after a few, the plain way takes the rest
    files = [
        StoredFile(f"{ROOT}/dt={p:03d}/delta_{p + 1:07d}_{p + 1:07d}_0000/bucket_00000", 5)
        for p in range(100)
    ]
    assert resolved(files) == plainly(files)


odd_paths = st.sampled_from(
    [
        "dt={p}/000000_0",  # an original file at the partition root
        "dt={p}/base_0000004/bucket_00003",  # another layout for that partition
        "dt={p}/h=1/delta_0000002_0000002_0000/bucket_00000",  # a nested partition
        "dt={p}/junk/delta_0000002_0000002_0000/bucket_00000",  # unplaceable
        "dt={p}/delta_0000005_0000005_0000/sub/bucket_00000",  # nested in a delta
        "dt={p}/delete_delta_0000006_0000006_0000/part-0000.orc",  # not a bucket file
        "dt={p}/.hive-staging/bucket_00000",  # staging: never data
        "dt={p}/delta_0000001_0000009_0000/bucket_00000",  # overlaps: refused
        "000000_0",  # a file at the table root
        "_SUCCESS",
        "k=v",  # a file named like a partition, at the root
    ]
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    partitions=st.integers(1, 6),
    odd=st.lists(st.tuples(odd_paths, st.integers(0, 5), st.sampled_from([0, 7])), max_size=4),
    dropped=st.lists(st.tuples(st.integers(0, 5), st.integers(0, len(LAYOUT) - 1)), max_size=2),
    empty=st.lists(st.tuples(st.integers(0, 5), st.integers(0, len(LAYOUT) - 1)), max_size=1),
    shuffled=st.booleans(),
    duplicated=st.booleans(),
    write_ids=st.sampled_from(
        [None, "db.t:9:9223372036854775807::", "db.t:9:7:7:", "db.t:9:9223372036854775807::5"]
    ),
    txn_hwm=st.sampled_from([None, 30]),
    insert_only=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_listings_with_odd_partitions_and_files_give_what_the_plain_way_gives(
    partitions, odd, dropped, empty, shuffled, duplicated, write_ids, txn_hwm, insert_only, seed
):
    dropped_files = {(p, k) for p, k in dropped}
    empty_files = {(p, k) for p, k in empty}
    files = [
        StoredFile(f"{ROOT}/dt={p}/{relative}", 0 if (p, k) in empty_files else 10 + k, f"v{p}")
        for p in range(partitions)
        for k, relative in enumerate(LAYOUT)
        if (p, k) not in dropped_files
    ]
    files += [StoredFile(f"{ROOT}/{path.format(p=p)}", size, "odd") for path, p, size in odd]
    rng = random.Random(seed)
    if duplicated and files:
        files.append(rng.choice(files))
    if shuffled:
        rng.shuffle(files)
    else:
        files.sort(key=lambda f: f.path)
    parsed = ValidWriteIdList.parse(write_ids) if write_ids else None
    txns = ValidTxnList(txn_hwm) if txn_hwm is not None else None
    assert resolved(files, parsed, txns, insert_only) == plainly(files, parsed, txns, insert_only)


def test_a_file_listed_twice_is_kept_twice_in_each_partition_laid_out_alike():
    layout = ["delta_0000002_0000002_0000/bucket_00000"] * 2 + ["base_0000001/bucket_00000"]
    files = [
        StoredFile(f"{ROOT}/dt={p}/{relative}", 10, f"v{p}.{k}")
        for p in range(3)
        for k, relative in enumerate(layout)
    ]
    files[1] = files[0]  # the first partition's template lists one object twice
    partitions, _ = resolved(files)
    assert partitions == plainly(files)[0]
    assert [f.file.version for f in partitions[2].slices[0].delta_files] == ["v2.0", "v2.1"]


def test_a_partition_folder_listed_out_of_order_is_resolved_the_plain_way():
    # dt=1/h=1's first file comes first, a run of its own (and a partition to itself); its
    # second comes among dt=1's files, which then are not one partition alone: both go the
    # plain way, and dt=1/h=1 with both its files
    files = [
        StoredFile(f"{ROOT}/dt=1/h=1/delta_0000002_0000002_0000/bucket_00000", 7),
        StoredFile(f"{ROOT}/dt=1/base_0000004/bucket_00000", 7),
        StoredFile(f"{ROOT}/dt=1/h=1/delta_0000002_0000002_0000/bucket_00001", 7),
    ]
    partitions, _ = resolved(files)
    assert partitions == plainly(files)[0]
    assert [len(p.slices) for p in partitions] == [1, 2]


def test_metastore_partitions_laid_out_alike_are_made_as_the_plain_way_makes_them(tmp_path):
    from fsspec.implementations.local import LocalFileSystem

    from airflow_provider_acid.acid.listing import list_table_files
    from airflow_provider_acid.acid.resolution import resolve_partition_locations
    from airflow_provider_acid.acid.source import PartitionLocation

    for p in range(6):
        for k, relative in enumerate(LAYOUT):
            path = tmp_path / "t" / f"dt={p}" / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"x" * (k + 1))
    (tmp_path / "t" / "dt=5" / "h=1").mkdir()
    (tmp_path / "t" / "dt=5" / "h=1" / "000000_0").write_bytes(b"x")  # not in a partition
    fs = LocalFileSystem()
    root = str(tmp_path / "t")
    locations = [PartitionLocation(f"dt={p}", f"{root}/dt={p}") for p in (3, 0, 1, 2, 4, 5)]
    by_locations = resolve_partition_locations(root, locations, fs)
    by_listing = resolve_files(root, list_table_files(fs, root))
    assert by_locations.partitions == by_listing.partitions[:-1]  # dt=5/h=1 is no partition
    assert [u.path for u in by_locations.unrecognised] == [f"{root}/dt=5/h=1"]


def test_a_file_of_another_partition_among_a_partitions_files_is_never_made_its_own():
    # Two layouts in turn: the listing's runs soon stop being compared with the run before,
    # while each partition's layout is still looked up. Among dt=090's files lies one of
    # dt=200 whose path, cut at dt=090's folder, is dt=090's own layout's: dt=090 must not be
    # made from that template with dt=200's file in it.
    layouts = [
        [f"base_0000004/bucket_0000{b}" for b in range(3)],
        [f"delta_0000002_0000002_0000/bucket_0000{b}" for b in range(3)],
    ]
    files = [
        StoredFile(f"{ROOT}/dt={p:03d}/{relative}", 10, f"v{p}")
        for p in range(100)
        for relative in layouts[p % 2]
    ]
    at = 90 * 3 + 1
    files[at] = StoredFile(f"{ROOT}/dt=200/{layouts[0][1]}", 10, "v200")
    partitions, unrecognised = resolved(files)
    assert (partitions, unrecognised) == plainly(files)
    by_path = {p.partition.path: p for p in partitions}
    assert [f.path for s in by_path["dt=090"].slices for f in s.files] == [
        f"{ROOT}/dt=090/{layouts[0][0]}",
        f"{ROOT}/dt=090/{layouts[0][2]}",
    ]
    assert [f.path for s in by_path["dt=200"].slices for f in s.files] == [files[at].path]
