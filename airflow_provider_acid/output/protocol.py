"""The snapshot commit protocol: plan, per-bucket results, verification, manifest, ``_SUCCESS``.

Layout of an output folder (``OUT``)::

    OUT/<k=v>/.../part-<snapshot>-<bucket:05d>-<n:04d>.parquet   data files
    OUT/_snapshots/<snapshot>/plan.json      what the snapshot will hold (written first)
    OUT/_snapshots/<snapshot>/manifest.json  the commit point (written last, never changed)
    OUT/_snapshots/<snapshot>/_SUCCESS       marker beside it
    OUT/_SUCCESS                             marker naming the latest snapshot (JSON)

How it keeps its promises without renames (object stores have none):

* Files of a snapshot are named after it (``part-<snapshot>-``): that name prefix is its
  staging area. A data file belongs to a snapshot only once a committed manifest lists it;
  readers that go through manifests never see a half-written snapshot.
* The manifest is one object written in one PUT (locally: a hidden temporary file renamed
  over it), after every listed file has been checked on storage (present, size, Parquet footer
  row count) and every bucket reconciled (rows written = rows read - invalid - deleted -
  filtered). A run that dies before it leaves no manifest: nothing is committed.
* Snapshot ids are a hash of the source (table root, write-id list, each slice's files) and of
  the output settings, so a re-run plans the same snapshot, writes the same file names over any
  leftovers, and, once committed, returns the committed result instead of writing again.
* Before the manifest is written, the commit deletes leftover data files: its own snapshot's
  files that no bucket result lists, and files of snapshots that never committed and were
  planned before this one. With a fresh ``OUT``, the committed snapshot is therefore exactly
  the Parquet files outside paths starting with ``_`` or ``.``: ``pyarrow.dataset`` or DuckDB
  pointed at ``OUT`` read it and nothing else.
* Incremental snapshots reuse, by reference, the files of buckets whose source files did not
  change since the latest committed snapshot: the new manifest lists the old file paths. Those
  files must stay while a kept manifest lists them; :func:`expire_snapshots` removes only what
  no kept manifest references. Once ``OUT`` holds several snapshots, a plain folder read sees
  the union of their files: read through the latest manifest, or expire down to one snapshot.
* One writer per ``OUT`` at a time (in Airflow: ``max_active_runs=1`` for the DAG writing it).
"""

from __future__ import annotations

import datetime as dt
import json
import posixpath
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import pyarrow.parquet as pq
from fsspec import AbstractFileSystem

from ..acid.listing import resolve_filesystem
from ..acid.storage import write_whole
from .records import (
    DATA_FILE_NAME,
    BucketResult,
    CommitError,
    ExpireResult,
    OutputFile,
    SnapshotPlan,
    SnapshotResult,
    _now,
)

SNAPSHOTS_DIR = "_snapshots"
PLAN_FILE = "plan.json"
MANIFEST_FILE = "manifest.json"
SUCCESS_FILE = "_SUCCESS"

# -- storage helpers -------------------------------------------------------------------------


def snapshot_dir(out_root: str, snapshot_id: str) -> str:
    return posixpath.join(out_root, SNAPSHOTS_DIR, snapshot_id)


def _get_json(fs: AbstractFileSystem, path: str) -> dict[str, Any] | None:
    try:
        raw = fs.cat_file(path)
    except FileNotFoundError:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return None  # not a complete object: never committed


def write_plan(fs: AbstractFileSystem, plan: SnapshotPlan) -> str:
    """Store the plan (before any data file); returns its path."""
    path = posixpath.join(snapshot_dir(plan.out, plan.snapshot_id), PLAN_FILE)
    write_whole(fs, path, json.dumps(plan.to_dict(), indent=1, sort_keys=True).encode())
    return path


def read_plan(fs: AbstractFileSystem, out_root: str, snapshot_id: str) -> SnapshotPlan:
    """The stored plan of a snapshot; an error naming the folder if there is none."""
    path = posixpath.join(snapshot_dir(out_root, snapshot_id), PLAN_FILE)
    data = _get_json(fs, path)
    if data is None:
        raise CommitError(
            f"no plan for snapshot {snapshot_id} at {path}: plan the snapshot first "
            "(plan_snapshot) with the same output folder"
        )
    return SnapshotPlan.from_dict(data)


