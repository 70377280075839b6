"""The snapshot commit protocol: plan, per-bucket results, verification, manifest, ``_SUCCESS``.

Layout of an output folder (``OUT``)::

    OUT/<k=v>/.../part-<snapshot>-<bucket:05d>-<n:04d>.parquet   data files
    OUT/_snapshots/<snapshot>/plan.json      what the snapshot will hold (written first)
    OUT/_snapshots/<snapshot>/manifest.json  the commit point (written last, never changed)
    OUT/_snapshots/<snapshot>/_SUCCESS       marker beside it
    OUT/_SUCCESS                             marker naming the latest snapshot (JSON)
    OUT/_commits/<sequence>-<snapshot>       the commit log: an empty entry per commit
    OUT/_snapshots/_commit.lock              held while a commit or an expiry runs

How it keeps its promises without relying on renames (object stores have none):

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
* No file is visible half-written (:mod:`.parquet_files`, :mod:`..acid.storage`): locally each
  data file, plan and manifest is written under a hidden temporary name and renamed into place;
  on object stores an object appears when its upload completes. Before its commit, a folder
  reader can therefore see complete data files of a snapshot that no manifest lists yet (and,
  while they are not removed, complete files of a killed run); for readers that must see
  committed snapshots only, read through the manifest or publish to a table format
  (:mod:`.sinks`). Temporaries of killed writers are removed by the next run of the same
  snapshot (each bucket's writer, and the commit for the manifest's), by later commits (those
  of snapshots that never committed) and by :func:`expire_snapshots`.
* Each commit logs itself before its manifest (:mod:`.commit_log`), so the latest snapshot is
  found from one listing and one manifest, not by reading every manifest; and a commit's
  listing of ``OUT`` (for the leftovers above) skips the folders of the logged snapshots where
  folders are listed one by one (HDFS), so it does not grow with the snapshots kept; nor does
  an incremental plan's look-up of the files it would reuse (:func:`.reuse.reuse_candidates`).
* Commits and expiries of one ``OUT`` are serialised by a lock object created only if absent
  (:mod:`.commit_lock`). A second writer waits for it; the same snapshot then returns the
  first commit, another one commits after it with the next sequence, or fails to verify if
  what it reused was expired meanwhile. Writers of data files need no lock: a duplicate of a
  bucket writes the same bytes under the same names.
"""

from __future__ import annotations

import datetime as dt
import json
import posixpath
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pyarrow.parquet as pq
from fsspec import AbstractFileSystem

from ..acid.footers import FooterError, SizeMismatchError, TailFile, read_tail
from ..acid.listing import find_files, resolve_filesystem
from ..acid.storage import (
    TEMPORARY_NAME,
    is_object_store,
    read_whole,
    remove_temporaries,
    remove_temporary,
    renames_atomically,
    renames_whole,
    write_whole,
)
from .background_uploads import StoredUploads
from .commit_lock import DEFAULT_WAIT, commit_lock
from .commit_log import (
    LogEntry,
    commit_listing,
    log_commit,
    log_dir,
    newest,
    next_sequence,
    read_log,
)
from .paths import (
    MANIFEST_FILE,
    PLAN_FILE,
    SNAPSHOTS_DIR,
    SUCCESS_FILE,
    snapshot_dir,
)
from .records import (
    DATA_FILE_NAME,
    BucketResult,
    CommitError,
    OutputFile,
    SnapshotPlan,
    SnapshotResult,
    utc_now,
)

# -- storage helpers -------------------------------------------------------------------------


def _get_json(fs: AbstractFileSystem, path: str) -> dict[str, Any] | None:
    try:
        raw = read_whole(fs, path)
    except FileNotFoundError:
        return None
    # Plans and manifests are stored whole (write_whole): one that does not parse is damaged.
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise CommitError(f"{path}: damaged, not a JSON document ({exc})") from None
    if not isinstance(data, dict):
        raise CommitError(f"{path}: damaged, not a JSON object")
    return data


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
    try:
        plan = SnapshotPlan.from_dict(data)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise CommitError(f"{path}: damaged plan ({type(exc).__name__}: {exc})") from None
    if plan.snapshot_id != snapshot_id:
        raise CommitError(f"{path}: damaged plan, of snapshot {plan.snapshot_id!r}")
    return plan


