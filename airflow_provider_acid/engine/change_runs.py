"""A change feed run in steps, as a DAG maps it: plan, one task per slice, commit.

:func:`plan_feed` resolves the table at B and stores the plan (its slices are what the slice
tasks map over), :func:`compute_feed_slice` computes one slice on any worker (reading the table
with the plan's write-id list), :func:`commit_feed` verifies and commits them;
:func:`compute_changes` does the three in one process. A feed into a folder that holds feeds
starts at their watermark (the last B), and only there.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from fsspec import AbstractFileSystem

from ..acid.listing import resolve_filesystem
from ..acid.read_view import TableReadView
from ..acid.resolution import resolve_read_view
from ..acid.source import TableDefinition, TableSource
from ..acid.writeids import ValidWriteIdList
from ..output.protocol import commit_snapshot, complete_commit, read_manifest, read_plan
from ..output.records import BucketResult, CommitError, SnapshotPlan
from .change_diff import find_identity_snapshot
from .change_feed import (
    ChangeFeed,
    FeedOptions,
    change_counts,
    change_range_of,
    compute_slice,
    feed_watermark,
    plan_changes,
    resolve_at,
    slice_of,
)
from .change_pairs import pair_across_slices
from .change_rows import ChangeRange


def _start(
    out_root: str, out_fs: AbstractFileSystem, from_write_id: int | None
) -> tuple[int, int | None]:
    """A (the given one, else the watermark) and the watermark (None: no feed yet)."""
    delivered = feed_watermark(out_root, out_filesystem=out_fs)
    if from_write_id is None:
        if delivered is None:
            raise ValueError(
                f"{out_root} holds no feed yet: give --from-write-id (the write of the "
                "snapshot the feed applies to)"
            )
        return delivered, delivered
    return int(from_write_id), delivered


def plan_feed(
    table_uri: str | TableSource,
    out_uri: str,
    *,
    from_write_id: int | None = None,
    to_write_id: int | None = None,
    key: Iterable[str] = (),
    net: bool = False,
    delete_values: bool = True,
    identity_snapshot: str | None = None,
    write_ids: ValidWriteIdList | str | None = None,
    txns: Any = None,
    options: FeedOptions = FeedOptions(),  # noqa: B008 - frozen, shared safely
    filesystem: AbstractFileSystem | None = None,
    out_filesystem: AbstractFileSystem | None = None,
    storage_options: dict[str, Any] | None = None,
) -> SnapshotPlan:
    """Resolve the table at B and store the plan of the feed ``(from_write_id, B]``.

    :param table_uri: the table's location, or a :class:`TableSource` (by name).
    :param out_uri: the feed's output folder.
    :param from_write_id: A; by default the watermark of the feeds already in ``out_uri``.
    :param to_write_id: B; by default the write-id list's high watermark.
    :param key: the table's key columns (updates of a key are paired).
    :param net: leave out rows both inserted and deleted inside the range.
    :param delete_values: give each delete the deleted row's values (read from the file
        holding the row, mostly the base); False: its identity only, reading only the range's
        deltas (see :class:`ChangeRange`).
    :param identity_snapshot: an output folder holding the provider's snapshot at A written
        with identity columns, for partitions Hive compacted inside the range.
    :param write_ids: the write-id list (Hive's form); by default the source's.
    :param txns: the transaction list (Hive's form); by default the source's.
    :param options: how the files are written.
    :param filesystem: the table's fsspec filesystem.
    :param out_filesystem: the output's fsspec filesystem.
    :param storage_options: fsspec options for both.
    """
    return _planned(
        table_uri, out_uri, from_write_id=from_write_id, to_write_id=to_write_id, key=key,
        net=net, delete_values=delete_values, identity_snapshot=identity_snapshot,
        write_ids=write_ids, txns=txns, options=options, filesystem=filesystem,
        out_filesystem=out_filesystem, storage_options=storage_options,
    )[0]  # fmt: skip


def _planned(
    table_uri: str | TableSource,
    out_uri: str,
    *,
    from_write_id: int | None,
    to_write_id: int | None,
    key: Iterable[str],
    net: bool,
    delete_values: bool,
    identity_snapshot: str | None,
    write_ids: ValidWriteIdList | str | None,
    txns: Any,
    options: FeedOptions,
    filesystem: AbstractFileSystem | None,
    out_filesystem: AbstractFileSystem | None,
    storage_options: dict[str, Any] | None,
) -> tuple[SnapshotPlan, TableReadView, AbstractFileSystem, Any]:
    out_fs, out_root = resolve_filesystem(out_uri, out_filesystem, storage_options)
    start, delivered = _start(out_root, out_fs, from_write_id)
    snapshot, fs, warnings = resolve_at(
        table_uri, to_write_id, write_ids=write_ids, txns=txns,
        filesystem=filesystem, storage_options=storage_options,
    )  # fmt: skip
    change_range = ChangeRange(
        start, snapshot.write_ids.high_watermark, tuple(key), net, delete_values
    )
    plan, at_a = plan_changes(
        snapshot, fs, out_root, change_range, identity_snapshot=identity_snapshot,
        options=options, warnings=warnings, out_filesystem=out_fs,
    )  # fmt: skip
    if (
        read_manifest(out_fs, out_root, plan.snapshot_id) is None
        and delivered is not None
        and delivered != start
    ):
        raise ValueError(
            f"{out_uri} already holds changes up to write {delivered}: a feed into it must "
            f"start there (--from-write-id {delivered}), not at {start}"
        )
    return plan, snapshot, fs, at_a


def _plan_source(plan: SnapshotPlan) -> str | TableSource:
    if not plan.definition:
        return plan.table
    definition = TableDefinition.from_dict(plan.definition)
    return TableSource(plan.table, plan.write_ids, plan.txns, plan.insert_only, definition)


def compute_feed_slice(
    out_uri: str,
    feed_id: str,
    slice_key: str,
    *,
    storage_options: dict[str, Any] | None = None,
) -> BucketResult:
    """Compute one slice of a planned feed (the unit of a mapped task); no commit.

    :param out_uri: the feed's output folder.
    :param feed_id: the planned feed's id.
    :param slice_key: the slice (``<partition>#<bucket>``).
    :param storage_options: fsspec options.
    """
    out_fs, root = resolve_filesystem(out_uri, None, storage_options)
    committed = read_manifest(out_fs, root, feed_id)
    if committed is not None:
        return next(b for b in committed.buckets if b.slice_key == slice_key)
    plan = read_plan(out_fs, root, feed_id)
    planned = plan.planned(slice_key)
    fs, _ = resolve_filesystem(plan.table, None, storage_options)
    # the plan's lists, also for a table read by location (whose plan has no definition)
    snapshot = resolve_read_view(
        _plan_source(plan), plan.write_ids, plan.txns, insert_only=plan.insert_only, filesystem=fs
    )
    bucket_slice = slice_of(snapshot, plan, slice_key)
    if bucket_slice is None or {f.path for f in bucket_slice.files} != set(planned.files):
        raise CommitError(
            f"the files of slice {slice_key} of {plan.table} changed since feed {feed_id} was "
            "planned (Hive's Cleaner?): plan the feed again"
        )
    changes = plan.settings["changes"]
    at_a = None
    if changes["identity_snapshot_out"]:
        at_a = find_identity_snapshot(
            changes["identity_snapshot_out"],
            plan.table,
            change_range_of(plan).from_write_id,
            storage_options=storage_options,
        )
    return compute_slice(snapshot, bucket_slice, fs, out_fs, plan, at_a=at_a)


def commit_feed(
    out_uri: str,
    feed_id: str,
    results: Iterable[BucketResult | Mapping[str, Any]],
    *,
    out_filesystem: AbstractFileSystem | None = None,
    storage_options: dict[str, Any] | None = None,
) -> ChangeFeed:
    """Verify and commit a planned feed's slices (a committed feed is returned as it is);
    updates whose delete and insert fell into different slices are paired first
    (:func:`.change_pairs.pair_across_slices`).

    :param out_uri: the feed's output folder.
    :param feed_id: the planned feed's id.
    :param results: the slices' results (objects or their ``to_dict()``).
    :param out_filesystem: the output's fsspec filesystem.
    :param storage_options: fsspec options.
    """
    out_fs, root = resolve_filesystem(out_uri, out_filesystem, storage_options)
    committed = complete_commit(out_fs, root, feed_id)
    footers: dict[str, Any] = {}  # read once for the pairing and the counts
    if committed is None:
        plan = read_plan(out_fs, root, feed_id)
        given = [r if isinstance(r, BucketResult) else BucketResult.from_dict(r) for r in results]
        paired = pair_across_slices(
            out_fs, root, plan.settings["changes"]["key"], given, plan.settings, footers
        )
        committed = commit_snapshot(root, feed_id, paired, plan=plan, out_filesystem=out_fs)
    change_range = ChangeRange(
        int(committed.settings["changes"]["from_write_id"]), committed.max_write_id
    )
    return ChangeFeed(
        change_range.from_write_id,
        change_range.to_write_id,
        root,
        committed,
        change_counts(committed, out_fs, footers),
        tuple(committed.warnings),
        tuple(committed.settings["changes"].get("schema_changes", ())),
    )


def compute_changes(table_uri: str | TableSource, out_uri: str, **arguments: Any) -> ChangeFeed:
    """Plan, compute and commit the change feed in one process, the table listed once.

    :param table_uri: the table's location, or a :class:`TableSource` (by name).
    :param out_uri: the feed's output folder.
    :param arguments: :func:`plan_feed`'s keyword arguments (``from_write_id``,
        ``to_write_id``, ``key``, ``net``, ``delete_values``, ``identity_snapshot``, the
        lists, ``options`` and the filesystems).
    """
    known = dict.fromkeys(
        ("from_write_id", "to_write_id", "key", "net", "delete_values", "identity_snapshot",
         "write_ids", "txns", "filesystem", "out_filesystem", "storage_options"),
    )  # fmt: skip
    unknown = sorted(set(arguments) - set(known) - {"options"})
    if unknown:
        raise TypeError(f"compute_changes: unknown arguments {unknown}")
    given = {
        **known, "key": (), "net": False, "delete_values": True, "options": FeedOptions(),
        **arguments,
    }  # fmt: skip
    out_fs, root = resolve_filesystem(out_uri, given["out_filesystem"], given["storage_options"])
    plan, snapshot, fs, at_a = _planned(table_uri, root, **{**given, "out_filesystem": out_fs})
    results = []
    if complete_commit(out_fs, root, plan.snapshot_id) is None:
        results = [
            compute_slice(snapshot, slice_of(snapshot, plan, k), fs, out_fs, plan, at_a=at_a)
            for k in plan.keys_to_compute
        ]
    return commit_feed(root, plan.snapshot_id, results, out_filesystem=out_fs)


__all__ = ["commit_feed", "compute_changes", "compute_feed_slice", "plan_feed"]