def read_manifest(fs: AbstractFileSystem, out_root: str, snapshot_id: str) -> SnapshotResult | None:
    """The committed snapshot ``snapshot_id`` of ``out_root``, or None if it is not committed."""
    path = posixpath.join(snapshot_dir(out_root, snapshot_id), MANIFEST_FILE)
    data = _get_json(fs, path)
    if data is None:
        return None
    return SnapshotResult.from_manifest(data, out_root, path, newly_committed=False)


def committed_snapshots(fs: AbstractFileSystem, out_root: str) -> list[SnapshotResult]:
    """Every committed snapshot of ``out_root``, oldest first (by commit sequence)."""
    pattern = posixpath.join(out_root, SNAPSHOTS_DIR, "*", MANIFEST_FILE)
    found = []
    for path in fs.glob(pattern):
        sid = posixpath.basename(posixpath.dirname(path))
        result = read_manifest(fs, out_root, sid)
        if result is not None:
            found.append(result)
    return sorted(found, key=lambda r: (r.sequence, r.committed_at))


def latest_snapshot(
    out_uri: str,
    *,
    committed_before: dt.datetime | str | None = None,
    out_filesystem: AbstractFileSystem | None = None,
    storage_options: dict[str, Any] | None = None,
) -> SnapshotResult | None:
    """The most recently committed snapshot under ``out_uri`` (None if there is none).

    With ``committed_before`` (a datetime or ISO text), only snapshots committed earlier
    count: a re-run of a scheduled interval then sees what the first run saw."""
    fs, root = resolve_filesystem(out_uri, out_filesystem, storage_options)
    snapshots = committed_snapshots(fs, root)
    if committed_before is not None:
        limit = _as_utc(committed_before)
        snapshots = [s for s in snapshots if _as_utc(s.committed_at) < limit]
    return snapshots[-1] if snapshots else None


def _is_hidden_path(relative: str) -> bool:
    return any(part.startswith(("_", ".")) for part in relative.split("/"))


def _data_files(fs: AbstractFileSystem, out_root: str) -> dict[str, str]:
    """Data files below ``out_root`` outside hidden paths: relative path -> snapshot id."""
    prefix = out_root.rstrip("/") + "/"
    try:
        found = fs.find(out_root)
    except FileNotFoundError:
        return {}
    files = {}
    for path in found:
        relative = path[len(prefix) :] if path.startswith(prefix) else path
        if _is_hidden_path(relative):
            continue
        match = DATA_FILE_NAME.match(posixpath.basename(relative))
        if match:
            files[relative] = match["snapshot"]
    return files


def _verify_file(
    fs: AbstractFileSystem, out_root: str, file: OutputFile, footer: bool
) -> str | None:
    """None if the file is on storage as recorded, else what is wrong."""
    path = posixpath.join(out_root, file.path)
    try:
        size = int(fs.info(path)["size"])
    except FileNotFoundError:
        return f"{file.path} is missing"
    if size != file.size:
        return f"{file.path} holds {size} bytes, {file.size} recorded"
    if footer:
        try:
            with fs.open(path, "rb") as handle:
                rows = pq.ParquetFile(handle).metadata.num_rows
        except Exception as exc:  # noqa: BLE001 - any unreadable footer is a failed check
            return f"{file.path} has no readable Parquet footer ({exc})"
        if rows != file.rows:
            return f"{file.path} holds {rows} rows, {file.rows} recorded"
    return None


# -- the commit ------------------------------------------------------------------------------


