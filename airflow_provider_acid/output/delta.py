"""The Delta Lake sink: each committed snapshot becomes one commit of a Delta table, through
delta-rs (the ``deltalake`` package), over the compaction's own Parquet files.

The table lives in the output folder itself (``OUT/_delta_log/``, a hidden path the Parquet
protocol leaves alone), so the snapshot's data files are the table's data files as they are: no
rewrite, no copy. Their paths are relative to the table root, and their Hive-style ``k=v``
partition folders give each file's ``partitionValues`` (typed by the plan's partition columns).

One commit per snapshot: a write transaction whose ``add`` actions are the snapshot's files the
table does not hold yet and whose ``remove`` actions are the table's files the snapshot no
longer lists (``DeltaTable.create_write_transaction`` with ``deltalake.transaction.AddAction``
and ``RemoveAction``; the first snapshot creates the table with its files in version 0). With
incremental snapshots the files of unchanged buckets are listed again by the new manifest, so
they stay in the table untouched; only changed buckets' files are removed and added.

Each commit's ``commitInfo`` carries ``airflow_acid`` (the provider's snapshot id and sequence,
the source table, its write-id and transaction lists, the highest write id, the manifest) and a
``userMetadata`` text with the same core fields, and a ``txn`` action (app id
``airflow-provider-acid``, version = the snapshot's sequence). Publishing is idempotent: a
snapshot whose id a provider commit of the table already records is not committed again.

The Delta commit comes after the Parquet manifest (the caller publishes a committed
:class:`~.records.SnapshotResult`): a run killed between the two leaves the manifest committed
and the log without it, and the re-run, which finds the manifest committed, publishes it.
Publishing and expiry hold the output folder's commit lock (:mod:`.commit_lock`), as Parquet
commits and expiries do, so none of those runs between reading the table and committing.

Expiry (:meth:`DeltaSink.expire`) keeps the Delta versions of the newest ``keep`` published
snapshots: Delta's ``vacuum`` (lite mode, no retention period, ``keep_versions`` = those
versions) deletes the files the log removed and no kept version references, then the Parquet
protocol's :func:`~.protocol.expire_snapshots` removes older manifests and any other file no
kept manifest references, keeping every manifest from the oldest kept version's snapshot on.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import posixpath
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from decimal import Decimal
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq

from ..acid.hive_types import HiveType, HiveTypeError, partition_scalar
from ..acid.listing import location_uri, resolve_filesystem
from ..acid.partitions import parse_partition_component
from .commit_lock import commit_lock
from .expiry import expire_locked
from .parquet_files import output_schema
from .protocol import committed_snapshots
from .publication import Publication, SinkError
from .records import ExpireResult, OutputFile, SnapshotResult

#: The key of the provider's record in each commit's ``commitInfo``.
COMMIT_KEY = "airflow_acid"
#: The ``txn`` application id of the provider's commits.
APP_ID = "airflow-provider-acid"
#: Option keys the Delta sink knows (``open_sink("delta", out, options=...)``).
OPTION_KEYS = ("uri", "name", "description", "configuration", "storage_options")
#: String statistics longer than this are left out of ``add.stats`` (as Delta's own writers
#: truncate them; left out is never wrong, a truncated maximum would be).
STRING_STATS_LIMIT = 32


@dataclass(frozen=True)
class DeltaOptions:
    """The Delta sink's settings.

    ``uri`` is the table's location: the output folder (the default; the data files must lie
    below the table root, so no other location is accepted). ``name``, ``description`` and
    ``configuration`` (table properties) are set when the table is created.
    ``storage_options`` are delta-rs's own (``AWS_ENDPOINT_URL``...); without them they are
    derived from the fsspec ``storage_options`` of the output folder (see
    :func:`delta_storage_options`).
    """

    name: str | None = None
    description: str | None = None
    configuration: Mapping[str, str | None] | None = None
    storage_options: Mapping[str, str] | None = None

    @classmethod
    def from_options(cls, options: Mapping[str, Any], table_uri: str) -> DeltaOptions:
        unknown = sorted(set(options) - set(OPTION_KEYS))
        if unknown:
            raise ValueError(
                f"unknown Delta sink options {unknown}; known: {', '.join(OPTION_KEYS)}"
            )
        uri = options.get("uri")
        if uri is not None and not _same_location(str(uri), table_uri):
            raise ValueError(
                f"Delta sink option uri={uri!r}: the Delta table is the output folder "
                f"{table_uri!r} itself (its data files are the snapshot's own Parquet files, "
                "which must lie below the table root); leave uri out or give the output folder"
            )
        configuration = options.get("configuration")
        storage = options.get("storage_options")
        return cls(
            name=options.get("name"),
            description=options.get("description"),
            configuration=dict(configuration) if configuration else None,
            storage_options={k: str(v) for k, v in storage.items()} if storage else None,
        )


def _same_location(a: str, b: str) -> bool:
    def norm(text: str) -> str:
        text = text.rstrip("/")
        if text.startswith("file://"):
            text = text[len("file://") :]
        return text if "://" in text else os.path.abspath(text)

    return norm(a) == norm(b)


def check_timestamp_unit(unit: str) -> None:
    """Refuse snapshots written with timestamps finer or coarser than microseconds: Delta's
    ``timestamp_ntz`` (and ``timestamp``) hold microseconds."""
    if unit != "us":
        raise SinkError(
            f"Delta stores timestamps in microseconds, and the snapshot is written with "
            f"timestamp_unit={unit!r}: use timestamp_unit='us' (--timestamp-unit us) with the "
            "Delta sink"
        )


def delta_storage_options(fsspec_options: Mapping[str, Any] | None) -> dict[str, str] | None:
    """delta-rs storage options for an S3 output folder opened with these s3fs options.

    ``key``/``secret``/``token`` become the AWS credentials, ``endpoint_url`` (also inside
    ``client_kwargs``) the endpoint (plain HTTP allowed when it is ``http://``), ``region_name``
    the region. Commits use delta-rs's unsafe-rename mode on S3: the protocol already requires one
    writer per output folder at a time.
    """
    if not fsspec_options:
        return None
    client = dict(fsspec_options.get("client_kwargs") or {})
    found = {
        "AWS_ACCESS_KEY_ID": fsspec_options.get("key"),
        "AWS_SECRET_ACCESS_KEY": fsspec_options.get("secret"),
        "AWS_SESSION_TOKEN": fsspec_options.get("token"),
        "AWS_ENDPOINT_URL": fsspec_options.get("endpoint_url") or client.get("endpoint_url"),
        "AWS_REGION": client.get("region_name") or fsspec_options.get("region_name"),
    }
    options = {k: str(v) for k, v in found.items() if v}
    if options.get("AWS_ENDPOINT_URL", "").startswith("http://"):
        options["AWS_ALLOW_HTTP"] = "true"
    options["AWS_S3_ALLOW_UNSAFE_RENAME"] = "true"
    return options


# -- partition values and statistics -------------------------------------------------------


def _delta_value(value: Any) -> str:
    """A typed partition value in Delta's ``partitionValues`` text form."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dt.datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S.%f")
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return format(value, "f")
    return str(value)


def partition_values(
    path: str, partition_columns: Sequence[Mapping[str, Any]], timestamp_unit: str = "us"
) -> dict[str, str | None]:
    """The ``partitionValues`` of a data file from its ``k=v`` folders (relative ``path``)."""
    if not partition_columns:
        return {}
    found: dict[str, str | None] = {}
    for component in posixpath.dirname(path).split("/"):
        parsed = parse_partition_component(component) if component else None
        if parsed is not None:
            found[parsed[0].lower()] = parsed[1]
    values: dict[str, str | None] = {}
    for column in partition_columns:
        name = column["name"]
        if name.lower() not in found:
            raise SinkError(f"data file {path} lies in no {name}=... partition folder")
        raw = found[name.lower()]
        if raw is None:
            values[name] = None
            continue
        try:
            scalar = partition_scalar(
                name, raw, HiveType.parse(column["hive_type"]), timestamp_unit
            )
        except HiveTypeError as exc:
            raise SinkError(f"data file {path}: {exc}") from None
        values[name] = _delta_value(scalar.as_py())
    return values


def _stat_value(value: Any) -> Any | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, dt.datetime):
        return None  # Delta's timestamp statistics are in milliseconds: left out
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, str):
        return value if len(value) <= STRING_STATS_LIMIT else None
    return None  # floats (NaN), decimals, binary: left out


