"""A committed change feed delivered to a Delta table with its change data feed on.

The Delta table holds the source table's rows with their identity (``_acid_original_write_id``,
``_acid_bucket``, ``_acid_row_id``): it is created (``delta.enableChangeDataFeed=true``) from
the rows of the snapshot at A (or empty), then each write of the feed becomes one Delta
version, a delta-rs ``MERGE`` on the row identity: deletes and pre-images delete the row,
update post-images update the row their pre-image names (Delta's change data feed then shows
``update_preimage``/``update_postimage``), inserts insert. Readers get the changes with
delta-rs's ``DeltaTable.load_cdf`` or Spark's ``readChangeFeed``, ``_commit_version`` per
write.

Each version's commit metadata records ``airflow_acid_write_id``: the write it applied. That
is the table's watermark: a feed already delivered (its B at or below it) is not applied
again, and a feed must start where the table stands.

Within one write, a row its own statements inserted and deleted (a multi-statement write) is
left out, and a post-image whose pre-image is such a row is an insert: a version shows the
write's net effect, as a ``MERGE`` must (one source row per target row).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..acid.listing import resolve_filesystem
from .records import SnapshotResult

#: The key of the applied write id in each version's commit metadata.
WRITE_ID_KEY = "airflow_acid_write_id"
IDENTITY = ("_acid_original_write_id", "_acid_bucket", "_acid_row_id")
_FEED_ONLY = ("_change_type", "_commit_write_id", "_change_ordinal")
_MATCH = tuple(f"__match{n}" for n in IDENTITY)
_OP = "__op"


@dataclass(frozen=True)
class DeltaDelivery:
    """What delivering a feed did: the versions it committed and the table's watermark."""

    uri: str
    versions: tuple[int, ...]
    watermark: int

    def to_dict(self) -> dict[str, Any]:
        return {"uri": self.uri, "versions": list(self.versions), "watermark": self.watermark}


def delta_watermark(uri: str, storage_options: dict[str, str] | None = None) -> int | None:
    """The last write id delivered to the Delta table at ``uri`` (None: no such table)."""
    from deltalake import DeltaTable

    if not DeltaTable.is_deltatable(uri, storage_options=storage_options):
        return None
    for commit in DeltaTable(uri, storage_options=storage_options).history():
        if WRITE_ID_KEY in commit:
            return int(commit[WRITE_ID_KEY])
    return None


def _read_files(result: SnapshotResult, fs: Any, drop: Sequence[str]) -> pa.Table | None:
    tables = []
    for path in result.file_paths():
        with fs.open(path, "rb") as handle:
            tables.append(pq.read_table(handle))
    if not tables:
        return None
    table = pa.concat_tables(tables, promote_options="default")
    return table.drop_columns([c for c in drop if c in table.column_names])


def _initial_rows(snapshot: SnapshotResult, schema: pa.Schema) -> pa.Table:
    """The snapshot at A (written with identity columns) in the Delta table's columns."""
    if not snapshot.settings.get("include_identity"):
        raise ValueError(
            f"snapshot {snapshot.snapshot_id} at {snapshot.out} has no identity columns: "
            "write it with include_identity (compact --include-identity)"
        )
    fs, _ = resolve_filesystem(snapshot.out)
    rows = _read_files(snapshot, fs, ())
    if rows is None:
        return schema.empty_table()
    renamed = {"_acid_original_transaction": IDENTITY[0]}
    rows = rows.rename_columns([renamed.get(c, c) for c in rows.column_names])
    return pa.Table.from_arrays([pc.cast(rows[f.name], f.type) for f in schema], schema=schema)