def _gather_results(
    plan: SnapshotPlan, bucket_results: Iterable[BucketResult | Mapping[str, Any]]
) -> list[BucketResult]:
    given: dict[str, BucketResult] = {}
    for item in bucket_results:
        result = item if isinstance(item, BucketResult) else BucketResult.from_dict(item)
        if result.slice_key in given and given[result.slice_key] != result:
            raise CommitError(f"two different results for slice {result.slice_key}")
        given[result.slice_key] = result
    unexpected = sorted(set(given) - set(plan.slice_keys))
    if unexpected:
        raise CommitError(
            f"results for slices not planned in snapshot {plan.snapshot_id}: {unexpected}"
        )
    results, missing = [], []
    for planned in plan.slices:
        result = given.get(planned.key) or planned.reused
        if result is None:
            missing.append(planned.key)
            continue
        if result.reused_from is None and result.snapshot_id != plan.snapshot_id:
            raise CommitError(
                f"slice {planned.key}: result of snapshot {result.snapshot_id}, "
                f"not {plan.snapshot_id}"
            )
        if result.fingerprint != planned.fingerprint:
            raise CommitError(
                f"slice {planned.key}: result computed from other source files than planned "
                "(the table changed under the snapshot; plan again)"
            )
        results.append(result)
    if missing:
        raise CommitError(
            f"snapshot {plan.snapshot_id} lacks results for {len(missing)} slice(s): {missing}"
        )
    return results


def _verify_all(fs: AbstractFileSystem, out_root: str, results: Sequence[BucketResult]) -> None:
    checks = [(f, r.reused_from is None) for r in results for f in r.files]
    with ThreadPoolExecutor(max_workers=8) as pool:
        problems = [
            p
            for p in pool.map(lambda c: _verify_file(fs, out_root, c[0], c[1]), checks)
            if p is not None
        ]
    if problems:
        shown = "; ".join(problems[:5]) + (" ..." if len(problems) > 5 else "")
        raise CommitError(f"{len(problems)} file(s) do not verify under {out_root}: {shown}")
    for result in results:
        result.check_reconciled()


def _remove_leftovers(
    fs: AbstractFileSystem,
    out_root: str,
    plan: SnapshotPlan,
    results: Sequence[BucketResult],
    committed: set[str],
) -> list[str]:
    """Delete data files no commit will ever list (see the module docstring)."""
    referenced = {f.path for r in results for f in r.files}
    plans: dict[str, str | None] = {}
    doomed = []
    for relative, sid in _data_files(fs, out_root).items():
        if relative in referenced or sid in committed:
            continue
        if sid != plan.snapshot_id:
            if sid not in plans:
                try:
                    plans[sid] = read_plan(fs, out_root, sid).created_at
                except CommitError:
                    plans[sid] = None
            started = plans[sid]
            if started is not None and started >= plan.created_at:
                continue  # planned after this one: maybe another writer still at work
        doomed.append(relative)
    for relative in doomed:
        fs.rm_file(posixpath.join(out_root, relative))
    return doomed


def commit_snapshot(
    out_uri: str,
    snapshot_id: str,
    bucket_results: Iterable[BucketResult | Mapping[str, Any]],
    *,
    plan: SnapshotPlan | None = None,
    out_filesystem: AbstractFileSystem | None = None,
    storage_options: dict[str, Any] | None = None,
) -> SnapshotResult:
    """Verify every part of a snapshot, reconcile it, and write its manifest (the commit point).

    ``bucket_results`` are the :func:`compact_slice` results (objects or their ``to_dict()``);
    buckets the plan reuses may be left out. Committing a snapshot twice returns the first
    commit (``newly_committed`` False). Raises :class:`CommitError` (or
    :class:`ReconciliationError`) without committing anything when a part is missing, does not
    match the plan, is not on storage as recorded, or does not add up.
    """
    fs, root = resolve_filesystem(out_uri, out_filesystem, storage_options)
    existing = read_manifest(fs, root, snapshot_id)
    if existing is not None:
        return existing
    if plan is None:
        plan = read_plan(fs, root, snapshot_id)
    elif plan.snapshot_id != snapshot_id:
        raise CommitError(f"plan is for snapshot {plan.snapshot_id}, not {snapshot_id}")
    results = _gather_results(plan, bucket_results)
    _verify_all(fs, root, results)

    earlier = committed_snapshots(fs, root)
    _remove_leftovers(fs, root, plan, results, {s.snapshot_id for s in earlier})
    manifest_path = posixpath.join(snapshot_dir(root, snapshot_id), MANIFEST_FILE)
    result = SnapshotResult(
        snapshot_id=snapshot_id,
        out=root,
        manifest_path=manifest_path,
        sequence=(earlier[-1].sequence + 1) if earlier else 1,
        committed_at=_now(),
        table=plan.table,
        write_ids=plan.write_ids,
        txns=plan.txns,
        insert_only=plan.insert_only,
        settings=plan.settings,
        buckets=tuple(results),
        previous_snapshot_id=earlier[-1].snapshot_id if earlier else None,
        newly_committed=True,
        max_write_id=plan.max_write_id,
        definition=plan.definition,
        warnings=plan.warnings,
    )
    manifest = json.dumps(result.to_dict(), indent=1, sort_keys=True).encode()
    write_whole(fs, manifest_path, manifest)  # the commit point
    write_whole(fs, posixpath.join(snapshot_dir(root, snapshot_id), SUCCESS_FILE), b"")
    pointer = {"snapshot_id": snapshot_id, "manifest": posixpath.relpath(manifest_path, root)}
    write_whole(fs, posixpath.join(root, SUCCESS_FILE), json.dumps(pointer).encode())
    return result