def file_statistics(metadata: pq.FileMetaData, skip: set[str]) -> dict[str, Any]:
    """Delta ``stats`` of a Parquet file from its footer: numRecords, and per top-level
    primitive column (``skip`` aside) its null count and, where exact, its minimum and maximum
    (integers, dates, short strings); a column without complete footer statistics is left out.
    """
    nulls: dict[str, int] = {}
    mins: dict[str, Any] = {}
    maxs: dict[str, Any] = {}
    leaves = {metadata.schema.column(i).path: i for i in range(metadata.num_columns)}
    groups = [metadata.row_group(g) for g in range(metadata.num_row_groups)]
    for field in metadata.schema.to_arrow_schema():
        if field.name in skip or pa.types.is_nested(field.type) or field.name not in leaves:
            continue
        index = leaves[field.name]
        column = [group.column(index).statistics for group in groups]
        if not column or any(s is None or not s.has_null_count for s in column):
            continue
        nulls[field.name] = sum(s.null_count for s in column)
        # a row group of nulls only has no minimum or maximum
        if not all(s.has_min_max or s.num_values == 0 for s in column):
            continue
        lows = [_stat_value(s.min) for s in column if s.has_min_max]
        highs = [_stat_value(s.max) for s in column if s.has_min_max]
        if lows and None not in lows and None not in highs:
            mins[field.name], maxs[field.name] = min(lows), max(highs)
    return {
        "numRecords": metadata.num_rows,
        "minValues": mins,
        "maxValues": maxs,
        "nullCount": nulls,
    }


