from __future__ import annotations

import datetime as dt
import decimal
import json
import math
import uuid
from pathlib import Path

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from _pruning_testfiles import write_orc, write_parquet

from airflow_provider_acid.pruning import index, index_storage
from airflow_provider_acid.pruning.evaluator import might_match
from airflow_provider_acid.pruning.index import FileKey
from airflow_provider_acid.pruning.predicates import parse_sql_where
from airflow_provider_acid.pruning.stats import read_file_stats

D = decimal.Decimal
LOCAL = fsspec.filesystem("file")
T0 = dt.datetime(2024, 1, 1, 12, 0, 0)


def data_file(tmp_path: Path, name: str, values: list, kind: str = "orc") -> FileKey:
    table = pa.table({"a": pa.array(values, pa.int64()), "s": [str(v) for v in values]})
    if kind == "orc":
        path = write_orc(tmp_path / name, table)
    else:
        path = write_parquet(tmp_path / name, table)
    return FileKey.from_info(LOCAL.info(path))


def pointers(root: Path) -> list[str]:
    return sorted(p.name for p in (root / "_pointers").iterdir())


def test_refresh_adds_keeps_and_forgets(tmp_path: Path) -> None:
    k1 = data_file(tmp_path, "f1.orc", [1, 2])
    k2 = data_file(tmp_path, "f2.parquet", [5, 6], kind="parquet")
    idx = tmp_path / "idx"
    r = index.refresh(str(idx), [k1, k2], LOCAL)
    assert (r.added, r.kept, r.removed, r.version) == (2, 0, 0, 1)
    r = index.refresh(str(idx), [k1, k2], LOCAL)
    assert (r.added, r.kept, r.removed, r.version) == (0, 2, 0, 1)  # nothing written
    assert pointers(idx) == ["v00000000000000000001.json"]

    k3 = data_file(tmp_path, "f3.orc", [9])
    r = index.refresh(str(idx), [k2, k3], LOCAL)
    assert (r.added, r.kept, r.removed, r.version) == (1, 1, 1, 2)
    table = index.read(str(idx), ["a"])
    assert sorted(table.column("path").to_pylist()) == sorted([k2.path, k3.path])

    # a rewritten file (same path, new size) is re-indexed
    k3b = data_file(tmp_path, "f3.orc", [100, 200, 300])
    assert k3b.size != k3.size
    r = index.refresh(str(idx), [k2, k3b], LOCAL)
    assert (r.added, r.kept, r.removed) == (1, 1, 1)
    row = index.read(str(idx), ["a"], [k3b]).to_pylist()[0]
    assert (row["a__min"], row["a__max"], row["row_count"]) == (100, 300, 3)

    # forgetting everything leaves an empty, readable index
    r = index.refresh(str(idx), [], LOCAL)
    assert (r.added, r.kept, r.removed) == (0, 0, 2)
    assert index.read(str(idx), ["a"]).num_rows == 0


def test_read_one_row_per_requested_file_in_order(tmp_path: Path) -> None:
    k1 = data_file(tmp_path, "f1.orc", [1, 2])
    k2 = data_file(tmp_path, "f2.orc", [3, None])
    idx = str(tmp_path / "idx")
    index.refresh(idx, [k1, k2], LOCAL)
    unknown = FileKey(str(tmp_path / "never-indexed.orc"), 10, "v1")
    changed = FileKey(k1.path, k1.size + 1, k1.version)
    t = index.read(idx, ["a", "missing_col"], [k2, unknown, changed, k1])
    assert t.column("path").to_pylist() == [k2.path, unknown.path, k1.path, k1.path]
    rows = t.to_pylist()
    assert (rows[0]["a__min"], rows[0]["a__max"], rows[0]["a__nulls"]) == (3, 3, 1)
    assert rows[0]["a__values"] == 2 and rows[0]["row_count"] == 2
    for r in rows[1:3]:  # not indexed with this key: everything unknown
        assert r["row_count"] is None and r["a__min"] is None and r["a__nulls"] is None
    assert rows[3]["a__max"] == 2
    assert all(r["missing_col__min"] is None for r in rows)
    assert t.column_names == [
        "path",
        "size",
        "version",
        "row_count",
        *(f"a__{k}" for k in ("min", "max", "nulls", "values", "nans")),
        *(f"missing_col__{k}" for k in ("min", "max", "nulls", "values", "nans")),
    ]


