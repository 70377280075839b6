"""The files of a simulated table: recorded rows and delete events as bucket files.

In a full-ACID table, rows become insert events and deletes delete events in ``bucket_N`` ACID
files, with ``_orc_acid_version`` beside them; in an insert-only table rows become plain files.
The compactor's bases get its ``_metadata_acid`` marker.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..acid.hive_types import HiveType
from .acid_format import OPERATION_DELETE, OPERATION_INSERT, acid_events
from .acid_layout import (
    COMPACTOR_MARKER_CONTENT,
    COMPACTOR_MARKER_FILE,
    bucket_file_name,
    original_file_name,
    write_acid_version_file,
)
from .orc_types import orc_arrow_type
from .orc_writer import WrittenFile, write_acid_file, write_plain_file
from .row_history import BUCKET, ORIGINAL_TXN, ROW_ID, WRITE_ID


class TableFiles:
    """Writes the files of a table whose rows have type ``row_type`` (a struct).

    ``stripe_rows``, ``compression`` and ``engine``: as for :func:`write_acid_file`.
    """

    def __init__(
        self,
        fs: Any,
        row_type: HiveType,
        *,
        insert_only: bool,
        stripe_rows: int,
        compression: str,
        engine: str,
    ) -> None:
        self.fs = fs
        self.row_type = row_type
        self.arrow_schema = pa.schema([pa.field(n, orc_arrow_type(t)) for n, t in row_type.fields])
        self.insert_only = insert_only
        self._orc_options: dict[str, Any] = {
            "stripe_rows": stripe_rows,
            "compression": compression,
            "engine": engine,
        }
        self._folders_with_version_file: set[str] = set()

    def set_row_type(self, row_type: HiveType) -> None:
        """Files written from now on have ``row_type`` (after ALTER TABLE)."""
        self.row_type = row_type
        self.arrow_schema = pa.schema([pa.field(n, orc_arrow_type(t)) for n, t in row_type.fields])

    def write_plain(self, path: str, rows: pa.Table) -> WrittenFile:
        """A plain file of rows (an original file, or a file of an insert-only table)."""
        return write_plain_file(self.fs, path, rows, self.row_type, **self._orc_options)

    def write_events(self, path: str, events: pa.Table) -> WrittenFile:
        """An ACID file of events."""
        return write_acid_file(self.fs, path, events, self.row_type, **self._orc_options)

    def mark_compacted(self, folder: str) -> None:
        """The compactor's marker in a base it wrote (none in insert-only tables)."""
        if not self.insert_only:
            self.fs.pipe_file(f"{folder}/{COMPACTOR_MARKER_FILE}", COMPACTOR_MARKER_CONTENT)

    def ensure_version_file(self, folder: str) -> None:
        if self.insert_only or folder in self._folders_with_version_file:
            return
        write_acid_version_file(self.fs, folder)
        self._folders_with_version_file.add(folder)

    def write_data_file(self, folder: str, bucket_id: int, recorded: pa.Table) -> WrittenFile:
        """One bucket file of insert events (or a plain file in an insert-only table)."""
        data = recorded.select(self.arrow_schema.names)
        if self.insert_only:
            return self.write_plain(f"{folder}/{original_file_name(bucket_id)}", data)
        self.ensure_version_file(folder)
        if recorded.num_rows:
            row = pa.StructArray.from_arrays(
                [c.combine_chunks() for c in data.columns], fields=list(self.arrow_schema)
            )
        else:
            row = pa.array([], orc_arrow_type(self.row_type))
        otxn = recorded[ORIGINAL_TXN]
        events = acid_events(OPERATION_INSERT, otxn, recorded[BUCKET], recorded[ROW_ID], otxn, row)
        return self.write_events(f"{folder}/{bucket_file_name(bucket_id)}", events)

    def write_rows_by_bucket(self, folder: str, rows: pa.Table) -> None:
        """Write rows (bookkeeping table) as insert events grouped by their bucket id."""
        if not self.insert_only:
            write_acid_version_file(self.fs, folder)
            self._folders_with_version_file.add(folder)
        else:
            self.fs.makedirs(folder, exist_ok=True)
        if not rows.num_rows:
            return
        bucket_ids = pc.bit_wise_and(pc.shift_right(rows[BUCKET], 16), 0xFFF)
        for bucket_id in sorted(set(pc.unique(bucket_ids).to_pylist())):
            part = rows.filter(pc.equal(bucket_ids, bucket_id))
            self.write_data_file(folder, bucket_id, part)

    def write_delete_files(self, folder: str, deletes: pa.Table) -> list[WrittenFile]:
        """Delete events (WRITE_ID, ORIGINAL_TXN, BUCKET, ROW_ID) as bucket files of ``folder``."""
        self.ensure_version_file(folder)
        files = []
        bucket_ids = pc.bit_wise_and(pc.shift_right(deletes[BUCKET], 16), 0xFFF)
        for bucket_id in sorted(set(pc.unique(bucket_ids).to_pylist())):
            part = deletes.filter(pc.equal(bucket_ids, bucket_id))
            row = pa.nulls(part.num_rows, orc_arrow_type(self.row_type))
            events = acid_events(
                OPERATION_DELETE,
                part[ORIGINAL_TXN],
                part[BUCKET],
                part[ROW_ID],
                part[WRITE_ID],
                row,
            )
            files.append(self.write_events(f"{folder}/{bucket_file_name(bucket_id)}", events))
        return files