def read_manifest(fs: AbstractFileSystem, out_root: str, snapshot_id: str) -> SnapshotResult | None:
    """The committed snapshot ``snapshot_id`` of ``out_root``, or None if it is not committed."""
    path = posixpath.join(snapshot_dir(out_root, snapshot_id), MANIFEST_FILE)
    data = _get_json(fs, path)
    if data is None:
        return None
    try:
        result = SnapshotResult.from_manifest(data, out_root, path, newly_committed=False)
    except CommitError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise CommitError(f"{path}: damaged manifest ({type(exc).__name__}: {exc})") from None
    if result.snapshot_id != snapshot_id:
        raise CommitError(f"{path}: damaged manifest, of snapshot {result.snapshot_id!r}")
    return result


def committed_snapshots(fs: AbstractFileSystem, out_root: str) -> list[SnapshotResult]:
    """Every committed snapshot of ``out_root``, oldest first (by commit sequence): every
    manifest is read (:func:`latest_committed` reads one, as a rule)."""
    pattern = posixpath.join(out_root, SNAPSHOTS_DIR, "*", MANIFEST_FILE)
    found = []
    for path in fs.glob(pattern):
        sid = posixpath.basename(posixpath.dirname(path))
        result = read_manifest(fs, out_root, sid)
        if result is not None:
            found.append(result)
    return sorted(found, key=lambda r: (r.sequence, r.committed_at))


def latest_committed(
    fs: AbstractFileSystem,
    out_root: str,
    accept: Callable[[SnapshotResult], bool] | None = None,
) -> SnapshotResult | None:
    """The newest committed snapshot of ``out_root`` that ``accept`` takes (None: none).

    From the commit log (:mod:`.commit_log`): newest entry first, so one listing and, as a
    rule, one manifest read. Every manifest is read only when no logged snapshot is taken (a
    snapshot committed before the log began may be), or while the log is empty.

    :param fs: the output folder's filesystem.
    :param out_root: the output folder.
    :param accept: the test the snapshot must pass (None: the newest).
    """
    entries = read_log(fs, out_root)
    found = newest(entries, lambda sid: read_manifest(fs, out_root, sid), accept)
    if found is not None:
        return found
    logged = {e.snapshot_id for e in entries}
    older = [
        s
        for s in committed_snapshots(fs, out_root)
        if s.snapshot_id not in logged and (accept is None or accept(s))
    ]
    return older[-1] if older else None


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
    if committed_before is None:
        return latest_committed(fs, root)
    limit = _as_utc(committed_before)
    return latest_committed(fs, root, lambda s: _as_utc(s.committed_at) < limit)


def _is_hidden_path(relative: str) -> bool:
    return any(part.startswith(("_", ".")) for part in relative.split("/"))


def data_files_below(
    fs: AbstractFileSystem,
    out_root: str,
    *,
    temporaries: bool = False,
    found: list[str] | None = None,
) -> dict[str, str]:
    """Data files below ``out_root`` outside hidden paths: relative path -> snapshot id.

    :param fs: the output folder's filesystem.
    :param out_root: the output folder.
    :param temporaries: give the hidden temporaries data files are written under instead.
    :param found: the files below ``out_root`` when already listed (None: listed here).
    """
    prefix = out_root.rstrip("/") + "/"
    if found is None:
        found = find_files(fs, out_root)
    files = {}
    for path in found:
        relative = path[len(prefix) :] if path.startswith(prefix) else path
        folder, name = posixpath.split(relative)
        if folder and _is_hidden_path(folder):
            continue
        if temporaries:
            temporary = TEMPORARY_NAME.match(name)
            name = temporary["name"] if temporary else ""
        elif name.startswith(("_", ".")):
            continue
        match = DATA_FILE_NAME.match(name)
        if match:
            files[relative] = match["snapshot"]
    return files


def cached_verdicts(predicate: Callable[[str], bool]) -> Callable[[str], bool]:
    """``predicate`` asked once per snapshot id (it reads a plan).

    :param predicate: a test of a snapshot id.
    """
    verdicts: dict[str, bool] = {}

    def cached(sid: str) -> bool:
        if sid not in verdicts:
            verdicts[sid] = predicate(sid)
        return verdicts[sid]

    return cached


