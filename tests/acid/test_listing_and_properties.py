"""Listing cost, and properties of the resolver over random folder sets and write-id lists."""

from collections import Counter

import pytest
from fsspec.implementations.memory import MemoryFileSystem
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_provider_acid.acid.listing import StoredFile
from airflow_provider_acid.acid.names import BaseDir, DeltaDir
from airflow_provider_acid.acid.read_view import AcidLayoutError, NotEnoughHistoryError
from airflow_provider_acid.acid.resolution import resolve_files, resolve_read_view
from airflow_provider_acid.acid.writeids import NO_OPEN_ID, ValidTxnList, ValidWriteIdList


class CountingMemoryFileSystem(MemoryFileSystem):
    """A real in-memory filesystem that counts the listing calls made from outside it."""

    cachable = False

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.store = {}
        self.pseudo_dirs = [""]
        self.calls = Counter()
        self._depth = 0

    def _counted(name):  # noqa: N805 - a decorator factory used in the class body
        def wrap(self, *args, **kwargs):
            if self._depth == 0:
                self.calls[name] += 1
            self._depth += 1
            try:
                return getattr(MemoryFileSystem, name)(self, *args, **kwargs)
            finally:
                self._depth -= 1

        return wrap

    find = _counted("find")
    ls = _counted("ls")
    info = _counted("info")
    isdir = _counted("isdir")
    exists = _counted("exists")
    walk = _counted("walk")


def test_one_recursive_listing_per_table_scan():
    fs = CountingMemoryFileSystem()
    for part in ("dt=1", "dt=2", "dt=3"):
        for folder in (
            "base_0000001",
            "delta_0000002_0000002_0000",
            "delete_delta_0000003_0000003_0000",
        ):
            for bucket in range(4):
                fs.pipe(f"/t/{part}/{folder}/bucket_{bucket:05d}", b"x" * 10)
            fs.pipe(f"/t/{part}/{folder}/_orc_acid_version", b"2")
    snap = resolve_read_view("/t", filesystem=fs)
    assert len(snap.slices) == 12 and len(snap.files) == 36
    assert fs.calls == Counter({"find": 1})


write_ids_strategy = st.builds(
    lambda hwm, exceptions, open_mask: _write_ids(hwm, exceptions, open_mask),
    st.integers(0, 12),
    st.sets(st.integers(1, 12), max_size=5),
    st.lists(st.booleans(), min_size=5, max_size=5),
)


def _write_ids(hwm, exceptions, open_mask):
    exceptions = sorted(e for e in exceptions if e <= hwm)
    open_ids = tuple(e for e, is_open in zip(exceptions, open_mask, strict=False) if is_open)
    aborted = tuple(e for e in exceptions if e not in open_ids)
    return ValidWriteIdList("db.t", hwm, min(open_ids, default=NO_OPEN_ID), open_ids, aborted)


def _folder_name(kind, low, span, statement, visibility):
    if kind == "base":
        name = f"base_{low:07d}"
    else:
        name = f"{kind}_{low:07d}_{low + span:07d}"
        if statement is not None:
            name += f"_{statement:04d}"
    if visibility is not None:
        name += f"_v{visibility:07d}"
    return name


folder_strategy = st.builds(
    _folder_name,
    st.sampled_from(["base", "delta", "delta", "delete_delta"]),
    st.integers(1, 12),
    st.integers(0, 3),
    st.one_of(st.none(), st.integers(0, 2)),
    st.one_of(st.none(), st.integers(1, 30)),
)


def _covered(folder):
    return range(1 if isinstance(folder, BaseDir) else folder.min_write_id, folder.max_write_id + 1)


def _assert_no_write_read_twice(folders):
    readers = {}
    for folder in folders:
        for write in _covered(folder):
            other = readers.setdefault(write, folder)
            if other is folder:
                continue
            # Only distinct statements of one single-write delta may share a write.
            assert isinstance(other, DeltaDir) and isinstance(folder, DeltaDir), (other, folder)
            assert other.min_write_id == other.max_write_id == folder.max_write_id
            assert folder.min_write_id == folder.max_write_id
            assert other.statement_id is not None and folder.statement_id is not None
            assert other.statement_id != folder.statement_id


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    folders=st.lists(folder_strategy, min_size=1, max_size=10, unique=True),
    originals=st.integers(0, 2),
    write_ids=st.one_of(st.none(), write_ids_strategy),
    txn_hwm=st.one_of(st.none(), st.integers(0, 30)),
)
def test_random_layouts_never_crash_and_never_read_a_write_twice(
    folders, originals, write_ids, txn_hwm
):
    files = [StoredFile(f"/t/{name}/bucket_00000", 10) for name in folders]
    files += [StoredFile(f"/t/00000{i}_0", 10) for i in range(originals)]
    txns = None if txn_hwm is None else ValidTxnList(txn_hwm)
    try:
        snap = resolve_files("/t", files, write_ids, txns)
    except (NotEnoughHistoryError, AcidLayoutError):
        return  # documented, clear errors for layouts a reader cannot serve
    (part,) = snap.partitions
    inserts = ([part.base] if part.base else []) + [
        d.folder for d in part.deltas if not d.folder.is_delete
    ]
    deletes = [d.folder for d in part.deltas if d.folder.is_delete]
    _assert_no_write_read_twice(inserts)
    _assert_no_write_read_twice(deletes)
    base_write = part.base.write_id if part.base else 0
    assert all(d.folder.max_write_id > base_write for d in part.deltas)
    # Every folder present is either chosen or accounted for.
    accounted = {e.path.rsplit("/", 1)[-1] for e in part.excluded}
    chosen = {d.folder.name for d in part.deltas} | ({part.base.name} if part.base else set())
    for name in folders:
        assert name in chosen or name in accounted, name
    if part.base:
        assert not any(s.original_files for s in part.slices)


@pytest.mark.parametrize("name", ["base_0000003", "delta_0000001_0000004"])
def test_a_lone_folder_is_always_chosen_without_a_list(name):
    snap = resolve_files("/t", [StoredFile(f"/t/{name}/bucket_00000", 10)])
    assert len(snap.files) == 1
