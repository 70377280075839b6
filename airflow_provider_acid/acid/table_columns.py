"""The table's columns (:class:`TableColumns`): from a schema argument, the metastore's
definition, or the newest data file's footer (:func:`table_columns`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any

import pyarrow as pa
import pyarrow.parquet as pq
import pyorc
from fsspec import AbstractFileSystem

from .data_file_open import ACID_COLUMNS, FORMAT_ERRORS, AcidFormatError, is_acid_names
from .hive_types import HiveType, HiveTypeError, hive_field
from .read_view import DataFile, FileRole, TableReadView


@dataclass(frozen=True)
class TableColumn:
    """One column of the table: its name and Hive type."""

    name: str
    hive_type: HiveType


@dataclass(frozen=True)
class TableColumns:
    """The table's columns and where they were learnt (a file path or ``schema argument``)."""

    columns: tuple[TableColumn, ...]
    source: str

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    def arrow_fields(self, timestamp_unit: str = "us") -> list[pa.Field]:
        """Arrow fields with the Hive type in each field's metadata.

        :param timestamp_unit: the unit of timestamp columns.
        """
        return [hive_field(c.name, c.hive_type, timestamp_unit) for c in self.columns]

    def to_dict(self) -> dict[str, Any]:
        return {
            "columns": [{"name": c.name, "hive_type": str(c.hive_type)} for c in self.columns],
            "source": self.source,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | Sequence[Mapping[str, Any]]) -> TableColumns:
        """From :meth:`to_dict`, or from its ``columns`` list alone.

        :param data: what :meth:`to_dict` returned, or its ``columns`` list.
        """
        if isinstance(data, Mapping):
            columns, source = data["columns"], data["source"]
        else:
            columns, source = data, "stored settings"
        return cls(
            tuple(TableColumn(c["name"], HiveType.parse(c["hive_type"])) for c in columns), source
        )

    @classmethod
    def from_schema(cls, schema: Any) -> TableColumns:
        """From a user schema: a pyarrow Schema, ``(name, hive type)`` pairs, or a mapping.

        :param schema: the user's schema.
        """
        if isinstance(schema, pa.Schema):
            pairs: Iterable[tuple[str, Any]] = [
                (f.name, HiveType.from_arrow(f.type)) for f in schema
            ]
        elif isinstance(schema, Mapping):
            pairs = schema.items()
        else:
            pairs = schema
        try:
            columns = tuple(TableColumn(name, HiveType.parse(t)) for name, t in pairs)
        except (TypeError, ValueError) as exc:
            raise ValueError(
                f"schema argument: expected a pyarrow Schema or (name, Hive type) pairs: {exc}"
            ) from None
        lowered = [c.name.lower() for c in columns]
        if len(set(lowered)) != len(lowered):
            raise ValueError(f"schema argument: duplicate column names in {list(lowered)}")
        return cls(columns, "schema argument")


def _newest_first(files: Iterable[DataFile]) -> list[DataFile]:
    def key(f: DataFile) -> tuple[int, int, str]:
        write = f.folder.max_write_id if f.folder is not None else -1
        return (write, 0 if f.role is FileRole.DELETE_DELTA else 1, f.path)

    return sorted(files, key=key, reverse=True)


def table_columns(
    snapshot: TableReadView, fs: AbstractFileSystem, schema: Any = None
) -> TableColumns:
    """The table's columns: from ``schema`` when given, else from the metastore's definition
    when the table was read by name, else from the newest ACID file's ``row``
    struct (delete deltas count, data files first), else from the newest plain file (always
    from the newest file for an insert-only table).

    :param snapshot: the table's read view.
    :param fs: the filesystem its files are on.
    :param schema: the user's schema (see :meth:`TableColumns.from_schema`), or None.
    """
    if schema is not None:
        return TableColumns.from_schema(schema)
    if snapshot.definition is not None:
        definition = snapshot.definition
        return TableColumns(
            tuple(TableColumn(n, HiveType.parse(t)) for n, t in definition.columns),
            f"metastore {definition.metastore}, table {definition.name}",
        )
    fallback: TableColumns | None = None
    for data_file in _newest_first(snapshot.files):
        if fallback is not None and data_file.folder is None:
            break  # only original files are left, and they are never ACID files
        with fs.open(data_file.path, "rb") as handle:
            described = _describe(handle, data_file.path)
        if described is None:
            continue
        file_type, is_acid = described
        if is_acid:
            row = file_type.children[ACID_COLUMNS.index("row")]
            return TableColumns(_columns_of(row, data_file.path), data_file.path)
        plain = TableColumns(_columns_of(file_type, data_file.path), data_file.path)
        if snapshot.insert_only:
            return plain
        fallback = fallback or plain
    return fallback or TableColumns((), "no data files")


def _columns_of(struct: HiveType, path: str) -> tuple[TableColumn, ...]:
    if struct.name != "struct":
        raise AcidFormatError(f"{path}: row type {struct} is not a struct")
    return tuple(TableColumn(n, t) for n, t in struct.fields)


def _describe(handle: IO[bytes], path: str) -> tuple[HiveType, bool] | None:
    """The file's type and whether it is an ACID event file; None for an empty file."""
    magic = handle.read(4)
    handle.seek(0)
    try:
        if magic == b"PAR1":
            parquet = pq.ParquetFile(handle)
            if parquet.metadata.num_rows == 0:
                return None
            return HiveType.from_arrow(pa.struct(list(parquet.schema_arrow))), False
        reader = pyorc.Reader(handle)
        if len(reader) == 0:
            return None
        file_type = HiveType.parse(str(reader.schema))
    except (HiveTypeError, *FORMAT_ERRORS) as exc:
        raise AcidFormatError(f"{path}: not a readable ORC or Parquet data file ({exc})") from None
    return file_type, is_acid_names([n.lower() for n in file_type.field_names])
