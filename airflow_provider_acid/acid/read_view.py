"""The read view: what a Hive reader with a given write-id list sees of a table.

A :class:`TableReadView` holds its partitions (:class:`PartitionReadView`: the chosen base and
deltas), their bucket slices (:class:`BucketSlice`, the unit of pruning and compaction) and the
slices' data files (:class:`DataFile`), with what was left out and why (:class:`ExcludedEntry`,
:class:`UnrecognisedEntry`); here too are the errors resolving one raises. Value objects only:
:mod:`.resolution` resolves them from a listing with Hive 3's rules, and
:mod:`.alike_partitions` makes those of partitions laid out alike from one template.

Words, as :mod:`airflow_provider_acid.output` uses them: the *read view* is the source table as
Hive shows it to one reader; a *plan* fixes what an output snapshot will hold; a *snapshot*
there is the committed output. :class:`TableReadView` and :class:`PartitionReadView` are read
views of the source (Hive's "snapshot" of its write-id list), never committed output.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import FrozenInstanceError, dataclass, fields
from enum import Enum
from operator import attrgetter
from typing import Any

from .listing import StoredFile
from .names import AcidDir, BaseDir, DeltaDir
from .partitions import Partition
from .source import TableDefinition
from .writeids import RangeValidity, ValidTxnList, ValidWriteIdList


class AcidLayoutError(ValueError):
    """Folders whose write ranges cannot come from Hive (partly overlapping ranges)."""


class NotEnoughHistoryError(RuntimeError):
    """The reader's write-id list predates the oldest base the table still keeps."""


class UnplacedFilesError(ValueError):
    """Files of the table that belong to no bucket slice: a snapshot would silently lack them."""

    def __init__(self, message: str, entries: Sequence[UnrecognisedEntry]) -> None:
        super().__init__(message)
        self.entries = tuple(entries)


class FileRole(str, Enum):
    BASE = "base"
    DELTA = "delta"
    DELETE_DELTA = "delete_delta"
    ORIGINAL = "original"


class ExclusionReason(str, Enum):
    OBSOLETE = "obsolete"
    ABORTED = "aborted"
    NOT_VISIBLE = "not_visible"
    INVALID_BASE = "invalid_base"


@dataclass(frozen=True, slots=True)
class FileKind:
    """What a data file is, apart from the file itself and its bucket: shared by the files of
    a folder (and of the folders alike of partitions laid out alike)."""

    role: FileRole
    folder: AcidDir | None
    invalid_write_ids: tuple[int, ...]
    acid_version_marked: bool


class DataFile:
    """A file of a snapshot with what the row reader needs to know about it.

    A frozen value object with the fields ``file``, ``role``, ``bucket_id``, ``folder``,
    ``invalid_write_ids`` (write ids inside the folder's range that the reader must not see:
    a partly valid range) and ``acid_version_marked`` (the folder holds
    ``_orc_acid_version``: ACID files that predate the footer marker). Made, compared, hashed,
    shown and pickled as the frozen dataclass it was; it keeps the file, the bucket and one
    shared :class:`FileKind` for the rest, so that a snapshot fills three slots a file, not
    six.
    """

    __slots__ = ("file", "bucket_id", "_kind")
    __match_args__ = (
        "file",
        "role",
        "bucket_id",
        "folder",
        "invalid_write_ids",
        "acid_version_marked",
    )
    file: StoredFile
    bucket_id: int
    _kind: FileKind

    def __init__(
        self,
        file: StoredFile,
        role: FileRole,
        bucket_id: int,
        folder: AcidDir | None = None,
        invalid_write_ids: tuple[int, ...] = (),
        acid_version_marked: bool = False,
    ) -> None:
        set_file(self, file)
        set_bucket_id(self, bucket_id)
        set_kind(self, FileKind(role, folder, invalid_write_ids, acid_version_marked))

    role: FileRole = property(attrgetter("_kind.role"))  # type: ignore[assignment]
    folder: AcidDir | None = property(attrgetter("_kind.folder"))  # type: ignore[assignment]
    invalid_write_ids: tuple[int, ...] = property(  # type: ignore[assignment]
        attrgetter("_kind.invalid_write_ids")
    )
    acid_version_marked: bool = property(  # type: ignore[assignment]
        attrgetter("_kind.acid_version_marked")
    )

    @property
    def path(self) -> str:
        return self.file.path

    def _fields(self) -> tuple[Any, ...]:
        kind = self._kind
        return (
            self.file,
            kind.role,
            self.bucket_id,
            kind.folder,
            kind.invalid_write_ids,
            kind.acid_version_marked,
        )

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return (
            self.file == other.file  # type: ignore[attr-defined]
            and self.bucket_id == other.bucket_id  # type: ignore[attr-defined]
            and self._kind == other._kind  # type: ignore[attr-defined]
        )

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        names = self.__match_args__
        shown = ", ".join(f"{n}={v!r}" for n, v in zip(names, self._fields(), strict=True))
        return f"{self.__class__.__qualname__}({shown})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (self.__class__, self._fields())

    def __setattr__(self, name: str, value: Any) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")


