"""Partitions shaped alike, whose folders each partition names after write ids of its own, are
made from the first one's template by folder position, and give what the plain way gives.

The plain way is the resolver's own walk (``group_listing`` and ``resolve_partition`` over the
whole listing, checked file by file in test_snapshot_reference.py). Here every partition of a
random listing takes one of a few folder patterns, with write ids of its own: mostly in the
pattern's order (so its shape and order repeat, and templates are used), sometimes not; with
side files, hidden files, compactor transactions, statements, and write-id and transaction
lists that leave writes out. Every partition, slice, file and entry, or the error, must equal
what the plain way makes.
"""

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from plain_resolution import ROOT, plainly, resolved

from airflow_provider_acid.acid.acid_state import resolve_partition
from airflow_provider_acid.acid.alike_partitions import Resolver, resolve_listing
from airflow_provider_acid.acid.listing import StoredFile
from airflow_provider_acid.acid.listing_groups import group_listing
from airflow_provider_acid.acid.read_view import NotEnoughHistoryError
from airflow_provider_acid.acid.resolution import resolve_files
from airflow_provider_acid.acid.writeids import ValidTxnList, ValidWriteIdList

# Folder patterns: (kind, first write, last write, statement) with writes as ranks 1, 2, ...
# that each partition maps to write ids of its own.
PATTERNS = [
    # compacted: a base and the deltas after it (the benchmark's layout)
    [("base", 1), ("delta", 2, 2, 0), ("delta", 3, 3, 0), ("delete_delta", 4, 4, 0)],
    # before the Cleaner: an obsolete delta and base beside the new base
    [("base", 1), ("base", 3), ("delta", 2, 2, 0), ("delta", 4, 4, 0)],
    # a minor compaction and the deltas it covers, a multi-statement write, twins
    [
        ("delta", 1, 3, None),
        ("delta", 1, 1, 0),
        ("delta", 4, 4, 0),
        ("delta", 4, 4, 1),
        ("delete_delta", 4, 4, 1),
        ("delete_delta", 5, 5, 0),
    ],
    # deltas only, one partly overlapping another (refused)
    [("delta", 1, 2, 0), ("delta", 2, 3, 0)],
    # a compactor's base and delta with transactions
    [("base", 2, "v"), ("delta", 3, 4, None, "v"), ("delete_delta", 3, 4, None, "v")],
]
SIDE_FILES = ["_orc_acid_version", "_metadata_acid", ".bucket_00000.crc", "_SUCCESS"]


def folder_name(entry, ids, txn, width=7):
    kind, *writes = entry
    visibility = f"_v{txn:07d}" if writes[-1] == "v" else ""
    if writes[-1] == "v":
        writes = writes[:-1]
    if kind == "base":
        return f"base_{ids[writes[0]]:0{width}d}{visibility}"
    first, last, *statement = writes
    suffix = f"_{statement[0]:04d}" if statement and statement[0] is not None else ""
    return f"{kind}_{ids[first]:0{width}d}_{ids[last]:0{width}d}{suffix}{visibility}"


# What may become of a digit of a folder name: nothing mostly; a "#" (no base or delta then:
# an original files' folder), an Arabic-Indic digit (a digit to Hive's pattern and to int)
ODD_DIGITS = ["", "", "", "", "", "", "", "", "#", "\u0663"]


def mixed_table(rng: random.Random, partitions: int, in_order: float) -> list[StoredFile]:
    files = []
    buckets = rng.choice([1, 2, 3])
    sides = {k: rng.sample(SIDE_FILES, rng.randint(0, 2)) for k in range(6)}
    for p in range(partitions):
        pattern = PATTERNS[rng.choice([0, 0, 0, 1, 2, 2, 3, 4])]
        if rng.random() < in_order:  # the pattern's order, with gaps of the partition's own
            ids, last = {}, 10 * p
            for rank in range(1, 7):
                last += rng.randint(1, 3)
                ids[rank] = last
        else:
            ids = {rank: rng.randint(1, 12) + 10 * p for rank in range(1, 7)}
        txn = rng.choice([5, 50, 500]) + p
        width = rng.choice([7, 7, 7, 1])
        for k, entry in enumerate(pattern):
            name = folder_name(entry, ids, txn, width)
            odd = rng.choice(ODD_DIGITS)
            if odd:
                name = name.replace("1", odd, 1)
            folder = f"{ROOT}/dt={p:03d}/{name}"
            names = [f"bucket_{b:05d}" for b in range(buckets)] + sides[k % 6]
            files += [StoredFile(f"{folder}/{name}", 10 + len(name), f"v{p}") for name in names]
    return sorted(files, key=lambda f: f.path)


