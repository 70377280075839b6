"""Hive 3's ``AcidUtils.getAcidState`` for one partition: the base and deltas a reader sees.

1. Folders whose compactor transaction (``_vT``) the transaction list does not show are skipped.
2. The base is the newest valid one. A compacted base (``_vT`` or ``_metadata_acid``) is valid
   when no write at or below it is open; an insert-overwrite base when its own write is
   committed. Older bases are obsolete. Bases present but none valid, and the oldest one
   compacted: the reader's view is older than the history kept (an error, as in Hive).
3. Original (pre-ACID) files are obsolete once there is a base.
4. Deltas with no valid write are dropped (aborted or not yet committed). The rest, ordered
   by (min ascending, max descending, statement), are walked once: a delta is kept when it adds
   writes past the last kept one, when it is another statement of the last kept write, or when
   it is the delete delta twin of the last kept delta; anything else is covered and obsolete.
5. Kept files are grouped into bucket slices per (partition, bucket id).

A partition's choice (its :class:`Plan`) depends on its folder names only, so partitions laid
out alike share one (:mod:`.alike_partitions` builds on that).
"""

from __future__ import annotations

from dataclasses import dataclass

from .listing import StoredFile
from .listing_groups import Folder, PartitionListing, bucket_id_of
from .names import (
    BaseDir,
    DeltaDir,
)
from .partitions import Partition
from .read_view import (
    AcidLayoutError,
    BucketSlice,
    ChosenDelta,
    DataFile,
    ExcludedEntry,
    ExclusionReason,
    FileKind,
    FileRole,
    NotEnoughHistoryError,
    PartitionReadView,
    set_base_files,
    set_delete_delta_files,
    set_delta_files,
    set_kind,
    set_original_files,
    set_partition,
    set_slice_bucket_id,
)
from .writeids import RangeValidity, ValidTxnList, ValidWriteIdList

# -- the walk --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Plan:
    """What resolving a partition chose, by folder name: partitions nearly always name their
    folders alike, and then choose alike (the choice depends on the names, on whether a base
    holds ``_metadata_acid``, and on the write-id and transaction lists only)."""

    base: str | None
    #: The chosen deltas in reading order: (name, validity, invalid write ids).
    deltas: tuple[tuple[str, RangeValidity, tuple[int, ...]], ...]
    #: The folders left out: (name, reason, detail).
    excluded: tuple[tuple[str, ExclusionReason, str], ...]


def _layout(listing: PartitionListing) -> tuple[tuple[str, bool], ...]:
    """The key of a partition's plan: its folder names, in listing order, and which of them
    hold ``_metadata_acid``."""
    return tuple(
        (name, "_metadata_acid" in folder.side_files) for name, folder in listing.folders.items()
    )


def _plan(
    listing: PartitionListing, write_ids: ValidWriteIdList, txns: ValidTxnList | None
) -> Plan:
    """Choose a partition's base and deltas (Hive's rules 1, 2 and 4)."""
    excluded: list[ExcludedEntry] = []
    folders = [f for f in listing.folders.values() if _visible(f, txns, excluded)]
    base = _choose_base(
        [f for f in folders if isinstance(f.dir, BaseDir)], write_ids, excluded, listing
    )
    deltas = _choose_deltas(
        [f for f in folders if isinstance(f.dir, DeltaDir)],
        base.dir.name if base else None,
        base.dir.write_id if base else 0,
        write_ids,
        excluded,
    )
    name_of = {folder.path: name for name, folder in listing.folders.items()}
    return Plan(
        base=base.dir.name if base else None,
        deltas=tuple((d.folder.name, d.validity, d.invalid_write_ids) for d in deltas),
        excluded=tuple((name_of[e.path], e.reason, e.detail) for e in excluded),
    )


def resolve_partition(
    listing: PartitionListing,
    write_ids: ValidWriteIdList,
    txns: ValidTxnList | None,
    plans: dict[tuple[tuple[str, bool], ...], Plan] | None = None,
) -> PartitionReadView:
    """Resolve one partition; ``plans`` (by :func:`_layout`, for the same write-id and
    transaction lists) saves choosing again for partitions laid out alike.

    :param listing: the partition's grouped listing.
    :param write_ids: the reader's write-id list.
    :param txns: the reader's transaction list (None: every compactor folder visible).
    :param plans: plans chosen before, by layout (None: choose afresh).
    """
    folders = listing.folders
    if plans is None:
        plan = _plan(listing, write_ids, txns)
    else:
        layout = _layout(listing)
        plan = plans.get(layout)
        if plan is None:
            plan = plans[layout] = _plan(listing, write_ids, txns)
    excluded = [
        ExcludedEntry(folders[name].path, reason, detail) for name, reason, detail in plan.excluded
    ]
    base = folders[plan.base] if plan.base is not None else None

    originals = sorted(listing.originals, key=lambda f: f.path)
    if base and originals:
        excluded.extend(
            ExcludedEntry(
                f.path, ExclusionReason.OBSOLETE, f"original file covered by {base.dir.name}"
            )
            for f in originals
        )
        originals = []

    deltas = []
    for name, validity, invalid in plan.deltas:
        folder = folders[name]
        deltas.append(ChosenDelta(folder.dir, folder.path, validity, invalid))  # type: ignore[arg-type]
    slices = _bucket_slices(listing.partition, originals, base, deltas, folders)
    return PartitionReadView(
        partition=listing.partition,
        base=base.dir if base else None,
        base_path=base.path if base else None,
        deltas=tuple(deltas),
        slices=slices,
        excluded=tuple(sorted(excluded, key=lambda e: e.path)) if excluded else (),
    )


