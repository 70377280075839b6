"""Generators of real Hive 3 ACID tables (ORC) and of the rows a correct reader must return.

Used by the demo, the benchmarks and differential tests. Nothing here imports Airflow.
"""

from __future__ import annotations

from ..acid.hive_types import HiveType
from .acid_format import (
    ACID_COLUMN_NAMES,
    ACID_VERSION,
    KEY_INDEX_KEY,
    OPERATION_DELETE,
    OPERATION_INSERT,
    OPERATION_UPDATE,
    STATS_KEY,
    VERSION_KEY,
    RowIdentity,
    acid_event_arrow_schema,
    acid_event_type,
    acid_user_metadata,
    decode_bucket,
    encode_bucket_v1,
)
from .acid_layout import (
    ACID_VERSION_FILE,
    HIVE_DEFAULT_PARTITION,
    base_dir_name,
    bucket_file_name,
    delete_delta_dir_name,
    delta_dir_name,
    escape_path_name,
    format_partition_value,
    original_file_name,
    partition_dir_name,
    write_acid_version_file,
)
from .bucketing import hive_bucket_hash, hive_bucket_ids, murmur3_32
from .demo_table import generate_demo_table
from .orc_footer import append_user_metadata
from .orc_types import parse_hive_type
from .orc_writer import WrittenFile, write_acid_file, write_plain_file
from .table_columns import Column
from .table_writer import AcidTableWriter, StatementResult, Transaction
from .write_history import NO_OPEN_WRITE_ID, WriteIdSnapshot, WriteState

__all__ = [
    "ACID_COLUMN_NAMES",
    "ACID_VERSION",
    "ACID_VERSION_FILE",
    "HIVE_DEFAULT_PARTITION",
    "KEY_INDEX_KEY",
    "NO_OPEN_WRITE_ID",
    "OPERATION_DELETE",
    "OPERATION_INSERT",
    "OPERATION_UPDATE",
    "STATS_KEY",
    "VERSION_KEY",
    "AcidTableWriter",
    "Column",
    "HiveType",
    "RowIdentity",
    "StatementResult",
    "Transaction",
    "WriteIdSnapshot",
    "WriteState",
    "WrittenFile",
    "acid_event_arrow_schema",
    "acid_event_type",
    "acid_user_metadata",
    "append_user_metadata",
    "base_dir_name",
    "bucket_file_name",
    "decode_bucket",
    "delete_delta_dir_name",
    "delta_dir_name",
    "encode_bucket_v1",
    "escape_path_name",
    "format_partition_value",
    "generate_demo_table",
    "hive_bucket_hash",
    "hive_bucket_ids",
    "murmur3_32",
    "original_file_name",
    "parse_hive_type",
    "partition_dir_name",
    "write_acid_file",
    "write_acid_version_file",
    "write_plain_file",
]
