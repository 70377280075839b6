"""Hive Streaming Ingest, simulated: one transaction batch of several writes in one delta.

A streaming writer (``HiveStreamingConnection``) opens a batch of transactions at once and
writes the events of all of them into one ``delta_X_Y`` folder (no statement id), one
``bucket_N`` file per bucket, each event carrying its own write id as ``currentTransaction``;
writes of the batch may commit or abort, the aborted ones' events stay in the files and
readers must drop them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from .acid_format import encode_bucket_v1
from .bucketing import hive_bucket_ids
from .row_history import BUCKET, ORIGINAL_TXN, ROW_ID
from .table_layout import Directory
from .table_writer import AcidTableWriter


def stream_batch(
    table: AcidTableWriter,
    batches: Sequence[tuple[Any, bool]],
    partition: Any = None,
) -> str:
    """Write one streaming transaction batch into ``partition``: for each ``(rows, commit)``
    one write (committed or aborted), all in one ``delta_X_Y``; returns its folder.

    :param table: the simulated table (full ACID, bucketed by column when it has buckets).
    :param batches: the rows of each write (as :meth:`AcidTableWriter.insert` takes them)
        and whether it commits.
    :param partition: the partition (a static spec) all rows go to.
    """
    if table.insert_only or (table.buckets > 1 and not table.bucket_by):
        raise ValueError("streaming needs a full-ACID table, bucketed by a column if bucketed")
    writes = [table.history.begin() for _ in batches]
    p_index = table.layout.static(partition, create=True)
    p = table.layout.partitions[p_index]
    directory = Directory("delta", writes[0].write_id, writes[-1].write_id, None)
    folder = table.layout.register_directory(p, directory)
    types = {c.name: c.type for c in table.columns}
    recorded_by_bucket: dict[int, list[pa.Table]] = {}
    for write, (rows, _commit) in zip(writes, batches, strict=True):
        data = pa.Table.from_pylist(list(rows), schema=table.arrow_schema)
        if table.buckets == 1:
            bucket_ids = pa.repeat(pa.scalar(0, pa.int32()), data.num_rows)
        else:
            bucket_ids = hive_bucket_ids(
                [data[n] for n in table.bucket_by],
                [types[n] for n in table.bucket_by],
                table.buckets,
            )
        for bucket_id in sorted(set(pc.unique(bucket_ids).to_pylist())):
            part = data.filter(pc.equal(bucket_ids, bucket_id))
            recorded = table.row_history.record_rows(
                "delta",
                write.write_id,
                p_index,
                write.write_id,
                encode_bucket_v1(bucket_id),
                0,
                part,
            )
            recorded_by_bucket.setdefault(bucket_id, []).append(recorded)
    for bucket_id, parts in sorted(recorded_by_bucket.items()):
        events = pa.concat_tables(parts)
        identity = [(ORIGINAL_TXN, "ascending"), (BUCKET, "ascending"), (ROW_ID, "ascending")]
        order = pc.sort_indices(events, sort_keys=identity)
        table.files.write_data_file(folder, bucket_id, events.take(order))
    table.files.ensure_version_file(folder)
    for write, (_rows, commit) in zip(writes, batches, strict=True):
        (table.commit if commit else table.abort)(write.write_id)
    return folder


__all__ = ["stream_batch"]