def test_values_round_trip_exactly(tmp_path: Path) -> None:
    big = 2**62 + 1  # not representable as a double
    table = pa.table(
        {
            "i": pa.array([-big, big], pa.int64()),
            "f": pa.array([-0.0, 1e308], pa.float64()),
            "tiny": pa.array([5e-324, math.inf], pa.float64()),
            "dec": pa.array([D("-12345678901234567.89"), D("0.01")], pa.decimal128(38, 2)),
            "dec0": pa.array(
                [D("1"), D("99999999999999999999999999999999999999")], pa.decimal128(38, 0)
            ),
            "s": ["\u00e9t\u00e9", "\U0001f600 x"],
            "d": pa.array([dt.date(1, 1, 1), dt.date(9999, 12, 31)], pa.date32()),
            "ts": pa.array([T0.replace(microsecond=1), T0.replace(microsecond=999_999)]),
            "b": [False, True],
        }
    )
    path = write_parquet(tmp_path / "f.parquet", table)
    key = FileKey.from_info(LOCAL.info(path))
    idx = str(tmp_path / "idx")
    index.refresh(idx, [key], LOCAL)
    expected = read_file_stats(LOCAL, path).columns
    row = index.read(idx, table.column_names, [key]).to_pylist()[0]
    for name in table.column_names:
        assert row[f"{name}__min"] == expected[name].min, name
        assert row[f"{name}__max"] == expected[name].max, name
        assert type(row[f"{name}__min"]) is type(expected[name].min), name
        assert row[f"{name}__nulls"] == 0 and row[f"{name}__values"] == 2
    assert math.copysign(1.0, row["f__min"]) == math.copysign(1.0, expected["f"].min)
    assert row["i__max"] == big and row["dec0__max"] == D("9" * 38)


def test_only_the_queried_columns_are_read(tmp_path: Path) -> None:
    k = data_file(tmp_path, "f.orc", [1, 2])
    idx = tmp_path / "idx"
    index.refresh(str(idx), [k], LOCAL)
    (segment,) = (idx / "segments").iterdir()
    assert sorted(p.name for p in segment.iterdir()) == ["column=a", "column=s", "files.parquet"]
    for p in (segment / "column=s").iterdir():
        p.write_bytes(b"corrupt")  # reading it would fail
    row = index.read(str(idx), ["A"]).to_pylist()[0]  # names match case-insensitively
    assert (row["A__min"], row["A__max"]) == (1, 2)
    records = pq.read_table(segment / "column=a" / "stats.parquet")
    assert records.column("column").to_pylist() == ["a"]
    assert records.column("bounds_known").to_pylist() == [True]


def test_a_half_written_pointer_is_ignored(tmp_path: Path) -> None:
    k = data_file(tmp_path, "f.orc", [1, 2])
    idx = tmp_path / "idx"
    index.refresh(str(idx), [k], LOCAL)
    # a writer died while writing version 2: readers keep using version 1
    (idx / "_pointers" / "v00000000000000000002.json").write_bytes(b'{"format": "airf')
    assert index.read(str(idx), ["a"]).column("a__max").to_pylist() == [2]
    k2 = data_file(tmp_path, "g.orc", [7])
    r = index.refresh(str(idx), [k, k2], LOCAL)
    assert r.version == 2 and r.added == 1
    doc = json.loads((idx / "_pointers" / "v00000000000000000002.json").read_text())
    assert doc["files"] == 2


def test_previous_version_stays_readable(tmp_path: Path) -> None:
    k1 = data_file(tmp_path, "f1.orc", [1])
    k2 = data_file(tmp_path, "f2.orc", [2])
    idx = tmp_path / "idx"
    index.refresh(str(idx), [k1, k2], LOCAL, gc_grace_seconds=0)
    v1 = json.loads((idx / "_pointers" / "v00000000000000000001.json").read_text())
    index.refresh(str(idx), [k2], LOCAL, gc_grace_seconds=0)  # rewrites the segment
    # version 1's segment is still there for readers that started before
    for seg in v1["segments"]:
        assert (idx / "segments" / seg["id"] / "files.parquet").exists()
    index.refresh(str(idx), [], LOCAL, gc_grace_seconds=0)
    # now version 1 is two versions old: its pointer and segment are gone
    assert pointers(idx) == ["v00000000000000000002.json", "v00000000000000000003.json"]
    for seg in v1["segments"]:
        assert not (idx / "segments" / seg["id"]).exists()