def deliver_to_delta(
    feed: SnapshotResult,
    uri: str,
    *,
    initial_snapshot: SnapshotResult | None = None,
    storage_options: dict[str, str] | None = None,
) -> DeltaDelivery:
    """Apply a committed feed to the Delta table at ``uri``, one version per write.

    :param feed: the committed feed (its manifest, as ``compute_changes`` returns it).
    :param uri: the Delta table; created with the change data feed on when absent.
    :param initial_snapshot: the provider's snapshot at A (with identity columns) the new table
        starts from; without it a new table starts empty.
    :param storage_options: delta-rs's storage options.
    """
    from deltalake import CommitProperties, DeltaTable, write_deltalake

    changes = feed.settings.get("changes")
    if not changes:
        raise ValueError(f"{feed.manifest_path}: not a change feed's manifest")
    start, end = int(changes["from_write_id"]), int(changes["to_write_id"])
    fs, _ = resolve_filesystem(feed.out)
    schema = pa.schema([f for f in _feed_schema(feed) if f.name not in _FEED_ONLY])
    watermark = delta_watermark(uri, storage_options)
    if watermark is None:
        initial = (
            _initial_rows(initial_snapshot, schema)
            if initial_snapshot is not None
            else schema.empty_table()
        )
        write_deltalake(
            uri,
            initial,
            configuration={"delta.enableChangeDataFeed": "true"},
            commit_properties=CommitProperties(custom_metadata={WRITE_ID_KEY: str(start)}),
            storage_options=storage_options,
        )
        watermark = start
    if end <= watermark:
        return DeltaDelivery(uri, (), watermark)  # delivered already
    if start != watermark:
        raise ValueError(
            f"the Delta table {uri} stands at write {watermark}: a feed from write {start} "
            f"does not follow on (deliver the feed from {watermark} first)"
        )
    rows = _read_files(feed, fs, ())
    versions = []
    table = DeltaTable(uri, storage_options=storage_options)
    names = schema.names
    if rows is not None and rows.num_rows:
        first = pa.scalar(start + 1, pa.int64())  # an identity diff's deletes carry no write
        writes = pc.fill_null(rows["_commit_write_id"], first)
        rows = rows.set_column(
            rows.schema.get_field_index("_commit_write_id"), "_commit_write_id", writes
        )
        for write in sorted(set(pc.unique(writes).to_pylist())):
            group = rows.filter(pc.equal(writes, write))
            source = _merge_source(group, names, tuple(changes.get("key") or ()))
            if source.num_rows == 0:
                continue
            _merge(table, source, names, write if write < end else end, CommitProperties)
            versions.append(table.version())
    if not versions or table.history(1)[0].get(WRITE_ID_KEY) != str(end):
        write_deltalake(  # the watermark, when the last write changed nothing here
            table,
            schema.empty_table(),
            mode="append",
            commit_properties=CommitProperties(custom_metadata={WRITE_ID_KEY: str(end)}),
            storage_options=storage_options,
        )
        versions.append(DeltaTable(uri, storage_options=storage_options).version())
    return DeltaDelivery(uri, tuple(versions), end)


def _feed_schema(feed: SnapshotResult) -> pa.Schema:
    from .parquet_files import output_schema

    fields = list(output_schema(feed.settings))
    fields += [
        pa.field(IDENTITY[0], pa.int64(), nullable=False),
        pa.field(IDENTITY[1], pa.int32(), nullable=False),
        pa.field(IDENTITY[2], pa.int64(), nullable=False),
    ]
    return pa.schema(fields)


def _merge_source(group: pa.Table, names: Sequence[str], key: Sequence[str]) -> pa.Table:
    """One write's changes as a ``MERGE`` source: the row, the identity it matches, the op."""
    types = group["_change_type"].to_pylist()
    ids = list(zip(*(group[c].to_pylist() for c in IDENTITY), strict=True))
    adds = [t in ("insert", "update_postimage") for t in types]
    added = {i for i, a in zip(ids, adds, strict=True) if a}
    cancelled = added & {i for i, a in zip(ids, adds, strict=True) if not a}
    keys = list(zip(*(group[k].to_pylist() for k in key), strict=True)) if key else []
    preimages: dict[tuple, list[int]] = {}
    for row, kind in enumerate(types):
        if kind == "update_preimage" and ids[row] not in cancelled:
            preimages.setdefault(keys[row], []).append(row)
    chosen: list[tuple[int, str, tuple]] = []  # (row, op, identity matched)
    carried: set[int] = set()  # pre-images an update carries
    for row, kind in enumerate(types):
        if kind == "update_postimage" and ids[row] not in cancelled:
            candidates = preimages.get(keys[row])
            if candidates:
                pre = candidates.pop(0)
                carried.add(pre)
                chosen.append((row, "update", ids[pre]))
            else:
                chosen.append((row, "insert", ids[row]))
    for row, kind in enumerate(types):
        if ids[row] in cancelled or row in carried or kind == "update_postimage":
            continue
        chosen.append((row, "insert" if adds[row] else "delete", ids[row]))
    rows = group.take(pa.array([c[0] for c in chosen], pa.int64()))
    match = [
        pa.array([c[2][i] for c in chosen], group.schema.field(name).type)
        for i, name in enumerate(IDENTITY)
    ]
    columns = [rows[n] for n in names] + match + [pa.array([c[1] for c in chosen])]
    return pa.Table.from_arrays(columns, names=[*names, *_MATCH, _OP])


def _merge(table: Any, source: pa.Table, names: Sequence[str], write: int, props: Any) -> None:
    predicate = " AND ".join(f"t.{c} = s.{m}" for c, m in zip(IDENTITY, _MATCH, strict=True))
    values = {n: f"s.`{n}`" for n in names}
    (
        table.merge(
            source,
            predicate=predicate,
            source_alias="s",
            target_alias="t",
            commit_properties=props(custom_metadata={WRITE_ID_KEY: str(write)}),
        )
        .when_matched_delete(predicate=f"s.{_OP} = 'delete'")
        .when_matched_update(updates=values, predicate=f"s.{_OP} = 'update'")
        .when_not_matched_insert(updates=values, predicate=f"s.{_OP} = 'insert'")
        .execute()
    )


__all__ = ["DeltaDelivery", "WRITE_ID_KEY", "delta_watermark", "deliver_to_delta"]