set_file = DataFile.file.__set__  # type: ignore[attr-defined]
set_bucket_id = DataFile.bucket_id.__set__  # type: ignore[attr-defined]
set_kind = DataFile._kind.__set__  # type: ignore[attr-defined]
DATA_FILE_SETTERS = (set_file, set_bucket_id, set_kind)


@dataclass(frozen=True)
class ExcludedEntry:
    """A folder or file that is present but not part of the snapshot, with the reason."""

    path: str
    reason: ExclusionReason
    detail: str


@dataclass(frozen=True)
class UnrecognisedEntry:
    """A non-hidden file inside the table that cannot be placed in any bucket slice.

    Hive never writes these layouts: a file nested inside a base or delta folder, a file other
    than ``bucket_N`` in a delete delta, a delete delta of an insert-only table, a partition or
    base/delta folder below a folder that is neither (reading such files as original files
    would lose their partition values or write ids), or a partition folder inside a partition's
    own location.
    """

    path: str
    detail: str


@dataclass(frozen=True, slots=True)
class ChosenDelta:
    """A delta folder of the snapshot; ``validity`` SOME means rows must be filtered."""

    folder: DeltaDir
    path: str
    validity: RangeValidity
    invalid_write_ids: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class BucketSlice:
    """Everything one bucket of one partition needs: the unit of pruning and compaction.

    ``data_files`` is in Hive's reading order: originals, then the base, then the deltas.
    """

    partition: Partition
    bucket_id: int
    original_files: tuple[DataFile, ...] = ()
    base_files: tuple[DataFile, ...] = ()
    delta_files: tuple[DataFile, ...] = ()
    delete_delta_files: tuple[DataFile, ...] = ()

    @property
    def data_files(self) -> tuple[DataFile, ...]:
        return self.original_files + self.base_files + self.delta_files

    @property
    def files(self) -> tuple[DataFile, ...]:
        return self.data_files + self.delete_delta_files

    @property
    def key(self) -> str:
        """A stable id: ``<partition path>#<bucket>`` (``#0`` for an unpartitioned table)."""
        return f"{self.partition.path}#{self.bucket_id}"

    @property
    def size(self) -> int:
        return sum(f.file.size for f in self.files)


@dataclass(frozen=True, slots=True)
class PartitionReadView:
    partition: Partition
    base: BaseDir | None
    base_path: str | None
    deltas: tuple[ChosenDelta, ...]
    slices: tuple[BucketSlice, ...]
    excluded: tuple[ExcludedEntry, ...]