def _verify_file(
    fs: AbstractFileSystem, out_root: str, file: OutputFile, footer: bool
) -> str | None:
    """None if the file is on storage as recorded, else what is wrong. On an object store its
    size is checked by the read of its footer (one request, no ``HEAD``; a ``HEAD`` more only
    to word a size that differs)."""
    path = posixpath.join(out_root, file.path)
    handle: Any = None
    if footer and is_object_store(fs):
        try:
            handle = TailFile(read_tail(fs, path, file.size, exact=True), fs)
        except FileNotFoundError:
            return f"{file.path} is missing"
        except SizeMismatchError:
            pass  # its size, below
        except FooterError as exc:
            return f"{file.path} has no readable Parquet footer ({exc})"
    if handle is None:
        try:
            size = int(fs.info(path)["size"])
        except FileNotFoundError:
            return f"{file.path} is missing"
        if size != file.size:
            return f"{file.path} holds {size} bytes, {file.size} recorded"
    if not footer:
        return None
    try:
        with handle or fs.open(path, "rb") as opened:
            rows = pq.ParquetFile(opened).metadata.num_rows
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


def _verify_all(
    fs: AbstractFileSystem,
    out_root: str,
    results: Sequence[BucketResult],
    written_now: frozenset[str] = frozenset(),
) -> None:
    """Check every file of ``results`` (:func:`_verify_file`), except ``written_now``: paths
    whose uploads by this process complete under the commit's lock."""
    checks = [
        (f, r.reused_from is None)
        for r in results
        for f in r.files
        if posixpath.join(out_root, f.path) not in written_now
    ]
    if renames_atomically(fs) or len(checks) < 2:  # a local disk answers at once: no threads
        found = [_verify_file(fs, out_root, file, footer) for file, footer in checks]
    else:  # remote storage: the requests at once
        with ThreadPoolExecutor(max_workers=8) as pool:
            found = list(pool.map(lambda c: _verify_file(fs, out_root, c[0], c[1]), checks))
    problems = [p for p in found if p is not None]
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
    found: list[str],
) -> list[str]:
    """Delete data files no commit will ever list (see the module docstring), and the
    temporaries of killed writers of other snapshots (this snapshot's own are its writers').
    ``found``: every file below ``out_root`` (:func:`_find`)."""
    referenced = {f.path for r in results for f in r.files}

    def planned_later(sid: str) -> bool:
        if sid == plan.snapshot_id:
            return False
        try:
            started = read_plan(fs, out_root, sid).created_at
        except CommitError:
            return False
        return started >= plan.created_at  # planned after this one: maybe still at work

    in_progress = cached_verdicts(planned_later)
    doomed = [
        relative
        for relative, sid in data_files_below(fs, out_root, found=found).items()
        if relative not in referenced and sid not in committed and not in_progress(sid)
    ]
    doomed += [
        relative
        for relative, sid in data_files_below(fs, out_root, temporaries=True, found=found).items()
        if sid != plan.snapshot_id and not in_progress(sid)
    ]
    removed = []
    for relative in doomed:
        path = posixpath.join(out_root, relative)
        if _is_temporary(relative):
            if remove_temporary(fs, path):
                removed.append(relative)
        else:
            remove_file(fs, path)
            removed.append(relative)
    return removed


def _is_temporary(relative: str) -> bool:
    return TEMPORARY_NAME.match(posixpath.basename(relative)) is not None


def remove_file(fs: AbstractFileSystem, path: str) -> None:
    """Remove ``path``; one already gone (another cleaner was first) is no error.

    :param fs: its filesystem.
    :param path: the file.
    """
    try:
        fs.rm_file(path)
    except FileNotFoundError:  # another cleaner was first
        pass


