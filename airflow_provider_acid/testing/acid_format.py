"""The ACID event file of Hive 3: its columns, operations, user metadata and bucket field.

* the event schema ``struct<operation:int,originalTransaction:bigint,bucket:int,rowId:bigint,
  currentTransaction:bigint,row:struct<...>>`` (:func:`acid_event_type`);
* the ORC user metadata ``hive.acid.version``, ``hive.acid.stats`` and ``hive.acid.key.index``
  (:func:`acid_user_metadata`);
* the ``BucketCodec`` V1 encoding of the ``bucket`` field and a row's identity
  (:class:`RowIdentity`).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import NamedTuple

import pyarrow as pa
import pyarrow.compute as pc

from ..acid.hive_types import HiveType
from .orc_types import orc_arrow_type, struct_type

OPERATION_INSERT = 0
#: Never written by Hive 3 (split update writes a delete event plus an insert event).
OPERATION_UPDATE = 1
OPERATION_DELETE = 2

#: The fields of an ACID event before ``row`` (the table's columns, a struct), with their types.
_EVENT_FIELDS = (
    ("operation", "int"),
    ("originalTransaction", "bigint"),
    ("bucket", "int"),
    ("rowId", "bigint"),
    ("currentTransaction", "bigint"),
)
#: Top-level field names of an ACID event file, in order.
ACID_COLUMN_NAMES = tuple(name for name, _ in _EVENT_FIELDS) + ("row",)

#: The ACID format version Hive 3 writes (file ``_orc_acid_version`` and ``hive.acid.version``).
ACID_VERSION = 2

VERSION_KEY = "hive.acid.version"
STATS_KEY = "hive.acid.stats"
KEY_INDEX_KEY = "hive.acid.key.index"

MAX_BUCKET_ID = 0xFFF  # 12 bits (bits 27-16)
MAX_STATEMENT_ID = 0xFFF  # 12 bits (bits 11-0)
_CODEC_V1 = 1


def encode_bucket_v1(bucket_id: int, statement_id: int = 0) -> int:
    """Encode a bucket id and statement id as Hive's ``BucketCodec`` V1 ``bucket`` field.

    Bits 31-29 hold the codec version (1), bits 27-16 the bucket id, bits 11-0 the statement id:
    ``encode_bucket_v1(0) == 536870912`` and ``encode_bucket_v1(2) == 537001984``.
    """
    if not 0 <= bucket_id <= MAX_BUCKET_ID:
        raise ValueError(f"bucket id must be in 0..{MAX_BUCKET_ID}, got {bucket_id}")
    if not 0 <= statement_id <= MAX_STATEMENT_ID:
        raise ValueError(f"statement id must be in 0..{MAX_STATEMENT_ID}, got {statement_id}")
    return (_CODEC_V1 << 29) | (bucket_id << 16) | statement_id


def decode_bucket(value: int) -> tuple[int, int]:
    """Decode a ``bucket`` field into ``(bucket_id, statement_id)``.

    Codec V1 values are decoded bit-wise; version 0 values (pre-Hive-3 files, where the field is
    the plain bucket number) decode to ``(value, 0)``.
    """
    value &= 0xFFFFFFFF  # accept Java's signed view of the int as well
    version = value >> 29
    if version == 0:
        return value, 0
    if version != _CODEC_V1:
        raise ValueError(f"unknown BucketCodec version {version} in bucket field {value}")
    return (value >> 16) & MAX_BUCKET_ID, value & MAX_STATEMENT_ID


class RowIdentity(NamedTuple):
    """Hive's ``ROW__ID`` of a row: unique inside one partition (or unpartitioned table)."""

    original_transaction: int
    bucket: int  #: the encoded BucketCodec value, not the bucket id
    row_id: int

    @property
    def bucket_id(self) -> int:
        return decode_bucket(self.bucket)[0]

    @property
    def statement_id(self) -> int:
        return decode_bucket(self.bucket)[1]

    def key(self) -> str:
        """The ``origTxn,bucket,rowId`` text Hive uses in ``hive.acid.key.index``."""
        return f"{self.original_transaction},{self.bucket},{self.row_id}"


def acid_event_type(row_type: HiveType) -> HiveType:
    """The ACID event file type wrapping ``row_type`` (a struct of the table columns)."""
    if row_type.name != "struct":
        raise ValueError("the row type of an ACID file must be a struct")
    return struct_type([*_EVENT_FIELDS, ("row", row_type)])


def acid_event_arrow_schema(row_type: HiveType) -> pa.Schema:
    """The Arrow schema ``pyarrow.orc`` reads an ACID event file with ``row_type`` as."""
    event = acid_event_type(row_type)
    return pa.schema([pa.field(n, orc_arrow_type(t)) for n, t in event.fields])


def acid_events(
    operation: int,
    original_transaction: pa.Array | pa.ChunkedArray,
    bucket: pa.Array | pa.ChunkedArray,
    row_id: pa.Array | pa.ChunkedArray,
    current_transaction: pa.Array | pa.ChunkedArray,
    row: pa.Array,
) -> pa.Table:
    """A table of ACID events, all of one ``operation``, with the columns of an event file."""
    n = len(row_id)
    return pa.table(
        {
            "operation": pa.repeat(pa.scalar(operation, pa.int32()), n),
            "originalTransaction": original_transaction,
            "bucket": bucket,
            "rowId": row_id,
            "currentTransaction": current_transaction,
            "row": row,
        }
    )


def acid_user_metadata(events: pa.Table, stripe_lengths: Sequence[int]) -> dict[str, bytes]:
    """The ``hive.acid.*`` user metadata of sorted ACID events stored in stripes of
    ``stripe_lengths`` rows.

    ``hive.acid.stats`` counts ``inserts,updates,deletes``; ``hive.acid.key.index`` holds the
    last ``originalTransaction,bucket,rowId;`` of every stripe.
    """
    n = events.num_rows
    operations = pc.value_counts(events["operation"]).to_pylist() if n else []
    counts = {entry["values"]: entry["counts"] for entry in operations}
    if set(counts) - {OPERATION_INSERT, OPERATION_UPDATE, OPERATION_DELETE}:
        raise ValueError("operation must be 0 (insert), 1 (update) or 2 (delete)")
    if sum(stripe_lengths) != n:
        raise ValueError("stripe lengths do not add up to the number of events")
    ends = list(itertools.accumulate(stripe_lengths, initial=-1))[1:]
    last = events.select(["originalTransaction", "bucket", "rowId"]).take(
        pa.array(ends, pa.int64())
    )
    keys = zip(*(last[c].to_pylist() for c in last.column_names), strict=True)
    return {
        KEY_INDEX_KEY: "".join(f"{o},{b},{r};" for o, b, r in keys).encode(),
        STATS_KEY: ",".join(
            str(counts.get(op, 0)) for op in (OPERATION_INSERT, OPERATION_UPDATE, OPERATION_DELETE)
        ).encode(),
        VERSION_KEY: str(ACID_VERSION).encode(),
    }
