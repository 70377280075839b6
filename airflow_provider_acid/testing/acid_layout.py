"""Where Hive 3 puts an ACID table's files: folder and file names, side files, partitions.

``base_N``, ``delta_N_M_S``, ``delete_delta_N_M_S`` (with a ``_vT`` suffix when the compactor
wrote them), ``bucket_N`` files, original ``000000_0_copy_1`` files, escaped ``k=v`` partition
folders, and the ``_orc_acid_version`` and ``_metadata_acid`` files beside the bucket files.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from typing import Any

from .acid_format import ACID_VERSION

#: Name of the one-byte file Hive 3 puts in every full-ACID base/delta folder.
ACID_VERSION_FILE = "_orc_acid_version"
#: Marker file Hive's compactor puts in the bases it writes, and its content.
COMPACTOR_MARKER_FILE = "_metadata_acid"
COMPACTOR_MARKER_CONTENT = b'{"thisFileVersion":"0","dataFormat":"compacted"}'

#: Folder Hive uses for a null (or empty string) partition value.
HIVE_DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"


def _visibility_suffix(visibility_txn_id: int | None) -> str:
    return "" if visibility_txn_id is None else f"_v{visibility_txn_id:07d}"


def base_dir_name(write_id: int, visibility_txn_id: int | None = None) -> str:
    """``base_0000005`` or, for a base written by the compactor, ``base_0000005_v0000012``."""
    return f"base_{write_id:07d}{_visibility_suffix(visibility_txn_id)}"


def delta_dir_name(
    min_write_id: int,
    max_write_id: int,
    statement_id: int | None = None,
    visibility_txn_id: int | None = None,
    *,
    delete: bool = False,
) -> str:
    """``delta_0000003_0000003_0000`` (a statement) or ``delta_0000001_0000004_v0000009``.

    A statement id is written by ordinary writes; minor compaction writes no statement id but
    a visibility transaction suffix.
    """
    prefix = "delete_delta" if delete else "delta"
    name = f"{prefix}_{min_write_id:07d}_{max_write_id:07d}"
    if statement_id is not None:
        name += f"_{statement_id:04d}"
    return name + _visibility_suffix(visibility_txn_id)


def delete_delta_dir_name(
    min_write_id: int,
    max_write_id: int,
    statement_id: int | None = None,
    visibility_txn_id: int | None = None,
) -> str:
    """``delete_delta_0000003_0000003_0000`` (same rules as :func:`delta_dir_name`)."""
    return delta_dir_name(min_write_id, max_write_id, statement_id, visibility_txn_id, delete=True)


def bucket_file_name(bucket_id: int) -> str:
    """``bucket_00003``: the file of one bucket inside an ACID base/delta folder."""
    return f"bucket_{bucket_id:05d}"


def original_file_name(bucket_id: int, copy: int = 0) -> str:
    """``000002_0`` or ``000002_0_copy_1``: a pre-ACID (or insert-only) data file."""
    name = f"{bucket_id:06d}_0"
    return name if copy == 0 else f"{name}_copy_{copy}"


_ESCAPED_CHARS = frozenset(
    [chr(c) for c in range(0x01, 0x20)]
    + ['"', "#", "%", "'", "*", "/", ":", "=", "?", "\\", "\x7f", "{", "[", "]", "^"]
)


def escape_path_name(text: str) -> str:
    """Escape one path component like Hive's ``FileUtils.escapePathName`` (``:`` -> ``%3A``)."""
    return "".join(f"%{ord(c):02X}" if c in _ESCAPED_CHARS else c for c in text)


def format_partition_value(value: Any) -> str:
    """The text Hive puts in a ``k=v`` folder name for a partition value (unescaped).

    ``None`` and ``""`` become ``__HIVE_DEFAULT_PARTITION__``.
    """
    if value is None or value == "":
        return HIVE_DEFAULT_PARTITION
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, dt.date):
        return value.isoformat()
    return str(value)


def partition_dir_name(spec: Mapping[str, Any] | Iterable[tuple[str, Any]]) -> str:
    """``dt=2024-01-01/ns=a%3Ab``: nested, escaped partition folders for ordered ``(k, v)`` pairs.

    Hive lower-cases partition column names and escapes both names and values.
    """
    items = spec.items() if isinstance(spec, Mapping) else spec
    parts = []
    for name, value in items:
        text = format_partition_value(value)
        escaped = text if text == HIVE_DEFAULT_PARTITION else escape_path_name(text)
        parts.append(f"{escape_path_name(name.lower())}={escaped}")
    return "/".join(parts)


def write_acid_version_file(fs: Any, folder: str) -> str:
    """Write ``<folder>/_orc_acid_version`` holding the single byte ``2``."""
    fs.makedirs(folder, exist_ok=True)
    path = f"{folder}/{ACID_VERSION_FILE}"
    fs.pipe_file(path, str(ACID_VERSION).encode())
    return path
