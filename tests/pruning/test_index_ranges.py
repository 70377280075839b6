"""An index stored as segments of path ranges reads exactly as one segment of the same records.

``write_segments`` sorts the files by path and cuts them into segments of at most
``segment_files``; each pointer entry tells its least and greatest path and its columns' family
counts. ``index.read`` then reads only the segments whose range holds a file asked about. The
reference here is the same tables written as a single segment whose entry tells no range
(as every segment was written before): it is always read whole.
"""

from __future__ import annotations

import random

import fsspec
import pyarrow as pa
import pytest

from airflow_provider_acid.pruning import index, index_read, index_storage
from airflow_provider_acid.pruning.index import FILES_SCHEMA, RECORD_SCHEMA, FileKey

FS = fsspec.filesystem("file")
RANGE_KEYS = ("first", "last", "families")


def make_tables(rng: random.Random, n: int) -> tuple[pa.Table, dict[str, pa.Table]]:
    """``n`` files in random order. Column ``a``: int records, but string records for the
    files of the first path range (the least paths), 40% of all; column ``b``: records for
    80% of the files, in random order, with one record of a file that is not indexed."""
    paths = [f"/t/p={i % 37}/delta_{i:07d}/bucket_{i % 3:05d}" for i in range(n)]
    ordered = sorted(paths)
    stringy = set(ordered[: int(n * 0.4)])
    rng.shuffle(paths)
    files = pa.Table.from_pylist(
        [
            {"path": p, "size": 100 + i, "version": f"v{i}", "format": "orc", "row_count": i}
            for i, p in enumerate(paths)
        ],
        schema=FILES_SCHEMA,
    )

    def rec(path: str, column: str, family: str) -> dict:
        lo = rng.randint(0, 1000)
        r = {
            "path": path,
            "column": column,
            "type": "bigint" if family == "int" else "string",
            "family": family,
            "row_count": 10,
            "null_count": rng.choice([0, 1, None]),
            "value_count": 10,
            "nan_count": None,
            "bounds_known": True,
        }
        if family == "int":
            r["min_int"], r["max_int"] = lo, lo + rng.randint(0, 40)
        else:
            r["min_str"], r["max_str"] = f"{lo:04d}", f"{lo + 40:04d}"
        return r

    a = [rec(p, "a", "string" if p in stringy else "int") for p in paths]
    b = [rec(p, "b", "int") for p in paths if rng.random() < 0.8]
    rng.shuffle(b)
    b.append(rec("/t/not-indexed", "b", "int"))
    return files, {
        "a": pa.Table.from_pylist(a, schema=RECORD_SCHEMA),
        "b": pa.Table.from_pylist(b, schema=RECORD_SCHEMA),
    }


def publish(uri: str, entries: list[dict]) -> None:
    fs, root = index_storage.index_filesystem(uri, None)
    index._publish(fs, root, 1, entries)


@pytest.fixture(scope="module")
def indexes(tmp_path_factory):
    """(ranged index uri, single-segment reference uri, the files table)."""
    rng = random.Random(25)
    files, columns = make_tables(rng, 3000)
    base = tmp_path_factory.mktemp("ranges")
    ranged, single = str(base / "ranged"), str(base / "single")
    entries = index_storage.write_segments(FS, ranged, files, columns, segment_files=250)
    publish(ranged, entries)
    (entry,) = index_storage.write_segments(FS, single, files, columns, segment_files=10**6)
    publish(single, [{k: v for k, v in entry.items() if k not in RANGE_KEYS}])
    return ranged, single, files


def keys_of(files: pa.Table) -> list[FileKey]:
    return [FileKey(r["path"], r["size"], r["version"]) for r in files.to_pylist()]


def test_segments_hold_disjoint_sorted_ranges_of_at_most_segment_files(indexes):
    ranged, _, files = indexes
    _, root = index_storage.index_filesystem(ranged, None)
    _, entries = index_storage.load_pointer(FS, root)
    assert len(entries) == 12 and all(e["files"] <= 250 for e in entries)
    assert sum(e["files"] for e in entries) == files.num_rows
    for before, after in zip(entries, entries[1:], strict=False):
        assert before["first"] <= before["last"] < after["first"]
    for e in entries:
        stored = sorted(index_storage.read_segment_files(FS, root, e).column("path").to_pylist())
        assert (stored[0], stored[-1]) == (e["first"], e["last"])
    counts = {f: sum(e["families"]["a"].get(f, 0) for e in entries) for f in ("int", "string")}
    assert counts == {"int": 1800, "string": 1200}