write_id_lists = st.one_of(
    st.none(),
    st.builds(
        lambda hwm, open_ids, aborted: ValidWriteIdList(
            "db.t",
            hwm,
            min(open_ids) if open_ids else 9223372036854775807,
            tuple(sorted(open_ids)),
            tuple(sorted(set(aborted) - set(open_ids))),
        ),
        st.integers(0, 100),
        st.sets(st.integers(1, 100), max_size=4),
        st.sets(st.integers(1, 100), max_size=6),
    ),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    partitions=st.integers(1, 9),
    in_order=st.sampled_from([1.0, 0.8, 0.3]),
    write_ids=write_id_lists,
    txn_hwm=st.sampled_from([None, 40, 100, 1000]),
    insert_only=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_partitions_each_named_its_own_way_give_what_the_plain_way_gives(
    partitions, in_order, write_ids, txn_hwm, insert_only, seed
):
    files = mixed_table(random.Random(seed), partitions, in_order)
    txns = ValidTxnList(txn_hwm, aborted_ids=(52,)) if txn_hwm is not None else None
    expected = plainly(files, write_ids, txns, insert_only)
    assert resolved(files, write_ids, txns, insert_only) == expected


def test_a_table_compacted_partition_by_partition_is_made_from_one_template():
    # the benchmark's layout: each partition's folders named after write ids of its own
    files = [
        StoredFile(f"{ROOT}/dt={p:03d}/{folder}/bucket_{b:05d}", 100 + b, f"v{p}")
        for p in range(200)
        for folder in (
            f"base_{10 * p + 1:07d}",
            f"delta_{10 * p + 2:07d}_{10 * p + 2:07d}_0000",
            f"delete_delta_{10 * p + 3:07d}_{10 * p + 3:07d}_0000",
        )
        for b in range(4)
    ]
    resolver = Resolver(ValidWriteIdList.all_committed(), None, False)
    partitions, unrecognised = resolve_listing(ROOT, files, resolver)
    assert (tuple(partitions), tuple(unrecognised)) == plainly(files)
    made = [alike for _, alike in resolver.shaped.alike.values()]
    assert [len(alike) for alike in made] == [199]  # all but the first, from its template
    assert len(resolver.resolved) == 1
    seventh = partitions[7]
    assert seventh.base.write_id == 71 and seventh.base_path == f"{ROOT}/dt=007/base_0000071"
    assert [d.folder.min_write_id for d in seventh.deltas] == [72, 73]  # in write order
    assert {f.file.version for s in seventh.slices for f in s.files} == {"v7"}


def test_a_write_the_reader_does_not_see_sends_its_partitions_the_plain_way():
    files = [
        StoredFile(f"{ROOT}/dt={p}/{folder}/bucket_00000", 10)
        for p in range(6)
        for folder in (f"base_{10 * p + 1:07d}", f"delta_{10 * p + 2:07d}_{10 * p + 3:07d}_0000")
    ]
    write_ids = ValidWriteIdList("db.t", 100, 9223372036854775807, (), (23, 43))  # dt=2, dt=4
    resolver = Resolver(write_ids, None, False)
    partitions, _ = resolve_listing(ROOT, files, resolver)
    assert tuple(partitions) == plainly(files, write_ids)[0]
    assert [p.deltas[0].invalid_write_ids for p in partitions] == [(), (), (23,), (), (43,), ()]
    (alike,) = [alike for _, alike in resolver.shaped.alike.values()]
    assert [p.path for p, *_ in alike] == ["dt=1", "dt=3", "dt=5"]


def test_an_open_write_below_a_compacted_base_is_left_to_the_plain_way():
    # base_0000035_v... (compacted) and later ones: write 33 is still open, so the reader's
    # view is older than their history (Hive's error), though no folder holds write 33
    files = [
        StoredFile(f"{ROOT}/dt={p}/{folder}/bucket_00000", 10)
        for p in range(6)
        for folder in (
            f"base_{10 * p + 5:07d}_v0000001",
            f"delta_{10 * p + 6:07d}_{10 * p + 7:07d}",
        )
    ]
    write_ids = ValidWriteIdList("db.t", 100, 33, (33,), ())
    expected = plainly(files, write_ids)
    assert expected[0] is NotEnoughHistoryError and "dt=3/base_0000035" in expected[1]
    assert resolved(files, write_ids) == expected


def test_a_nested_folder_among_partitions_shaped_alike_is_no_folder_of_the_shape():
    def partition(p, nested=""):
        return [
            StoredFile(f"{ROOT}/dt={p}/base_{10 * p + 1:07d}/bucket_00000", 10),
            StoredFile(f"{ROOT}/dt={p}/delta_{10 * p + 2:07d}_{10 * p + 2:07d}{nested}/b", 10),
        ]

    files = partition(1) + partition(2) + partition(3, "/x") + partition(4, "_0000/y")
    files += partition(5)
    expected = plainly(files)
    assert len(expected[1]) == 2  # the nested files cannot be placed
    assert resolved(files) == expected


def test_metastore_partitions_shaped_alike_are_made_as_the_plain_way_makes_them(tmp_path):
    from fsspec.implementations.local import LocalFileSystem

    from airflow_provider_acid.acid.listing import list_table_files
    from airflow_provider_acid.acid.resolution import resolve_partition_locations
    from airflow_provider_acid.acid.source import PartitionLocation

    for p in range(6):
        for folder in (f"base_{10 * p + 1:07d}", f"delta_{10 * p + 2:07d}_{10 * p + 2:07d}_0000"):
            for b in range(2):
                path = tmp_path / "t" / f"dt={p}" / folder / f"bucket_{b:05d}"
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(b"x" * (p + b + 1))
    fs = LocalFileSystem()
    root = str(tmp_path / "t")
    locations = [PartitionLocation(f"dt={p}", f"{root}/dt={p}") for p in (3, 0, 1, 2, 4, 5)]
    by_locations = resolve_partition_locations(root, locations, fs)
    files = list_table_files(fs, root)
    assert by_locations.partitions == resolve_files(root, files).partitions
    assert by_locations.partitions == tuple(
        resolve_partition(p, ValidWriteIdList.all_committed(), None, {})
        for p in group_listing(root, files, False)[0]
    )