def _visible(folder: Folder, txns: ValidTxnList | None, excluded: list[ExcludedEntry]) -> bool:
    txn = folder.dir.visibility_txn_id
    if txn is None or txns is None or txns.is_valid(txn):
        return True
    if txns.is_aborted(txn):
        excluded.append(
            ExcludedEntry(
                folder.path, ExclusionReason.ABORTED, f"compactor transaction {txn} aborted"
            )
        )
    else:
        excluded.append(
            ExcludedEntry(
                folder.path,
                ExclusionReason.NOT_VISIBLE,
                f"compactor transaction {txn} not yet visible",
            )
        )
    return False


def _base_is_valid(folder: Folder, write_ids: ValidWriteIdList) -> bool:
    if folder.is_compacted_base:
        return write_ids.is_valid_base(folder.dir.write_id)
    return write_ids.is_valid(folder.dir.write_id)  # insert overwrite: a write like any other


def _choose_base(
    bases: list[Folder],
    write_ids: ValidWriteIdList,
    excluded: list[ExcludedEntry],
    listing: PartitionListing,
) -> Folder | None:
    if not bases:
        return None
    bases = sorted(bases, key=lambda f: f.dir.write_id, reverse=True)
    chosen = next((f for f in bases if _base_is_valid(f, write_ids)), None)
    for folder in bases:
        if folder is chosen:
            continue
        if chosen is not None and folder.dir.write_id < chosen.dir.write_id:
            excluded.append(
                ExcludedEntry(
                    folder.path, ExclusionReason.OBSOLETE, f"older than {chosen.dir.name}"
                )
            )
        else:
            kind = "compacted base" if folder.is_compacted_base else "insert-overwrite base"
            excluded.append(
                ExcludedEntry(
                    folder.path,
                    ExclusionReason.INVALID_BASE,
                    f"{kind} not valid for write-id list {write_ids} "
                    "(a write at or below it is open, aborted or above the high watermark)",
                )
            )
    oldest = bases[-1]
    if chosen is None and oldest.is_compacted_base:
        invalid = sorted(set(write_ids.open_ids) | set(write_ids.aborted_ids))
        first_invalid = str(invalid[0]) if invalid else "x"
        raise NotEnoughHistoryError(
            f"Not enough history available for ({write_ids.high_watermark},{first_invalid}). "
            f"Oldest available base: {oldest.path}"
        )
    return chosen