@dataclass(frozen=True)
class TableReadView:
    """The resolved table: partitions, their slices, and what was left out and why."""

    root: str
    write_ids: ValidWriteIdList
    txns: ValidTxnList | None
    insert_only: bool
    partitions: tuple[PartitionReadView, ...]
    unrecognised: tuple[UnrecognisedEntry, ...] = ()
    #: The metastore's definition of the table, when it was read by name.
    definition: TableDefinition | None = None

    @property
    def slices(self) -> tuple[BucketSlice, ...]:
        return tuple(s for p in self.partitions for s in p.slices)

    @property
    def files(self) -> tuple[DataFile, ...]:
        return tuple(f for s in self.slices for f in s.files)

    @property
    def excluded(self) -> tuple[ExcludedEntry, ...]:
        return tuple(e for p in self.partitions for e in p.excluded)

    def partition_keys(self) -> tuple[str, ...]:
        if self.definition is not None:
            return tuple(name for name, _ in self.definition.partition_columns)
        for p in self.partitions:
            if p.partition.values:
                return p.partition.keys
        return ()


# -- making DataFile and BucketSlice objects in bulk -----------------------------------------
#
# A frozen dataclass's __init__ stores each field through object.__setattr__, several times
# slower than filling its slots directly. Resolution makes one DataFile per listed file and
# one BucketSlice per slice, so it does the latter (for many objects at once, by mapping each
# slot's setter over them), and makes the same objects (tests/acid/test_snapshot_reference.py).


def _slot_setters(cls: type) -> Iterator[Callable[[Any, Any], None]]:
    """The setter of each field's slot, in the order of the fields."""
    return (getattr(cls, f.name).__set__ for f in fields(cls))


SLICE_SETTERS = tuple(_slot_setters(BucketSlice))
(
    set_partition,
    set_slice_bucket_id,
    set_original_files,
    set_base_files,
    set_delta_files,
    set_delete_delta_files,
) = SLICE_SETTERS
CHOSEN_DELTA_SETTERS = tuple(_slot_setters(ChosenDelta))
(
    set_delta_folder,
    set_delta_path,
    set_delta_validity,
    set_delta_invalid_write_ids,
) = CHOSEN_DELTA_SETTERS
VIEW_SETTERS = tuple(_slot_setters(PartitionReadView))
(
    set_view_partition,
    set_view_base,
    set_view_base_path,
    set_view_deltas,
    set_view_slices,
    set_view_excluded,
) = VIEW_SETTERS
KIND_SETTERS = tuple(_slot_setters(FileKind))


def _new_data_file(
    file: StoredFile,
    role: FileRole,
    bucket_id: int,
    folder: AcidDir | None,
    invalid_write_ids: tuple[int, ...],
    acid_version_marked: bool,
) -> DataFile:
    """``DataFile(file, role, ...)``, made without its ``__init__``."""
    data_file = object.__new__(DataFile)
    set_file(data_file, file)
    set_bucket_id(data_file, bucket_id)
    set_kind(data_file, FileKind(role, folder, invalid_write_ids, acid_version_marked))
    return data_file


def _new_bucket_slice(
    partition: Partition,
    bucket_id: int,
    original_files: tuple[DataFile, ...],
    base_files: tuple[DataFile, ...],
    delta_files: tuple[DataFile, ...],
    delete_delta_files: tuple[DataFile, ...],
) -> BucketSlice:
    """``BucketSlice(partition, bucket_id, ...)``, made without its ``__init__``."""
    bucket_slice = object.__new__(BucketSlice)
    set_partition(bucket_slice, partition)
    set_slice_bucket_id(bucket_slice, bucket_id)
    set_original_files(bucket_slice, original_files)
    set_base_files(bucket_slice, base_files)
    set_delta_files(bucket_slice, delta_files)
    set_delete_delta_files(bucket_slice, delete_delta_files)
    return bucket_slice


#: Old names of the read-view types, kept for one release (they warn when used).
_DEPRECATED_NAMES = {"TableSnapshot": "TableReadView", "PartitionSnapshot": "PartitionReadView"}


def __getattr__(name: str) -> Any:
    new = _DEPRECATED_NAMES.get(name)
    if new is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import warnings

    warnings.warn(
        f"{__name__}.{name} is deprecated: use {new} (the read view; 'snapshot' names the "
        "committed output)",
        DeprecationWarning,
        stacklevel=2,
    )
    return globals()[new]