def remove_commit_temporaries(fs: AbstractFileSystem, root: str, snapshot_id: str) -> None:
    """Remove the temporaries of the manifest and markers a killed commit left (under the
    commit lock: no other commit is writing them).

    :param fs: the output folder's filesystem.
    :param root: the output folder.
    :param snapshot_id: the snapshot whose commit left them.
    """
    if is_object_store(fs):  # objects are written whole: no temporaries, nothing to list
        return
    remove_temporaries(fs, root, lambda name: name == SUCCESS_FILE)
    remove_temporaries(
        fs, snapshot_dir(root, snapshot_id), lambda name: name in (MANIFEST_FILE, SUCCESS_FILE)
    )
    if renames_whole(fs):  # the log's entries too, of any killed commit (none on object stores)
        remove_temporaries(fs, log_dir(root))


def _write_markers(fs: AbstractFileSystem, root: str, result: SnapshotResult) -> None:
    pointer = {
        "snapshot_id": result.snapshot_id,
        "manifest": posixpath.relpath(result.manifest_path, root),
    }
    markers = [
        (posixpath.join(snapshot_dir(root, result.snapshot_id), SUCCESS_FILE), b""),
        (posixpath.join(root, SUCCESS_FILE), json.dumps(pointer).encode()),
    ]
    if renames_atomically(fs):  # a local disk answers at once
        for path, data in markers:
            write_whole(fs, path, data)
        return
    # remote storage: both at once, one round trip (a commit killed between them is finished
    # by the next one, which finds the snapshot's own marker missing)
    with ThreadPoolExecutor(max_workers=2) as pool:
        list(pool.map(lambda marker: write_whole(fs, *marker), markers))


def _finish_commit(fs: AbstractFileSystem, root: str, existing: SnapshotResult) -> None:
    """What a commit killed after its manifest left undone: its temporaries, its markers."""
    remove_commit_temporaries(fs, root, existing.snapshot_id)
    if not fs.exists(posixpath.join(snapshot_dir(root, existing.snapshot_id), SUCCESS_FILE)):
        latest = latest_committed(fs, root)
        if latest is not None and latest.snapshot_id == existing.snapshot_id:
            # killed between its manifest and its markers
            _write_markers(fs, root, existing)


def complete_commit(
    fs: AbstractFileSystem,
    root: str,
    snapshot_id: str,
    *,
    lock_wait: float = DEFAULT_WAIT,
    committed: SnapshotResult | None = None,
) -> SnapshotResult | None:
    """The committed snapshot ``snapshot_id`` (None if not committed), after finishing what a
    commit killed after its manifest left: its markers, and where files are renamed into place
    its temporaries (under the commit lock). On object stores, where there are no temporaries,
    a committed snapshot whose markers are all there costs one existence check.

    :param fs: the output folder's filesystem.
    :param root: the output folder.
    :param snapshot_id: the snapshot.
    :param lock_wait: seconds to wait for the commit lock, if it is needed.
    :param committed: its manifest, read already (not read again).
    """
    existing = committed if committed is not None else read_manifest(fs, root, snapshot_id)
    if existing is None:
        return None
    marker = posixpath.join(snapshot_dir(root, snapshot_id), SUCCESS_FILE)
    if renames_atomically(fs) or not fs.exists(marker):
        with commit_lock(fs, root, f"completing the commit of {snapshot_id}", wait=lock_wait):
            _finish_commit(fs, root, existing)
    return existing


def commit_snapshot(
    out_uri: str,
    snapshot_id: str,
    bucket_results: Iterable[BucketResult | Mapping[str, Any]],
    *,
    plan: SnapshotPlan | None = None,
    out_filesystem: AbstractFileSystem | None = None,
    storage_options: dict[str, Any] | None = None,
    lock_wait: float = DEFAULT_WAIT,
    files_stored: StoredUploads | None = None,
) -> SnapshotResult:
    """Verify every part of a snapshot, reconcile it, and write its manifest (the commit point).

    ``bucket_results`` are the :func:`compact_slice` results (objects or their ``to_dict()``);
    buckets the plan reuses may be left out. Committing a snapshot twice returns the first
    commit (``newly_committed`` False). Raises :class:`CommitError` (or
    :class:`ReconciliationError`) without committing anything when a part is missing, does not
    match the plan, is not on storage as recorded, or does not add up. The commit holds the
    output folder's commit lock (:mod:`.commit_lock`); :class:`.commit_lock.CommitLockError`
    when another writer holds it longer than ``lock_wait`` seconds.

    :param out_uri: the output folder.
    :param snapshot_id: the planned snapshot.
    :param bucket_results: the slices' results.
    :param plan: its plan (None: read from the output folder).
    :param out_filesystem: the output's filesystem (None: from ``out_uri``).
    :param storage_options: fsspec options for ``out_uri``.
    :param lock_wait: seconds to wait for another writer's lock.
    :param files_stored: uploads still completing (see
        :func:`.background_uploads.uploads_in_background`): under the lock, the files stored
        already are checked while it waits for the others, and those whose uploads complete
        under the lock are not read back; it raises the first upload's error.
    """
    fs, root = resolve_filesystem(out_uri, out_filesystem, storage_options)
    with commit_lock(fs, root, f"commit of snapshot {snapshot_id}", wait=lock_wait):
        return _commit_locked(fs, root, snapshot_id, bucket_results, plan, files_stored)


