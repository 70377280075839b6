"""The columnar paths of ``index.read`` and ``build_manifest`` against plain per-file references.

``index.read`` joins records to files by ordinal (or by path, in segments written before
ordinals existed) and skips work when things line up; ``build_manifest`` collects the
snapshot in columns and picks slices vectorised. Both are checked here, on random
snapshots and indexes with several segments, against straightforward per-file code:
a dict lookup per file, and step 4 as one set lookup per file.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from typing import Any

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_provider_acid.acid.listing import StoredFile
from airflow_provider_acid.acid.read_view import FileRole, TableReadView
from airflow_provider_acid.acid.resolution import resolve_files
from airflow_provider_acid.pruning import index, index_format, index_storage
from airflow_provider_acid.pruning.evaluator import might_match
from airflow_provider_acid.pruning.index import FILES_SCHEMA, RECORD_SCHEMA, FileKey
from airflow_provider_acid.pruning.manifest import build_manifest, file_key, parse_predicate
from airflow_provider_acid.pruning.partition_stats import (
    partition_arrays as _partition_arrays,
)
from airflow_provider_acid.pruning.partition_stats import (
    with_partition_columns as _with_partition_columns,
)
from airflow_provider_acid.pruning.predicates import bind, referenced_columns

ROOT = "/warehouse/t"
COLUMNS = {"c00": "int", "c01": "float", "c02": "string", "c03": "mixed"}
SCHEMA = pa.schema(
    [
        ("c00", pa.int64()),
        ("c01", pa.float64()),
        ("c02", pa.string()),
        ("c03", pa.int64()),
        ("dt", pa.string()),
    ]
)
SUFFIX = {"int": "int", "float": "float", "string": "str"}
PREDICATES = [
    "c00 < 300",
    "c00 = 512",
    "c01 > 0.9",
    "c02 >= 'w'",
    "c02 = 'q'",
    "c03 > 900",
    "c00 < 100 AND c01 > 0.5",
    "c00 > 990 OR c02 < 'b'",
    "dt = '2024-01-02' AND c00 < 500",
    "dt IN ('2024-01-01', '2024-01-04') OR c01 < 0.05",
    "dt = '2024-01-03'",
    "c00 IS NULL",
    "c02 LIKE 'k%'",
]


def synthetic_files(rng: random.Random) -> list[StoredFile]:
    """Partitions of three kinds: base + deltas + delete deltas, originals only, and
    originals followed by deltas; a few buckets each."""
    files = []

    def add(path: str) -> None:
        files.append(StoredFile(path, rng.randint(1, 10_000), rng.choice(["v1", "v2", None])))

    for p in range(1, 6):
        part = f"{ROOT}/dt=2024-01-0{p}"
        kind = p % 3
        for b in range(rng.randint(1, 4)):
            if kind == 0:
                add(f"{part}/base_0000001/bucket_{b:05d}")
            else:
                add(f"{part}/{b:06d}_0")
                if rng.random() < 0.5:
                    add(f"{part}/{b:06d}_0_copy_1")
            if kind != 1:
                for w in range(2, 2 + rng.randint(0, 3)):
                    add(f"{part}/delta_{w:07d}_{w:07d}_0000/bucket_{b:05d}")
                if rng.random() < 0.7:
                    add(f"{part}/delete_delta_0000009_0000009_0000/bucket_{b:05d}")
    return files


def record(path: str, column: str, kind: str, rng: random.Random) -> dict[str, Any]:
    family = kind if kind != "mixed" else ("int" if rng.random() < 0.7 else "string")
    rec: dict[str, Any] = {
        "path": path,
        "column": column,
        "type": {"int": "bigint", "float": "double", "string": "string"}[family],
        "family": family,
        "row_count": 100,
        "null_count": rng.choice([0, 0, 3, None]),
        "value_count": 100,
        "nan_count": 0 if family == "float" else None,
        "bounds_known": True,
    }
    if rng.random() < 0.1:  # bounds unknown for this file
        rec["bounds_known"] = False
        return rec
    if family == "int":
        lo = rng.randint(0, 1000)
        bounds = (lo, lo + rng.randint(0, 50))
    elif family == "float":
        lo = rng.random()
        bounds = (lo, lo + 0.05)
    else:
        first = rng.choice("abcdefghijklmnopqrstuvwxyz")
        bounds = (first + "a", first + "z")
    rec[f"min_{SUFFIX[family]}"], rec[f"max_{SUFFIX[family]}"] = bounds
    return rec


def write_random_index(uri: str, snapshot: TableReadView, rng: random.Random) -> None:
    """Four segments: one as written before records had ordinals, three with ordinals (in
    order; shuffled; shuffled with some missing). Some files are not indexed, some are
    indexed with another size or version."""
    fs, root = index_storage.index_filesystem(uri, None)
    keys = [file_key(f) for s in snapshot.slices for f in s.data_files]
    rng.shuffle(keys)
    segments: list[list[FileKey]] = [[], [], [], []]
    for key in keys:
        draw = rng.random()
        if draw < 0.08:
            continue  # not indexed
        if draw < 0.12:
            key = FileKey(key.path, key.size + 1, key.version)
        elif draw < 0.15:
            key = FileKey(key.path, key.size, key.version + "-old")
        segments[rng.randrange(len(segments))].append(key)
    pointer = []
    for n, seg_keys in enumerate(segments):
        if not seg_keys:
            continue
        files = pa.Table.from_pylist(
            [
                {"path": k.path, "size": k.size, "version": k.version, "row_count": 100}
                for k in seg_keys
            ],
            schema=FILES_SCHEMA,
        )
        columns = {}
        for column, kind in COLUMNS.items():
            recs = [record(k.path, column, kind, rng) for k in seg_keys]
            if n == 0 and rng.random() < 0.5 or n >= 2:
                rng.shuffle(recs)
            if n == 3:
                recs = recs[: int(len(recs) * 0.8)]
            columns[column] = pa.Table.from_pylist(recs, schema=RECORD_SCHEMA)
        if n == 0:  # the layout before ordinals: no file_ordinal, no flag in the pointer
            seg_id = f"seg-legacy-{rng.randrange(10**9)}"
            base = f"{root}/segments/{seg_id}"
            fs.makedirs(base, exist_ok=True)
            dirs = {}
            for column, table in columns.items():
                d = index_storage._column_dir(column)
                fs.makedirs(f"{base}/{d}", exist_ok=True)
                pq.write_table(table, f"{base}/{d}/stats.parquet")
                dirs[column] = d
            pq.write_table(files, f"{base}/files.parquet")
            pointer.append({"id": seg_id, "files": files.num_rows, "columns": dirs})
        else:
            pointer.append(index_storage.write_segment(fs, root, files, columns))
    index._publish(fs, root, 1, pointer)


# -- the references ----------------------------------------------------------------------------


def reference_read(uri: str, columns: list[str], keys: list[FileKey] | None) -> list[dict]:
    """``index.read`` one file at a time: dict lookups on paths."""
    fs, root = index_storage.index_filesystem(uri, None)
    _, segments = index_storage.load_pointer(fs, root)
    indexed: list[dict] = []
    records: dict[str, dict[tuple[int, str], dict]] = {c.lower(): {} for c in columns}
    for i, seg in enumerate(segments):
        indexed += [
            dict(r, seg=i) for r in index_storage.read_segment_files(fs, root, seg).to_pylist()
        ]
        for col in records:
            table = index_storage._read_segment_column(fs, root, seg, col)
            for rec in [] if table is None else table.to_pylist():
                records[col].setdefault((i, rec["path"]), rec)
    by_path: dict[str, dict] = {}
    for row in indexed:
        by_path.setdefault(row["path"], row)
    families = {}
    for col, recs in records.items():
        counts = Counter(
            r["family"] for r in recs.values() if r["family"] in index_format.FAMILY_SUFFIX
        )
        families[col] = max(sorted(counts), key=lambda f: counts[f]) if counts else None
    wanted = (
        keys if keys is not None else [FileKey(r["path"], r["size"], r["version"]) for r in indexed]
    )
    out = []
    for key in wanted:
        row = by_path.get(key.path)
        if keys is None:
            row = indexed[len(out)]
        elif row is not None and (row["size"], row["version"] or "") != (key.size, key.version):
            row = None
        result = {
            "path": key.path,
            "size": key.size,
            "version": key.version,
            "row_count": None if row is None else row["row_count"],
        }
        for name in columns:
            rec = None if row is None else records[name.lower()].get((row["seg"], row["path"]))
            family = families[name.lower()]
            for stat, field in (("nulls", "null_count"), ("values", "value_count")):
                result[f"{name}__{stat}"] = None if rec is None else rec[field]
            result[f"{name}__nans"] = None if rec is None else rec["nan_count"]
            same = rec is not None and family is not None and rec["family"] == family
            for side in ("min", "max"):
                value = rec[f"{side}_{index_format.FAMILY_SUFFIX[family]}"] if same else None
                result[f"{name}__{side}"] = value
        out.append(result)
    return out


def reference_manifest(
    snapshot: TableReadView, expr: Any, uri: str | None, granularity: str
) -> dict[str, Any]:
    """Steps 1 to 4 as they were first written: Python passes over the files, step 4 a set
    lookup per file; the stats come from :func:`reference_read`."""
    keys = list(snapshot.partition_keys())
    columns = [c for c in referenced_columns(expr) if c.lower() not in {k.lower() for k in keys}]
    parts = snapshot.partitions
    part_values = _partition_arrays(parts, SCHEMA, keys)
    part_table = _with_partition_columns(
        pa.table({"row_count": pa.nulls(len(parts), pa.int64())}), part_values, None
    )
    part_kept = might_match(expr, part_table, SCHEMA).to_pylist()
    kept_index = [i for i, keep in enumerate(part_kept) if keep]
    files = [f for i in kept_index for s in parts[i].slices for f in s.data_files]
    file_partition = [i for i in kept_index for s in parts[i].slices for _ in s.data_files]
    if uri and files and columns:
        rows = reference_read(uri, columns, [file_key(f) for f in files])
        stats = pa.Table.from_pylist(rows)
    else:
        stats = pa.table(
            {
                "path": pa.array([f.path for f in files], pa.string()),
                "row_count": pa.nulls(len(files), pa.int64()),
            }
        )
    row_counts = stats.column("row_count").combine_chunks()
    index_of = pa.array(file_partition, pa.int64())
    file_values = {k: v.take(index_of) for k, v in part_values.items()}
    stats = _with_partition_columns(stats, file_values, row_counts)
    mask = might_match(expr, stats, SCHEMA).to_pylist() if files else []
    candidates = {f.path for f, keep in zip(files, mask, strict=True) if keep}
    if not columns:
        not_indexed = 0
    elif uri:
        not_indexed = stats.column("row_count").null_count
    else:
        not_indexed = len(files)
    prefix = snapshot.root.rstrip("/") + "/"

    def entry(f: Any) -> dict[str, Any]:
        return {
            "path": f.path[len(prefix) :] if f.path.startswith(prefix) else f.path,
            "size": f.file.size,
            "role": f.role.value,
            "candidate": f.path in candidates or f.role is FileRole.DELETE_DELTA,
        }

    kept = []
    for i in kept_index:
        part = parts[i]
        for s in part.slices:
            if not any(f.path in candidates for f in s.data_files):
                continue
            if granularity == "slice":
                chosen = s.files
            else:
                originals = s.original_files
                if not any(f.path in candidates for f in originals):
                    originals = ()
                others = tuple(f for f in s.base_files + s.delta_files if f.path in candidates)
                chosen = originals + others + s.delete_delta_files
            kept.append(
                {
                    "key": s.key,
                    "partition": part.partition.path,
                    "partition_values": part.partition.as_dict(),
                    "bucket": s.bucket_id,
                    "files": [entry(f) for f in chosen],
                }
            )
    metrics = {
        "partitions_total": len(parts),
        "partitions_kept": len({k["partition"] for k in kept}),
        "slices_total": len(snapshot.slices),
        "slices_kept": len(kept),
        "files_total": len([f for s in snapshot.slices for f in s.data_files]),
        "files_candidate": len(candidates),
        "files_not_indexed": not_indexed,
        "bytes_total": sum(s.size for s in snapshot.slices),
        "bytes_kept": sum(f["size"] for k in kept for f in k["files"]),
    }
    return {"slices": kept, "metrics": metrics}


# -- the checks --------------------------------------------------------------------------------


@pytest.fixture(params=range(6))
def random_case(request, tmp_path):
    rng = random.Random(request.param)
    snapshot = resolve_files(ROOT, synthetic_files(rng))
    uri = str(tmp_path / "index")
    write_random_index(uri, snapshot, rng)
    return snapshot, uri, rng


def test_read_matches_a_per_file_reference(random_case):
    snapshot, uri, rng = random_case
    keys = [file_key(f) for s in snapshot.slices for f in s.data_files]
    keys.append(FileKey(ROOT + "/never/indexed", 1, ""))
    rng.shuffle(keys)
    columns = ["c00", "C01", "c02", "c03", "missing"]
    for wanted in (keys, keys[: len(keys) // 2], None):
        got = index.read(uri, columns, wanted).to_pylist()
        assert got == reference_read(uri, columns, wanted)
        if wanted is not None:  # the same from a keys table
            table = pa.table(
                {
                    "path": [k.path for k in wanted],
                    "size": [k.size for k in wanted],
                    "version": [k.version for k in wanted],
                }
            )
            assert index.read(uri, columns, table).to_pylist() == got


def test_read_of_an_aligned_request_is_the_same(tmp_path):
    """Files requested in the order they were indexed take the shortcut; same answer."""
    rng = random.Random(11)
    snapshot = resolve_files(ROOT, synthetic_files(rng))
    keys = [file_key(f) for s in snapshot.slices for f in s.data_files]
    uri = str(tmp_path / "index")
    files = pa.Table.from_pylist(
        [{"path": k.path, "size": k.size, "version": k.version, "row_count": 100} for k in keys],
        schema=FILES_SCHEMA,
    )
    recs = [record(k.path, "c00", "int", rng) for k in keys]
    index.write_tables(uri, files, {"c00": pa.Table.from_pylist(recs, schema=RECORD_SCHEMA)})
    changed = list(keys)
    changed[3] = FileKey(keys[3].path, keys[3].size + 1, keys[3].version)  # unknown now
    for wanted in (keys, changed, None):
        assert index.read(uri, ["c00"], wanted).to_pylist() == reference_read(uri, ["c00"], wanted)
    assert index.read(uri, ["c00"], changed).column("row_count").null_count == 1


@pytest.mark.parametrize("granularity", ["slice", "file"])
def test_build_manifest_matches_the_per_file_reference(random_case, granularity):
    snapshot, uri, _ = random_case
    for where in PREDICATES:
        expr = bind(parse_predicate(where), SCHEMA)
        for index_uri in (uri, None):
            manifest = build_manifest(snapshot, expr, SCHEMA, index_uri, granularity=granularity)
            expected = reference_manifest(snapshot, expr, index_uri, granularity)
            got = manifest.to_dict()
            assert got["slices"] == expected["slices"], (where, index_uri)
            metrics = {k: got["metrics"][k] for k in expected["metrics"]}
            assert metrics == expected["metrics"], (where, index_uri)


def test_record_ordinals_are_rewritten_with_the_segment(tmp_path):
    """A segment rewritten without some files gets fresh ordinals (stale ones would point
    at the wrong files)."""
    fs = fsspec.filesystem("file")
    rng = random.Random(3)
    snapshot = resolve_files(ROOT, synthetic_files(rng))
    keys = [file_key(f) for s in snapshot.slices for f in s.data_files]
    uri = str(tmp_path / "index")
    files = pa.Table.from_pylist(
        [{"path": k.path, "size": k.size, "version": k.version} for k in keys],
        schema=FILES_SCHEMA,
    )
    recs = [record(k.path, "c00", "int", rng) for k in keys]
    index.write_tables(uri, files, {"c00": pa.Table.from_pylist(recs, schema=RECORD_SCHEMA)})
    _, root = index_storage.index_filesystem(uri, None)
    _, (seg,) = index_storage.load_pointer(fs, root)
    keep = pa.array([i % 3 != 0 for i in range(len(keys))])
    rewritten = index_storage.filter_segment(
        fs, root, seg, index_storage.read_segment_files(fs, root, seg), keep
    )
    index._publish(fs, root, 2, [rewritten])
    assert rewritten["file_ordinals"] is True
    stored = index_storage._read_segment_column(fs, root, rewritten, "c00")
    assert stored.column(index_format.ORDINAL).to_pylist() == list(range(stored.num_rows))
    assert index.read(uri, ["c00"], keys).to_pylist() == reference_read(uri, ["c00"], keys)


def test_version_1_segments_are_read_and_merged_into_version_2(random_case):
    """A version 1 pointer (records joined on path) reads the same; merged with version 2
    segments, the records get ordinals and the answers do not change."""
    snapshot, uri, _ = random_case
    fs = fsspec.filesystem("file")
    _, root = index_storage.index_filesystem(uri, None)
    version, segments = index_storage.load_pointer(fs, root)
    keys = [file_key(f) for s in snapshot.slices for f in s.data_files]
    columns = ["c00", "c01", "c02", "c03"]
    before = index.read(uri, columns, keys).to_pylist()
    assert before == reference_read(uri, columns, keys)

    legacy = [seg for seg in segments if not seg.get("file_ordinals")]
    doc = {"format": index.FORMAT_NAME, "format_version": 1, "segments": legacy}
    with fs.open(index_storage.pointer_path(root, version + 1), "w") as f:
        json.dump(doc, f)
    assert index.read(uri, columns, keys).to_pylist() == reference_read(uri, columns, keys)

    merged = index_storage.merge_segments(fs, root, segments)
    index._publish(fs, root, version + 2, [merged])
    assert merged["file_ordinals"] is True
    assert index.read(uri, columns, keys).to_pylist() == before
    newest = json.loads(fs.cat_file(index_storage.pointer_path(root, version + 2)))
    assert newest["format_version"] == index.FORMAT_VERSION == 2


def test_a_newer_format_is_refused(tmp_path):
    fs = fsspec.filesystem("file")
    root = str(tmp_path / "index")
    fs.makedirs(f"{root}/_pointers")
    doc = {"format": index.FORMAT_NAME, "format_version": index.FORMAT_VERSION + 1}
    with fs.open(index_storage.pointer_path(root, 1), "w") as f:
        json.dump(doc, f)
    with pytest.raises(index.IndexFormatError, match="this code reads up to"):
        index.read(root, ["c00"])
