"""``find_files``: on a local disk, a folder walk without a stat of each file gives exactly
fsspec's ``find``; on other filesystems it is fsspec's ``find``."""

from __future__ import annotations

import os

from fsspec.implementations.local import LocalFileSystem
from fsspec.implementations.memory import MemoryFileSystem

from airflow_provider_acid.acid.listing import find_files


def _tree(root) -> None:
    for relative in (
        "part-a-00000-0000.parquet",
        "p=1/q=x/part-a-00001-0000.parquet",
        "p=1/.part-a-00002-0000.parquet.tmp",
        "_snapshots/a/plan.json",
        "_snapshots/a/manifest.json",
        "_commits/000000000001-a",
        "_SUCCESS",
    ):
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x")
    (root / "empty" / "deeper").mkdir(parents=True)
    elsewhere = root.parent / "elsewhere"
    (elsewhere / "inside").mkdir(parents=True)
    (elsewhere / "inside" / "f").write_bytes(b"y")
    os.symlink(elsewhere / "inside", root / "linked-folder")
    os.symlink(root / "_SUCCESS", root / "p=1" / "linked-file")


def test_a_local_walk_gives_fsspecs_find(tmp_path):
    root = tmp_path / "out"
    _tree(root)
    fs = LocalFileSystem()
    ours = find_files(fs, str(root))
    assert ours == fs.find(str(root))
    assert len(ours) == 9  # 7 files and 2 links; folders, and what a linked folder holds, not
    assert find_files(fs, str(root) + "/") == ours
    assert find_files(fs, str(root / "p=1")) == fs.find(str(root / "p=1"))
    assert find_files(fs, str(root / "_SUCCESS")) == [str(root / "_SUCCESS")]


def test_a_missing_local_folder_holds_no_files_as_with_fsspec(tmp_path):
    fs = LocalFileSystem()
    assert find_files(fs, str(tmp_path / "missing")) == fs.find(str(tmp_path / "missing")) == []


def test_other_filesystems_are_listed_by_fsspec():
    fs = MemoryFileSystem(skip_instance_cache=True)
    fs.store, fs.pseudo_dirs = {}, [""]
    fs.pipe({"/t/a/b": b"1", "/t/c": b"2"})
    assert find_files(fs, "/t") == fs.find("/t") == ["/t/a/b", "/t/c"]


class _Flat(MemoryFileSystem):
    """An in-memory filesystem taken for an object store (listed flat, at once)."""

    protocol = ("s3",)
    cachable = False


def test_a_refused_folder_is_not_looked_into_on_any_filesystem(tmp_path):
    files = ["_snapshots/a/manifest.json", "_snapshots/a/x/y", "_snapshots/b/plan.json",
             "p=1/f.parquet", "_SUCCESS"]  # fmt: skip
    refuse = {"_snapshots/a"}
    kept = sorted(f for f in files if not f.startswith("_snapshots/a/"))
    local = tmp_path / "out"
    for name in files:
        (local / name).parent.mkdir(parents=True, exist_ok=True)
        (local / name).write_bytes(b"x")
    for fs, root in (
        (LocalFileSystem(), str(local)),
        (MemoryFileSystem(skip_instance_cache=True), "/out"),  # one listing a folder
        (_Flat(skip_instance_cache=True), "/out"),  # every key at once
    ):
        if not isinstance(fs, LocalFileSystem):
            fs.store, fs.pseudo_dirs = {}, [""]
            fs.pipe({f"/out/{name}": b"x" for name in files})
        found = find_files(fs, root, lambda folder, top=root: folder[len(top) + 1 :] not in refuse)
        assert [p[len(root) + 1 :] for p in found] == kept, type(fs)