def _commit_locked(
    fs: AbstractFileSystem,
    root: str,
    snapshot_id: str,
    bucket_results: Iterable[BucketResult | Mapping[str, Any]],
    plan: SnapshotPlan | None,
    files_stored: StoredUploads | None = None,
) -> SnapshotResult:
    def read(sid: str) -> SnapshotResult | None:
        return read_manifest(fs, root, sid)

    def checked() -> tuple[SnapshotPlan, list[BucketResult]]:
        known = read_plan(fs, root, snapshot_id) if plan is None else plan
        if known.snapshot_id != snapshot_id:
            raise CommitError(f"plan is for snapshot {known.snapshot_id}, not {snapshot_id}")
        results = _gather_results(known, bucket_results)
        if files_stored is None:
            _verify_all(fs, root, results)
            return known, results
        # The files stored already are checked while the others' uploads complete. Those
        # complete under this lock, written whole by this process, are not read back: no
        # other writer can have removed them (removing takes the lock).
        with ThreadPoolExecutor(max_workers=1) as pool:
            verified = pool.submit(_verify_all, fs, root, results, files_stored.waiting())
            files_stored()
            verified.result()
        return known, results

    if is_object_store(fs):  # the three look-ups at once (and with the files' last uploads)
        with ThreadPoolExecutor(max_workers=2) as pool:
            looked_up = pool.submit(read_manifest, fs, root, snapshot_id)
            listed = pool.submit(commit_listing, fs, root, snapshot_id, read)
            try:
                plan, results = checked()
            except Exception:
                if looked_up.result() is None:  # (committed before: returned below)
                    raise
            existing = looked_up.result()
            listing = listed.result() if existing is None else None
    else:  # a local disk or HDFS: only what a commit not made yet needs, in turn
        existing = read_manifest(fs, root, snapshot_id)
        if existing is None:
            plan, results = checked()
            listing = commit_listing(fs, root, snapshot_id, read)
    if existing is not None:
        _finish_commit(fs, root, existing)
        return existing
    found, entries, committed, latest = listing
    _remove_leftovers(fs, root, plan, results, committed, found)
    manifest_path = posixpath.join(snapshot_dir(root, snapshot_id), MANIFEST_FILE)
    entry = LogEntry(next_sequence(entries), snapshot_id)
    result = SnapshotResult(
        snapshot_id=snapshot_id,
        out=root,
        manifest_path=manifest_path,
        sequence=entry.sequence,
        committed_at=utc_now(),
        table=plan.table,
        write_ids=plan.write_ids,
        txns=plan.txns,
        insert_only=plan.insert_only,
        settings=plan.settings,
        buckets=tuple(results),
        previous_snapshot_id=latest.snapshot_id if latest else None,
        newly_committed=True,
        max_write_id=plan.max_write_id,
        definition=plan.definition,
        warnings=plan.warnings,
    )
    manifest = json.dumps(result.to_dict(), indent=1, sort_keys=True).encode()
    remove_commit_temporaries(fs, root, snapshot_id)
    log_commit(fs, root, entry)  # before the commit point: its sequence is never reused
    write_whole(fs, manifest_path, manifest)  # the commit point
    _write_markers(fs, root, result)
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