@pytest.mark.parametrize("seed", range(6))
def test_a_few_files_read_as_from_one_segment(indexes, seed):
    ranged, single, files = indexes
    rng = random.Random(seed)
    keys = keys_of(files)
    asked = rng.sample(keys, rng.choice([1, 5, 60]))
    # a file not indexed, one indexed with another version, a path asked twice
    asked += [FileKey("/t/p=0/zzz", 1, "v"), FileKey(asked[0].path, asked[0].size, "other")]
    asked.append(asked[0])
    for columns in (["a"], ["b"], ["A", "b"]):
        got = index.read(ranged, columns, asked).to_pylist()
        assert got == index.read(single, columns, asked).to_pylist()
        assert got[0]["path"] == asked[0].path and got[-3]["row_count"] is None


def test_the_family_is_chosen_over_every_segment_not_only_those_read(indexes):
    """The files of the least paths have string records of ``a``, 40% of all: asked alone,
    their segments hold only strings, but the column's family is int (60%), so their bounds
    are unknown, as when the whole index is read."""
    ranged, single, files = indexes
    least = sorted(keys_of(files))[:30]
    got = index.read(ranged, ["a"], least).to_pylist()
    assert got == index.read(single, ["a"], least).to_pylist()
    assert all(r["a__min"] is None and r["a__values"] == 10 for r in got)


def test_many_files_asked_are_matched_on_their_least_and_greatest(indexes, monkeypatch):
    ranged, single, files = indexes
    monkeypatch.setattr(index_read, "_EXACT_LOOKUP", 10)
    asked = keys_of(files)[::7]
    table = pa.table(
        {
            "path": [k.path for k in asked],
            "size": [k.size for k in asked],
            "version": [k.version for k in asked],
        }
    )
    assert index.read(ranged, ["a", "b"], table) == index.read(single, ["a", "b"], table)


def test_all_files_read_the_same_in_path_order(indexes):
    ranged, single, _ = indexes
    got = index.read(ranged, ["a", "b"]).sort_by("path")
    assert got == index.read(single, ["a", "b"]).sort_by("path")


def test_only_the_segments_holding_an_asked_path_are_read(tmp_path):
    files, columns = make_tables(random.Random(7), 1000)
    uri = str(tmp_path / "idx")
    entries = index_storage.write_segments(FS, uri, files, columns, segment_files=100)
    publish(uri, entries)
    asked = [k for k in keys_of(files) if entries[3]["first"] <= k.path <= entries[3]["last"]]
    expected = index.read(uri, ["a", "b"], asked[:5]).to_pylist()
    for e in entries[:3] + entries[4:]:  # reading any of these would fail
        for path in FS.find(f"{uri}/segments/{e['id']}"):
            FS.pipe_file(path, b"damaged")
    assert index.read(uri, ["a", "b"], asked[:5]).to_pylist() == expected
    with pytest.raises(index.IndexFormatError, match="damaged index file"):
        index.read(uri, ["a"], [keys_of(files)[0], asked[0]])


def test_a_refresh_splits_a_large_segment_written_before_ranges(tmp_path, monkeypatch):
    """An index written before segments had ranges is read as it is; its first refresh writes
    its large segment anew as ranges, with the same answers; the next one changes nothing."""
    monkeypatch.setattr(index_storage, "SEGMENT_FILES", 100)
    monkeypatch.setattr(index, "SEGMENT_FILES", 100)
    files, columns = make_tables(random.Random(3), 450)
    uri = str(tmp_path / "idx")
    (entry,) = index_storage.write_segments(FS, uri, files, columns, segment_files=1000)
    publish(uri, [{k: v for k, v in entry.items() if k not in RANGE_KEYS}])
    keys = keys_of(files)
    before = index.read(uri, ["a", "b"], keys).to_pylist()
    result = index.refresh(uri, keys, FS)
    assert (result.added, result.kept, result.removed, result.version) == (0, 450, 0, 2)
    _, root = index_storage.index_filesystem(uri, None)
    _, entries = index_storage.load_pointer(FS, root)
    assert [e["files"] for e in entries] == [100, 100, 100, 100, 50]
    assert all(e["first"] <= e["last"] for e in entries)
    assert index.read(uri, ["a", "b"], keys).to_pylist() == before
    assert index.refresh(uri, keys, FS).version == 2  # nothing to do: no new version
