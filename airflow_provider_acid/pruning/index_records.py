"""A data file's column statistics as the index's records: one row per (file, column).

:func:`stats_tables` turns :class:`~.stats.FileStats` into the ``files`` table
(``FILES_SCHEMA``) and one records table per column (``RECORD_SCHEMA``), each value in
its type family's typed column (decimals as exact text).
"""

from __future__ import annotations

import decimal
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from .column_types import type_family
from .index_format import (
    EMPTY_TABLES,
    FAMILY_SUFFIX,
    FILES_SCHEMA,
    RECORD_SCHEMA,
    FileKey,
)
from .stats import ColumnStats, FileStats


def _records(stats: FileStats) -> dict[str, list[dict]]:
    """Per lower-cased column name, the record dicts of one file."""
    out: dict[str, list[dict]] = {}
    for name, cs in stats.columns.items():
        key = name.lower()
        if key in out:
            continue
        out[key] = [_record(stats, name, cs)]
    return out


def _record(stats: FileStats, name: str, cs: ColumnStats) -> dict:
    family = type_family(cs.type) if cs.type is not None else None
    rec: dict[str, Any] = {
        "path": stats.path,
        "column": name,
        "type": str(cs.type) if cs.type is not None else None,
        "family": family,
        "row_count": stats.row_count,
        "null_count": cs.null_count,
        "value_count": cs.value_count,
        "nan_count": cs.nan_count,
        "bounds_known": False,
    }
    lo, hi = cs.min, cs.max
    if family in FAMILY_SUFFIX and lo is not None and hi is not None:
        if family == "int" and not (-(2**63) <= lo and hi <= 2**63 - 1):
            lo = hi = None
        elif family == "decimal":
            lo, hi = _dec_text(lo), _dec_text(hi)
        if lo is not None and hi is not None:
            rec[f"min_{FAMILY_SUFFIX[family]}"] = lo
            rec[f"max_{FAMILY_SUFFIX[family]}"] = hi
            rec["bounds_known"] = True
    return rec


def _dec_text(value: decimal.Decimal) -> str:
    return format(value, "f")


def stats_tables(all_stats: Sequence[FileStats], sizes: dict[str, FileKey]) -> tuple:
    """The files table and the per-column records tables of ``all_stats``.

    :param all_stats: the files' statistics, as read from their footers.
    :param sizes: each file's key by path (its size and version).
    """
    files_rows = {name: [] for name in FILES_SCHEMA.names}
    by_column: dict[str, list[dict]] = {}
    for st in all_stats:
        key = sizes[st.path]
        files_rows["path"].append(st.path)
        files_rows["size"].append(key.size)
        files_rows["version"].append(key.version)
        files_rows["format"].append(st.format)
        files_rows["row_count"].append(st.row_count)
        for col, recs in _records(st).items():
            by_column.setdefault(col, []).extend(recs)
    files = _from_lists(files_rows, FILES_SCHEMA)
    columns = {
        col: _from_lists({f: [r.get(f) for r in recs] for f in RECORD_SCHEMA.names}, RECORD_SCHEMA)
        for col, recs in by_column.items()
    }
    return files, columns


def _from_lists(data: dict[str, list], schema: pa.Schema) -> pa.Table:
    # typed arrays first: pa.table() on plain lists takes a much slower path
    arrays = [
        pa.array(values, f.type)
        if any(v is not None for v in values)
        else pa.nulls(len(values), f.type)
        for f, values in ((f, data[f.name]) for f in schema)
    ]
    return pa.Table.from_arrays(arrays, schema=schema)


def empty_table(schema: pa.Schema) -> pa.Table:
    """An empty table of ``schema``.

    :param schema: the schema.
    """
    return EMPTY_TABLES[schema.names[1]]