def test_many_refreshes_merge_segments(tmp_path: Path) -> None:
    idx = str(tmp_path / "idx")
    keys = []
    for n in range(index.MAX_SEGMENTS + 3):
        keys.append(data_file(tmp_path, f"f{n}.orc", [n]))
        index.refresh(idx, keys, LOCAL)
    fs = LOCAL
    version, segments = index_storage.load_pointer(fs, idx)
    assert len(segments) <= index.MAX_SEGMENTS
    t = index.read(idx, ["a"], keys)
    assert t.column("a__min").to_pylist() == list(range(len(keys)))


def test_object_store_style_filesystem(tmp_path: Path) -> None:
    """Works on a filesystem without directories or rename (fsspec memory://)."""
    k = data_file(tmp_path, "f.orc", [3, 4])
    uri = f"memory://idx-{uuid.uuid4().hex}"
    try:
        r = index.refresh(uri, [k], LOCAL)
        assert r.added == 1
        row = index.read(uri, ["a"], [k]).to_pylist()[0]
        assert (row["a__min"], row["a__max"]) == (3, 4)
    finally:
        fsspec.filesystem("memory").rm(uri.replace("memory://", "/"), recursive=True)


def test_unreadable_files_are_left_out_and_kept(tmp_path: Path) -> None:
    good = data_file(tmp_path, "good.orc", [1])
    bad_path = tmp_path / "bad.orc"
    bad_path.write_bytes(b"this is not ORC")
    bad = FileKey.from_info(LOCAL.info(str(bad_path)))
    idx = str(tmp_path / "idx")
    r = index.refresh(idx, [good, bad], LOCAL)
    assert r.added == 1 and len(r.failed) == 1 and "bad.orc" in r.failed[0][1]
    t = index.read(idx, ["a"], [good, bad])
    keep = might_match(parse_sql_where("a = 100"), t, pa.schema([("a", pa.int64())]))
    assert keep.to_pylist() == [False, True]
    # it is retried on the next refresh
    assert index.refresh(idx, [good, bad], LOCAL).failed != ()


def test_a_column_whose_type_changed(tmp_path: Path) -> None:
    ints = write_orc(tmp_path / "old.orc", pa.table({"c": pa.array([1, 2], pa.int64())}))
    strs = write_orc(tmp_path / "new1.orc", pa.table({"c": ["x", "y"]}))
    strs2 = write_orc(tmp_path / "new2.orc", pa.table({"c": ["a", "b"]}))
    keys = index.file_keys(LOCAL, [ints, strs, strs2])
    idx = str(tmp_path / "idx")
    index.refresh(idx, keys, LOCAL)
    t = index.read(idx, ["c"], keys)
    assert t.column("c__min").to_pylist() == [None, "x", "a"]  # the minority is unknown
    keep = might_match(parse_sql_where("c = 'q'"), t, pa.schema([("c", pa.string())]))
    assert keep.to_pylist() == [True, False, False]


def test_file_key_from_info() -> None:
    assert FileKey.from_info({"name": "b/x", "size": 3, "ETag": '"abc"', "mtime": 5}) == FileKey(
        "b/x", 3, "abc"
    )
    assert FileKey.from_info({"name": "x", "size": 3, "mtime": 5.5}).version == "5.5"
    when = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)
    assert FileKey.from_info({"name": "x", "size": 1, "LastModified": when}).version == (
        "2024-01-01T00:00:00+00:00"
    )
    assert FileKey.from_info({"name": "x", "size": None}).size == 0


def test_in_memory_stats_table_matches_the_stored_one(tmp_path: Path) -> None:
    k1 = data_file(tmp_path, "f1.orc", [1, None, 3])
    k2 = data_file(tmp_path, "f2.parquet", [-4], kind="parquet")
    idx = str(tmp_path / "idx")
    index.refresh(idx, [k1, k2], LOCAL)
    stored = index.read(idx, ["a", "s"], [k1, k2])
    stats = [read_file_stats(LOCAL, k.path) for k in (k1, k2)]
    memory = index.read_file_stats_table(stats, ["a", "s"], [k1, k2])
    assert memory.to_pylist() == stored.to_pylist()


def test_duplicate_paths_with_different_keys_are_rejected(tmp_path: Path) -> None:
    k = data_file(tmp_path, "f.orc", [1])
    with pytest.raises(ValueError, match="listed twice"):
        index.refresh(str(tmp_path / "idx"), [k, FileKey(k.path, k.size + 1, "")], LOCAL)