def last_committed_write_id(
    out_uri: str,
    *,
    committed_before: dt.datetime | str | None = None,
    out_filesystem: AbstractFileSystem | None = None,
    storage_options: dict[str, Any] | None = None,
) -> int:
    """The highest source write id of the latest snapshot committed under ``out_uri`` (0 when
    there is none): the watermark above which new deltas mean a new snapshot is due.

    With ``committed_before`` (a datetime or ISO text), only snapshots committed earlier
    count: a re-run of a scheduled interval then waits for the same deltas as the first run.
    """
    latest = latest_snapshot(
        out_uri,
        committed_before=committed_before,
        out_filesystem=out_filesystem,
        storage_options=storage_options,
    )
    return latest.max_write_id if latest is not None else 0


def _as_utc(value: dt.datetime | str) -> dt.datetime:
    if isinstance(value, str):
        value = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.timezone.utc)
    return value.astimezone(dt.timezone.utc)


def reuse_candidates(
    fs: AbstractFileSystem, out_root: str, table: str
) -> tuple[str | None, dict[str, BucketResult]]:
    """From the latest committed snapshot of the same table: slice key -> its bucket result,
    for buckets whose files are all still on storage as recorded."""
    snapshots = [s for s in committed_snapshots(fs, out_root) if s.table == table]
    if not snapshots:
        return None, {}
    latest = snapshots[-1]
    present = {}
    prefix = out_root.rstrip("/") + "/"
    for path, info in fs.find(out_root, detail=True).items():
        name = info.get("name", path)
        present[name[len(prefix) :] if name.startswith(prefix) else name] = int(
            info.get("size") or 0
        )
    usable = {}
    for bucket in latest.buckets:
        if all(present.get(f.path) == f.size for f in bucket.files):
            usable[bucket.slice_key] = replace(
                bucket, reused_from=bucket.reused_from or latest.snapshot_id
            )
    return latest.snapshot_id, usable


def expire_snapshots(
    out_uri: str,
    *,
    keep: int = 1,
    out_filesystem: AbstractFileSystem | None = None,
    storage_options: dict[str, Any] | None = None,
) -> ExpireResult:
    """Keep the newest ``keep`` committed snapshots; remove older manifests and every data file
    no kept manifest references (files of snapshots planned after the newest kept commit, which
    may still be in progress, are left alone)."""
    if keep < 1:
        raise ValueError("keep must be at least 1: the latest snapshot is never expired")
    fs, root = resolve_filesystem(out_uri, out_filesystem, storage_options)
    snapshots = committed_snapshots(fs, root)
    kept, expired = snapshots[-keep:], snapshots[:-keep]
    referenced = {f.path for s in kept for f in s.files}
    kept_ids = {s.snapshot_id for s in kept}
    newest_commit = kept[-1].committed_at if kept else ""
    removed_files = []
    for relative, sid in _data_files(fs, root).items():
        if relative in referenced or sid in kept_ids:
            continue
        if sid not in {s.snapshot_id for s in expired}:
            try:
                if read_plan(fs, root, sid).created_at > newest_commit:
                    continue
            except CommitError:
                pass
        fs.rm_file(posixpath.join(root, relative))
        removed_files.append(relative)
    for snapshot in expired:
        fs.rm(snapshot_dir(root, snapshot.snapshot_id), recursive=True)
    return ExpireResult(
        tuple(s.snapshot_id for s in kept),
        tuple(s.snapshot_id for s in expired),
        tuple(sorted(removed_files)),
    )
