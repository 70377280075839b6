"""Many partitions shaped alike in a row are matched against the last template together
(``ShapedPartitions.take_many``, ``folder_shapes.matching``) once layouts are no longer looked
up, and give what the plain way gives.

Layouts are given up after 64 partitions laid out each its own way, so these listings have
more: the partitions after those go through the matching of many at once, the rest (and those
that do not match) through ``find`` one at a time.
"""

import test_snapshot_shapes as shapes
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from plain_resolution import ROOT, plainly

from airflow_provider_acid.acid.alike_partitions import Resolver, resolve_listing
from airflow_provider_acid.acid.listing import StoredFile
from airflow_provider_acid.acid.writeids import ValidWriteIdList


def test_many_partitions_each_named_its_own_way_give_what_the_plain_way_gives():
    # test_snapshot_shapes' random mixed tables, with more partitions than layouts are looked
    # up for
    run = shapes.test_partitions_each_named_its_own_way_give_what_the_plain_way_gives
    given(
        partitions=st.integers(70, 160),
        in_order=st.sampled_from([1.0, 0.95, 0.6]),
        write_ids=shapes.write_id_lists,
        txn_hwm=st.sampled_from([None, 40, 1000, 10_000]),
        insert_only=st.booleans(),
        seed=st.integers(0, 2**16),
    )(
        settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])(
            run.hypothesis.inner_test
        )
    )()


def folders(p, ids=(1, 2, 3, 4, 5), statements=("_0000", "_0001", "_0000"), width=7):
    """A partition's folders (the benchmark's), named after write ids of its own."""
    base, first, low, high, deleted = (10 * p + k for k in ids)
    return (
        f"base_{base:0{width}d}",
        f"delta_{first:07d}_{first:07d}{statements[0]}",
        f"delta_{low:07d}_{high:07d}{statements[1]}",
        f"delete_delta_{deleted:07d}_{deleted:07d}{statements[2]}",
    )


def compacted(partitions, folder_of=folders, buckets=4):
    """The benchmark's layout, each partition's folders named after write ids of its own."""
    return [
        StoredFile(f"{ROOT}/dt={p:04d}/{folder}/bucket_{b:05d}", 100 + b, f"v{p}")
        for p in range(partitions)
        for b in range(buckets)  # bucket by bucket, as the benchmark lists them
        for folder in folder_of(p)
    ]


def resolve_counting_finds(files, write_ids=None):
    """The partitions and unrecognised entries, and how many partitions ``find`` looked at."""
    resolver = Resolver(write_ids or ValidWriteIdList.all_committed(), None, False)
    finds = []
    find = resolver.shaped.find
    resolver.shaped.find = lambda paths, prefix: finds.append(prefix) or find(paths, prefix)
    partitions, unrecognised = resolve_listing(ROOT, files, resolver)
    return (tuple(partitions), tuple(unrecognised)), len(finds), resolver


def test_partitions_after_layouts_are_given_up_are_matched_together():
    files = compacted(400)
    result, finds, resolver = resolve_counting_finds(files)
    assert result == plainly(files)
    assert finds < 80  # the 65 partitions before layouts were given up, and a few
    assert [len(alike) for _, alike in resolver.shaped.alike.values()] == [399]
    last = result[0][-1]
    assert last.base.write_id == 3991 and [d.folder.statement_id for d in last.deltas] == [0, 1, 0]
    assert last.deltas[1].folder.max_write_id == 3994


