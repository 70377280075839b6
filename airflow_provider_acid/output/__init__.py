"""The output side: what a compaction commits and how (a plain library, no Airflow imports).

* :mod:`.records` - value objects: planned slices, bucket results, a snapshot's plan and its
  committed manifest (:class:`SnapshotResult`), and the commit errors.
* :mod:`.parquet_files` - one bucket's rows written as rolling Parquet data files.
* :mod:`.protocol` - the commit protocol of an output folder: plan, verification, manifest,
  reuse of unchanged buckets, expiry.
* :mod:`.sinks` - where a committed snapshot is published: the Parquet folder itself, or a table
  format over the same data files.

Words: a *read view* is what Hive shows of the source table (``acid.read_view``, resolved by
``acid.resolution``); a *plan* fixes what an output snapshot will hold; a *snapshot* here is the
committed output.
"""

from .expiry import expire_snapshots
from .paths import snapshot_dir
from .protocol import (
    commit_snapshot,
    committed_snapshots,
    last_committed_write_id,
    latest_committed,
    latest_snapshot,
    read_manifest,
    read_plan,
    write_plan,
)
from .records import (
    BucketResult,
    CommitError,
    ExpireResult,
    OutputFile,
    PlannedSlice,
    ReconciliationError,
    SnapshotPlan,
    SnapshotResult,
    data_file_name,
)
from .reuse import reuse_candidates

__all__ = [
    "BucketResult",
    "CommitError",
    "ExpireResult",
    "OutputFile",
    "PlannedSlice",
    "ReconciliationError",
    "SnapshotPlan",
    "SnapshotResult",
    "commit_snapshot",
    "committed_snapshots",
    "data_file_name",
    "expire_snapshots",
    "last_committed_write_id",
    "latest_committed",
    "latest_snapshot",
    "read_manifest",
    "read_plan",
    "reuse_candidates",
    "snapshot_dir",
    "write_plan",
]