# -- the sink --------------------------------------------------------------------------------


def _deltalake():
    try:
        import deltalake
        from deltalake import transaction
    except ImportError as exc:  # pragma: no cover - the delta extra is missing
        raise SinkError(
            "the Delta sink needs delta-rs: pip install 'airflow-provider-acid[delta]'"
        ) from exc
    return deltalake, transaction


def _epoch_ms(timestamp: str) -> int:
    """An ISO timestamp of the manifest (``...Z``) in milliseconds since the epoch."""
    value = dt.datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.timezone.utc)
    return int(value.timestamp() * 1000)


class DeltaSink:
    """Publishes committed snapshots of ``out_uri`` as commits of the Delta table there."""

    output_format = "delta"

    def __init__(
        self,
        out_uri: str,
        *,
        options: Mapping[str, Any] | None = None,
        storage_options: Mapping[str, Any] | None = None,
    ) -> None:
        self.out_uri = out_uri
        self.storage_options = dict(storage_options) if storage_options else None
        self.fs, self.root = resolve_filesystem(out_uri, None, self.storage_options)
        #: the table's URI, as readers open it (the output folder)
        self.table_uri = location_uri(self.fs, self.root)
        self.options = DeltaOptions.from_options(options or {}, self.table_uri)
        if self.options.storage_options:
            self._delta_storage = dict(self.options.storage_options)
        elif self.table_uri.startswith(("s3://", "s3a://")):
            self._delta_storage = delta_storage_options(self.storage_options)
        else:
            self._delta_storage = None

    # -- reading the table -------------------------------------------------------------------

    def open_table(self, version: int | None = None):
        """The Delta table (at ``version``), or None if the output folder holds none yet."""
        deltalake, _ = _deltalake()
        try:
            return deltalake.DeltaTable(
                self.table_uri, version=version, storage_options=self._delta_storage
            )
        except deltalake.exceptions.TableNotFoundError:
            return None

    def provider_commits(self, table=None) -> list[tuple[int, dict[str, Any]]]:
        """(version, the provider's commit record) of each provider commit, oldest first."""
        table = table if table is not None else self.open_table()
        if table is None:
            return []
        found = [
            (int(entry["version"]), entry[COMMIT_KEY])
            for entry in table.history()
            if isinstance(entry.get(COMMIT_KEY), Mapping) and "version" in entry
        ]
        return sorted(found, key=lambda item: item[0])

    def published_version(self, snapshot_id: str) -> int | None:
        """The table version that published ``snapshot_id`` (None if none did)."""
        for version, record in self.provider_commits():
            if record.get("snapshot_id") == snapshot_id:
                return version
        return None

    # -- publishing --------------------------------------------------------------------------

    def asset_uri(self) -> str:
        """The table as an Airflow asset URI: its location, ``file://`` for a local folder."""
        if "://" in self.table_uri:
            return self.table_uri.rstrip("/")
        return "file://" + self.root

    def _publication(self, version: int, newly: bool) -> Publication:
        return Publication(
            "delta",
            self.asset_uri(),
            version,
            newly,
            {"uri": self.table_uri, "version": version},
        )

    def _commit_record(self, result: SnapshotResult, added: int, removed: int) -> dict[str, Any]:
        return {
            COMMIT_KEY: {
                "snapshot_id": result.snapshot_id,
                "sequence": result.sequence,
                "committed_at": result.committed_at,
                "source_table": result.table,
                "table_name": result.table_name,
                "write_ids": result.write_ids,
                "txns": result.txns,
                "max_write_id": result.max_write_id,
                "manifest": posixpath.relpath(result.manifest_path, result.out),
                "previous_snapshot_id": result.previous_snapshot_id,
                "added_files": added,
                "removed_files": removed,
                "rows": result.rows_written,
            },
            "userMetadata": json.dumps(
                {
                    "airflow_acid_snapshot_id": result.snapshot_id,
                    "source_table": result.table,
                    "write_ids": result.write_ids,
                },
                sort_keys=True,
            ),
        }

    def _add_actions(self, result: SnapshotResult, files: Sequence[OutputFile]) -> list[Any]:
        _, transaction = _deltalake()
        settings = result.settings
        partition_columns = settings["partition_columns"]
        skip = {c["name"] for c in partition_columns}
        committed_ms = _epoch_ms(result.committed_at)

        def action(file: OutputFile):
            path = posixpath.join(self.root, file.path)
            with self.fs.open(path, "rb") as handle:
                metadata = pq.ParquetFile(handle).metadata
            if metadata.num_rows != file.rows:
                raise SinkError(
                    f"{self.table_uri}: data file {file.path} holds {metadata.num_rows} rows, "
                    f"its manifest {result.manifest_path} records {file.rows}"
                )
            return transaction.AddAction(
                path=file.path,
                size=file.size,
                partition_values=partition_values(
                    file.path, partition_columns, settings["timestamp_unit"]
                ),
                # written before the manifest: its commit time (saves a HEAD per file)
                modification_time=committed_ms,
                data_change=True,
                stats=json.dumps(file_statistics(metadata, skip)),
            )

        with ThreadPoolExecutor(max_workers=8) as pool:
            return list(pool.map(action, files))

    def _schema(self, result: SnapshotResult):
        deltalake, _ = _deltalake()
        settings = result.settings
        arrow = output_schema(settings)
        if settings["timestamp_unit"] != "us" and any(pa.types.is_timestamp(f.type) for f in arrow):
            raise SinkError(
                f"{self.table_uri}: Delta stores timestamps in microseconds, and snapshot "
                f"{result.snapshot_id} has them in {settings['timestamp_unit']}: compact with "
                "timestamp_unit='us' for the Delta sink"
            )
        # Hive types stay in each field's metadata (hive_type), as in the Parquet files.
        return deltalake.Schema.from_arrow(arrow)

    def publish(self, result: SnapshotResult) -> Publication:
        """Commit ``result`` as one Delta version (idempotent; see the module docstring).

        Holds the output folder's commit lock (:mod:`.commit_lock`) meanwhile, so that no
        Parquet commit or expiry of the same folder runs between reading the table's files and
        committing."""
        purpose = f"Delta commit of snapshot {result.snapshot_id}"
        with commit_lock(self.fs, self.root, purpose):
            return self._publish_locked(result)

    def _publish_locked(self, result: SnapshotResult) -> Publication:
        deltalake, transaction = _deltalake()
        schema = self._schema(result)
        partition_by = [c["name"] for c in result.settings["partition_columns"]]
        table = self.open_table()
        commits = self.provider_commits(table)
        for version, record in commits:
            if record.get("snapshot_id") == result.snapshot_id:
                return self._publication(version, False)
        if table is not None:
            self._check_table(table, commits, result, schema, partition_by)
        wanted = {f.path: f for f in result.files}
        current = self._active_files(table) if table is not None else {}
        added = [f for path, f in wanted.items() if path not in current]
        removed = sorted(set(current) - set(wanted))
        adds = self._add_actions(result, added)
        properties = transaction.CommitProperties(
            custom_metadata=self._commit_record(result, len(adds), len(removed)),
            app_transactions=[transaction.Transaction(APP_ID, result.sequence)],
        )
        try:
            if table is None:
                transaction.create_table_with_add_actions(
                    self.table_uri,
                    schema,
                    adds,
                    mode="error",
                    partition_by=partition_by or None,
                    name=self.options.name,
                    description=self.options.description,
                    configuration=self.options.configuration,
                    storage_options=self._delta_storage,
                    commit_properties=properties,
                )
            else:
                now = int(time.time() * 1000)
                removes = [
                    transaction.RemoveAction(
                        path,
                        True,
                        now,
                        current[path],
                        partition_values(
                            path,
                            result.settings["partition_columns"],
                            result.settings["timestamp_unit"],
                        )
                        if partition_by
                        else {},
                    )
                    for path in removed
                ]
                table.create_write_transaction(
                    [*adds, *removes],
                    mode="append",
                    schema=schema,
                    partition_by=partition_by or None,
                    commit_properties=properties,
                )
        except deltalake.exceptions.DeltaError as exc:
            raise SinkError(
                f"Delta table {self.table_uri}: committing snapshot {result.snapshot_id} "
                f"failed: {exc}"
            ) from exc
        version = self.published_version(result.snapshot_id)
        if version is None:  # pragma: no cover - the commit returned without error
            raise SinkError(
                f"Delta table {self.table_uri}: no version records snapshot "
                f"{result.snapshot_id} after its commit"
            )
        return self._publication(version, True)

    def _check_table(
        self,
        table: Any,
        commits: Sequence[tuple[int, Mapping[str, Any]]],
        result: SnapshotResult,
        schema: Any,
        partition_by: list[str],
    ) -> None:
        if not commits:
            raise SinkError(
                f"{self.table_uri} holds a Delta table this provider did not write (no commit "
                f"records {COMMIT_KEY}): refusing to publish snapshot {result.snapshot_id} "
                "over it; give another output folder"
            )
        latest_version, latest = commits[-1]
        if int(latest.get("sequence", 0)) > result.sequence:
            raise SinkError(
                f"Delta table {self.table_uri}: version {latest_version} holds snapshot "
                f"{latest.get('snapshot_id')} (sequence {latest.get('sequence')}), newer than "
                f"snapshot {result.snapshot_id} (sequence {result.sequence}): not publishing "
                "an older snapshot over it"
            )
        metadata = table.metadata()
        have = json.loads(table.schema().to_json())
        want = json.loads(schema.to_json())
        if have != want or list(metadata.partition_columns) != partition_by:
            raise SinkError(
                f"Delta table {self.table_uri}: snapshot {result.snapshot_id} has other columns "
                f"or partition columns than the table ({partition_by} vs "
                f"{list(metadata.partition_columns)}): the output settings changed; write it "
                "to a new output folder"
            )

    @staticmethod
    def _active_files(table: Any) -> dict[str, int]:
        """The table's data files (path relative to the root, as on storage) -> size.

        The log holds paths URI-encoded (``p=a%253Ab`` for the folder ``p=a%3Ab``) and delta-rs
        lists them so; the actions it is given take the path as on storage and encode it."""
        actions = pa.table(table.get_add_actions(flatten=True))
        paths = [unquote(p) for p in actions["path"].to_pylist()]
        return dict(zip(paths, actions["size_bytes"].to_pylist(), strict=True))

    # -- expiry ------------------------------------------------------------------------------

    def expire(self, keep: int) -> ExpireResult:
        """Keep the newest ``keep`` published snapshots: vacuum the Delta table down to their
        versions, then expire the output folder's manifests and files accordingly."""
        if keep < 1:
            raise ValueError("keep must be at least 1: the latest snapshot is never expired")
        with commit_lock(self.fs, self.root, f"Delta expiry keeping {keep} snapshot(s)"):
            return self._expire_locked(keep)

    def _expire_locked(self, keep: int) -> ExpireResult:
        table = self.open_table()
        commits = self.provider_commits(table)
        snapshots = committed_snapshots(self.fs, self.root)
        parquet_keep = keep
        vacuumed: list[str] = []
        if table is not None and commits:
            kept_commits = commits[-keep:]
            kept_ids = {record.get("snapshot_id") for _, record in kept_commits}
            positions = [i for i, s in enumerate(snapshots) if s.snapshot_id in kept_ids]
            if positions:
                parquet_keep = max(keep, len(snapshots) - min(positions))
            protected = {
                f.path for s in snapshots[len(snapshots) - parquet_keep :] for f in s.files
            }
            keep_versions = [version for version, _ in kept_commits]
            vacuum = {
                "retention_hours": 0,
                "enforce_retention_duration": False,
                "full": False,
                "keep_versions": keep_versions,
            }
            # vacuum names files as on storage (the log's paths decoded)
            candidates = table.vacuum(dry_run=True, **vacuum)
            clash = sorted(set(candidates) & protected)
            if clash:
                raise SinkError(
                    f"Delta table {self.table_uri}: vacuum would delete {len(clash)} file(s) a "
                    f"kept manifest lists ({', '.join(clash[:5])}); nothing was deleted"
                )
            if candidates:
                vacuumed = table.vacuum(dry_run=False, **vacuum)
        # the Parquet protocol's expiry, under the lock this expiry already holds
        expired = expire_locked(self.fs, self.root, parquet_keep)
        return ExpireResult(
            expired.kept,
            expired.removed_snapshots,
            tuple(sorted(set(expired.removed_files) | set(vacuumed))),
        )
