"""Hive ACID folder and file names, parsed into value objects.

A Hive 3 transactional table holds, per partition, folders named after the writes they hold
(``base_W``, ``delta_A_B_S``, ``delete_delta_A_B``, each optionally suffixed ``_vT`` with the
compactor's visibility transaction) and inside them ``bucket_N`` files. Pre-ACID "original"
files sit at the partition root as ``N_M`` or ``N_M_copy_K`` (Hive takes any other non-hidden
file outside base and delta folders as an original file too; only its bucket then comes from no
name pattern, see ``snapshot.bucket_id_of``). Number widths are minimums:
``delta_025_030`` and ``delta_0000063_63`` are both valid.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from enum import Enum

_BASE = re.compile(r"^base_(?P<write>\d+)(?:_v(?P<visibility>\d+))?$")
_DELTA = re.compile(
    r"^(?P<kind>delta|delete_delta)_(?P<min>\d+)_(?P<max>\d+)"
    r"(?:_(?P<statement>\d+))?(?:_v(?P<visibility>\d+))?$"
)
_BUCKET = re.compile(r"^bucket_(?P<bucket>\d+)(?:_(?P<attempt>\d+))?$")
_BUCKET_FLUSH_LENGTH = re.compile(r"^bucket_\d+(?:_\d+)?_flush_length$")
_ORIGINAL = re.compile(r"^(?P<bucket>\d+)_(?P<task>\d+)(?:_copy_(?P<copy>\d+))?$")

#: Side files Hive writes next to data; recognised so that they are never read as data.
SIDE_FILE_NAMES = frozenset({"_orc_acid_version", "_metadata_acid"})


class DeltaKind(str, Enum):
    """Whether a delta folder holds insert events or delete events."""

    INSERT = "delta"
    DELETE = "delete_delta"


@dataclass(frozen=True, slots=True)
class BaseDir:
    """A ``base_W[_vT]`` folder: every write up to W, compacted or insert-overwritten."""

    name: str
    write_id: int
    visibility_txn_id: int | None = None

    @property
    def min_write_id(self) -> int:
        return 0

    @property
    def max_write_id(self) -> int:
        return self.write_id


@dataclass(frozen=True, slots=True)
class DeltaDir:
    """A ``delta_A_B[_S][_vT]`` or ``delete_delta_A_B[_S][_vT]`` folder.

    ``statement_id`` is None for a minor-compacted (or streaming) delta, which has none.
    """

    name: str
    kind: DeltaKind
    min_write_id: int
    max_write_id: int
    statement_id: int | None = None
    visibility_txn_id: int | None = None

    @property
    def is_delete(self) -> bool:
        return self.kind is DeltaKind.DELETE

    @property
    def sort_key(self) -> tuple[int, int, int, str]:
        """Hive's delta order: min ascending, max descending, statement (none first), name."""
        statement = -1 if self.statement_id is None else self.statement_id
        return (self.min_write_id, -self.max_write_id, statement, self.name)

    def same_range_and_statement(self, other: DeltaDir) -> bool:
        return (self.min_write_id, self.max_write_id, self.statement_id) == (
            other.min_write_id,
            other.max_write_id,
            other.statement_id,
        )


AcidDir = BaseDir | DeltaDir

# A frozen dataclass's __init__ stores each field through object.__setattr__; a table with
# partitions compacted each on its own has a folder name per folder, so parse_acid_dir fills
# the slots directly (tests/acid/test_names.py compares the two).
_new = object.__new__
#: BaseDir's and DeltaDir's slot setters, in the order of their fields.
BASE_DIR_SETTERS = tuple(getattr(BaseDir, f.name).__set__ for f in fields(BaseDir))
DELTA_DIR_SETTERS = tuple(getattr(DeltaDir, f.name).__set__ for f in fields(DeltaDir))
_set_base_name, _set_base_write_id, _set_base_visibility = BASE_DIR_SETTERS
(
    _set_delta_name,
    _set_delta_kind,
    _set_delta_min,
    _set_delta_max,
    _set_delta_statement,
    _set_delta_visibility,
) = DELTA_DIR_SETTERS
_DELTA_KINDS = {kind.value: kind for kind in DeltaKind}


@dataclass(frozen=True)
class BucketFileName:
    """A ``bucket_N`` file inside a base or delta (``bucket_N_A``: attempt A of the writer)."""

    name: str
    bucket_id: int
    attempt: int | None = None


@dataclass(frozen=True)
class OriginalFileName:
    """A pre-ACID file ``N_M`` or ``N_M_copy_K``: bucket N, task M, copy K (0 = not a copy)."""

    name: str
    bucket_id: int
    task: int
    copy: int = 0

    @property
    def order_key(self) -> tuple[int, int, int]:
        """Hive reads a bucket's original files in this order; it decides synthetic row ids."""
        return (self.bucket_id, self.task, self.copy)


def parse_acid_dir(name: str) -> AcidDir | None:
    """Parse a folder name into a :class:`BaseDir` or :class:`DeltaDir`; None if it is neither."""
    match = _BASE.match(name)
    if match:
        write, visibility = match.groups()
        base = _new(BaseDir)  # BaseDir(...) without its __init__: a folder is parsed once
        _set_base_name(base, name)
        _set_base_write_id(base, int(write))
        _set_base_visibility(base, None if visibility is None else int(visibility))
        return base
    match = _DELTA.match(name)
    if match:
        kind, low, high, statement, visibility = match.groups()
        delta = _new(DeltaDir)
        _set_delta_name(delta, name)
        _set_delta_kind(delta, _DELTA_KINDS[kind])
        _set_delta_min(delta, int(low))
        _set_delta_max(delta, int(high))
        _set_delta_statement(delta, None if statement is None else int(statement))
        _set_delta_visibility(delta, None if visibility is None else int(visibility))
        return delta
    return None


def parse_bucket_file(name: str) -> BucketFileName | None:
    """Parse ``bucket_N`` / ``bucket_N_A``; None for any other name."""
    match = _BUCKET.match(name)
    if not match:
        return None
    return BucketFileName(name, int(match["bucket"]), _optional_int(match["attempt"]))


def parse_original_file(name: str) -> OriginalFileName | None:
    """Parse ``N_M`` / ``N_M_copy_K``; None for any other name."""
    match = _ORIGINAL.match(name)
    if not match:
        return None
    return OriginalFileName(name, int(match["bucket"]), int(match["task"]), int(match["copy"] or 0))


def is_side_file(name: str) -> bool:
    """Hive's bookkeeping files, present beside data and never read as rows."""
    return name in SIDE_FILE_NAMES or bool(_BUCKET_FLUSH_LENGTH.match(name))


def is_hidden(name: str) -> bool:
    """Names Hive and Hadoop skip: anything starting with ``_`` or ``.``."""
    return name.startswith(("_", "."))


def _optional_int(text: str | None) -> int | None:
    return None if text is None else int(text)