def test_partitions_that_do_not_match_the_last_template_go_one_at_a_time():
    def folder_of(p):
        if p % 7 == 3:  # another order of write ids: the delete delta before the deltas
            return folders(p, ids=(1, 4, 5, 6, 2))
        if p % 11 == 5:  # a statement of its own
            return folders(p, statements=("_0003", "_0001", "_0000"))
        if p % 13 == 6:  # a folder of another width
            return folders(p, width=8)
        if p % 17 == 8:  # fewer folders
            return folders(p)[:2]
        return folders(p)

    files = compacted(300, folder_of)
    files[4001] = StoredFile(
        files[4001].path.replace("bucket_", "bucket-"), 10
    )  # a name of its own
    # writes the reader does not see: aborted ones, in two partitions' deltas
    write_ids = ValidWriteIdList("db.t", 10_000, 9223372036854775807, (), (2_203, 2_514))
    result, finds, _ = resolve_counting_finds(files, write_ids)
    assert result == plainly(files, write_ids)
    assert finds < 200


def test_a_file_of_another_partition_among_a_partitions_files_is_no_file_of_its_shape():
    # After layouts are given up, the listing's runs are taken to hold as many files as the
    # run before without each path being compared with their folder: the matching does. A
    # file of dt=0250 in a folder named as dt=0200's lies among dt=0200's files, where
    # dt=0200's own file would be: dt=0200 and dt=0250 go the plain way, and each keeps its
    # own files (dt=0250's folder of old writes is obsolete under its base).
    files = compacted(300)
    at = 200 * 16 + 5  # dt=0200's second file of bucket 1
    own = files[at]
    files[at] = StoredFile(own.path.replace("/dt=0200/", "/dt=0250/"), own.size, own.version)
    result, _, _ = resolve_counting_finds(files)
    assert result == plainly(files)
    by_path = {p.partition.path: p for p in result[0]}
    assert files[at] not in [f.file for s in by_path["dt=0200"].slices for f in s.files]
    assert [e.path for e in by_path["dt=0250"].excluded] == [files[at].path.rsplit("/", 1)[0]]


def test_a_hash_sign_for_a_digit_among_partitions_matched_together_gives_the_plain_result():
    # A "#" where a folder name has a digit is no number (no delta: its files are originals,
    # obsolete under the base), yet its name has the skeleton of the others, and the matching
    # reads the numbers of all the names of its batch in one pass: two partitions, one with a
    # "#" inside a write id,
    # one with a whole write id of them (as many numbers in the batch as without them), must
    # come out as the plain way makes them, and so must the partitions between them.
    def folder_of(p):
        names = list(folders(p))
        if p == 200:
            names[1] = names[1].replace("2002", "20#2")
        if p == 230:
            names[2] = names[2].replace("0002303", "#######")
        return tuple(names)

    files = compacted(300, folder_of)
    result, _, _ = resolve_counting_finds(files)
    assert result == plainly(files)
    by_path = {p.partition.path: p for p in result[0]}
    assert {e.detail for e in by_path["dt=0200"].excluded} == {
        "original file covered by base_0002001"
    }
    assert [d.path for d in by_path["dt=0200"].deltas] == [
        "/t/dt=0200/delta_0002003_0002004_0001",
        "/t/dt=0200/delete_delta_0002005_0002005_0000",
    ]
    assert by_path["dt=0199"].deltas[1].folder.max_write_id == 1994


def test_line_breaks_in_paths_among_partitions_matched_together_give_the_plain_result():
    # The matching compares each file position's paths of all the partitions at once, joined
    # by line breaks: paths holding line breaks (a file name, a folder name, a partition's
    # folder) must leave out their partitions only, as the plain way resolves them, and the
    # partitions between them must come out as made.
    def folder_of(p):
        names = list(folders(p))
        if p == 210:
            names[1] = names[1].replace("_0000", "\n0000")
        return tuple(names)

    files = compacted(300, folder_of)
    at = 220 * 16 + 5
    files[at] = StoredFile(files[at].path + "\nx", 10)
    files = [
        StoredFile(f.path.replace("/dt=0240/", "/dt=02\n40/"), f.size, f.version) for f in files
    ]
    files.sort(key=lambda f: f.path)
    result, _, resolver = resolve_counting_finds(files)
    assert result == plainly(files)
    made = sum(len(alike) for _, alike in resolver.shaped.alike.values())
    assert made > 290  # the others made from the template