def _choose_deltas(
    deltas: list[Folder],
    base_name: str | None,
    base_write: int,
    write_ids: ValidWriteIdList,
    excluded: list[ExcludedEntry],
) -> list[ChosenDelta]:
    working: list[tuple[Folder, RangeValidity]] = []
    for folder in deltas:
        delta: DeltaDir = folder.dir  # type: ignore[assignment]
        validity = write_ids.range_validity(delta.min_write_id, delta.max_write_id)
        if validity is not RangeValidity.NONE:
            working.append((folder, validity))
        elif write_ids.is_range_aborted(delta.min_write_id, delta.max_write_id):
            excluded.append(
                ExcludedEntry(
                    folder.path, ExclusionReason.ABORTED, "every write in its range aborted"
                )
            )
        else:
            excluded.append(
                ExcludedEntry(
                    folder.path,
                    ExclusionReason.NOT_VISIBLE,
                    f"no committed write in its range for write-id list {write_ids}",
                )
            )
    working.sort(key=lambda folder_validity: folder_validity[0].dir.sort_key)

    chosen: list[ChosenDelta] = []
    current = base_write  # the highest write the kept folders cover
    single_write_statement: int | None = None  # set while the last advance was one write
    previous: DeltaDir | None = None
    kept: dict[tuple, str] = {}
    for folder, validity in working:
        delta: DeltaDir = folder.dir  # type: ignore[no-redef]
        identity = (delta.kind, delta.min_write_id, delta.max_write_id, delta.statement_id)
        last_kept = previous.name if previous else base_name
        reason = None  # "covered by" the last kept folder, unless set
        if identity in kept:
            keep, reason = False, f"duplicate of {kept[identity]}"
        elif delta.max_write_id > current:
            if delta.min_write_id <= current:
                raise AcidLayoutError(
                    f"{folder.path} (writes {delta.min_write_id}..{delta.max_write_id}) overlaps "
                    f"{last_kept} (writes up to {current}) "
                    "without covering it: Hive never writes such ranges, and reading both "
                    "would duplicate rows"
                )
            keep = write_ids.range_validity(current + 1, delta.max_write_id) is not (
                RangeValidity.NONE
            )
            if keep:
                current = delta.max_write_id
                single_write_statement = (
                    delta.statement_id if delta.min_write_id == delta.max_write_id else None
                )
            else:
                reason = f"no valid write past {last_kept}"
        elif delta.min_write_id == delta.max_write_id == current:
            # another statement of the same multi-statement write
            keep = single_write_statement is not None and delta.statement_id is not None
        else:
            keep = False
        if (
            not keep
            and previous is not None
            and previous.kind is not delta.kind
            and identity not in kept
            and delta.same_range_and_statement(previous)
        ):
            keep = True  # the delete_delta twin of the delta just kept (or the reverse)
        if not keep:
            reason = reason or f"covered by {last_kept}"
            excluded.append(ExcludedEntry(folder.path, ExclusionReason.OBSOLETE, reason))
            continue
        kept[identity] = delta.name
        previous = delta
        invalid = (
            write_ids.invalid_ids_in(delta.min_write_id, delta.max_write_id)
            if validity is RangeValidity.SOME
            else ()
        )
        chosen.append(ChosenDelta(delta, folder.path, validity, invalid))
    return chosen


def _bucket_slices(
    partition: Partition,
    originals: list[StoredFile],
    base: Folder | None,
    deltas: list[ChosenDelta],
    folders: dict[str, Folder],
) -> tuple[BucketSlice, ...]:
    # the partition's chosen files by role, then by bucket, each bucket's in reading order
    original_files: dict[int, list[DataFile]] = {}
    for stored in originals:
        bucket = bucket_id_of(stored.name)
        data_file = DataFile(stored, FileRole.ORIGINAL, bucket)
        original_files.setdefault(bucket, []).append(data_file)
    base_files: dict[int, list[DataFile]] = {}
    if base is not None:
        _collect(base_files, base, ())
    delta_files: dict[int, list[DataFile]] = {}
    delete_delta_files: dict[int, list[DataFile]] = {}
    for chosen in deltas:
        folder = folders[chosen.folder.name]
        if chosen.folder.is_delete:
            _collect(delete_delta_files, folder, chosen.invalid_write_ids)
        else:
            _collect(delta_files, folder, chosen.invalid_write_ids)
    buckets = sorted({*original_files, *base_files, *delta_files, *delete_delta_files})
    slices = []
    new = object.__new__
    for bucket in buckets:
        # _new_bucket_slice(partition, bucket, ...), inline: this runs once per slice
        bucket_slice = new(BucketSlice)
        set_partition(bucket_slice, partition)
        set_slice_bucket_id(bucket_slice, bucket)
        files = original_files.get(bucket)
        set_original_files(bucket_slice, tuple(files) if files else ())
        files = base_files.get(bucket)
        set_base_files(bucket_slice, tuple(files) if files else ())
        files = delta_files.get(bucket)
        set_delta_files(bucket_slice, tuple(files) if files else ())
        files = delete_delta_files.get(bucket)
        set_delete_delta_files(bucket_slice, tuple(files) if files else ())
        slices.append(bucket_slice)
    return tuple(slices)


def _collect(
    files_by_bucket: dict[int, list[DataFile]],
    folder: Folder,
    invalid_write_ids: tuple[int, ...],
) -> None:
    """Add a chosen folder's data files to ``files_by_bucket``, each bucket's in path order."""
    data_files = folder.files
    if invalid_write_ids or folder.made_unmarked:
        kind = FileKind(folder.role, folder.dir, invalid_write_ids, folder.acid_version_marked)
        for data_file in data_files:  # still being made: their slots are set directly
            set_kind(data_file, kind)
    if not folder.in_path_order:
        data_files.sort(key=_path_of)  # stable: ties keep the listing's order
    for data_file in data_files:
        bucket = data_file.bucket_id
        in_bucket = files_by_bucket.get(bucket)
        if in_bucket is None:
            files_by_bucket[bucket] = [data_file]
        else:
            in_bucket.append(data_file)


def _path_of(data_file: DataFile) -> str:
    return data_file.file.path
