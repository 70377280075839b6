"""The Iceberg sink: each committed snapshot published as one Iceberg snapshot, through pyiceberg.

The table's data files are the snapshot's own Parquet files, added with their full column
metrics read from each file's footer (no rewrite); the table's location is the output folder
and its metadata lives in ``OUT/_iceberg/metadata`` (a hidden path, which folder readers and
the commit protocol skip).

Options (``open_sink("iceberg", OUT, options=...)``; on the CLI ``--iceberg-catalog KEY=VALUE``
and ``--iceberg-table NS.NAME``):

* ``catalog`` - pyiceberg catalog properties (``type``, ``uri``, ``warehouse``, ...). Default:
  the embedded SQL catalog on SQLite in ``OUT/_iceberg/catalog.db`` (a local ``OUT`` only);
  ``type=hive`` becomes :class:`.iceberg_hive.Hive4Catalog` (Hive 4 metastores lack the
  ``get_table`` call pyiceberg 0.12 makes);
* ``catalog_name`` - the name pyiceberg gives the catalog (default ``acid``);
* ``table`` - ``namespace.name`` (default ``acid.<source table name>``, or ``acid.<folder
  name of the table>`` when read by path); the namespace is created when missing.

A publication:

* the first one creates the table and its first snapshot in one catalog commit (no reader ever
  sees the table without a snapshot);
* later ones are one ``overwrite`` snapshot each: the data files no longer listed are deleted
  and the new ones appended in one commit, so buckets reused unchanged keep their files;
* the snapshot summary records the provider's snapshot id, the source table, its write-id and
  transaction lists (``airflow-acid.*`` keys); a provider snapshot already in the table's
  history (current snapshot and its ancestors) is not published again.

The catalog commit is the table readers' commit point, and it happens after the Parquet
manifest's commit: a run killed in between leaves the table as it was, and the re-run finds the
manifest committed and publishes it. Metadata files that no snapshot of the table references
(those of a killed publication) are removed after each publication and by :meth:`expire`.
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from ..acid.listing import resolve_filesystem
from .commit_lock import commit_lock
from .iceberg_schema import (
    IcebergSchemaError,
    check_settings,
    describe_schema,
    iceberg_schema,
    partition_spec,
)
from .protocol import committed_snapshots
from .publication import Publication, SinkError
from .records import ExpireResult, SnapshotResult

ICEBERG_DIR = "_iceberg"
METADATA_DIR = f"{ICEBERG_DIR}/metadata"
CATALOG_FILE = f"{ICEBERG_DIR}/catalog.db"
DEFAULT_CATALOG_NAME = "acid"
DEFAULT_NAMESPACE = "acid"
NAME_MAPPING_PROPERTY = "schema.name-mapping.default"

#: Snapshot summary keys the sink records (strings, as Iceberg summaries are).
SUMMARY_SNAPSHOT_ID = "airflow-acid.snapshot-id"
SUMMARY_SOURCE_TABLE = "airflow-acid.source-table"
SUMMARY_SOURCE_NAME = "airflow-acid.source-name"
SUMMARY_WRITE_IDS = "airflow-acid.write-ids"
SUMMARY_TXNS = "airflow-acid.txns"
SUMMARY_MAX_WRITE_ID = "airflow-acid.max-write-id"
SUMMARY_SEQUENCE = "airflow-acid.sequence"

#: Catalog property names whose values are secrets: left out of what the sink prints.
_SECRET = re.compile(r"(secret|password|token|credential|session)", re.IGNORECASE)
_NAME_PART = re.compile(r"[^a-z0-9_]+")


def _table_properties(location: str) -> dict[str, str]:
    return {
        "format-version": "2",
        "write.metadata.path": posixpath.join(location, METADATA_DIR),
        # the summary's bounds must be exact: string partition values are read from them
        "write.metadata.metrics.default": "full",
        "write.metadata.delete-after-commit.enabled": "true",
        "write.metadata.previous-versions-max": "20",
        "airflow-acid.written-by": "airflow-provider-acid",
    }


def _location(out_uri: str) -> str:
    """The table location: ``OUT`` as a URI (``file:///...`` for a local folder)."""
    if "://" in out_uri:
        return out_uri.rstrip("/")
    return "file://" + os.path.abspath(out_uri).rstrip("/")


def _is_local(location: str) -> bool:
    return location.startswith("file://")


def _local_path(location: str) -> str:
    return location[len("file://") :] if location.startswith("file://") else location


def _file_io_properties(storage_options: Mapping[str, Any] | None) -> dict[str, str]:
    """fsspec S3 storage options as pyiceberg FileIO properties (the keys both know)."""
    options = dict(storage_options or {})
    props: dict[str, str] = {}
    client = dict(options.get("client_kwargs") or {})
    endpoint = options.get("endpoint_url") or client.get("endpoint_url")
    if endpoint:
        props["s3.endpoint"] = str(endpoint)
    for ours, theirs in (
        ("key", "s3.access-key-id"),
        ("secret", "s3.secret-access-key"),
        ("token", "s3.session-token"),
    ):
        if options.get(ours):
            props[theirs] = str(options[ours])
    region = client.get("region_name") or options.get("region_name")
    if region:
        props["s3.region"] = str(region)
    return props


def default_catalog_properties(out_uri: str) -> dict[str, str]:
    """The embedded default: an SQL catalog on SQLite inside a local output folder."""
    location = _location(out_uri)
    if not _is_local(location):
        raise SinkError(
            f"the embedded Iceberg catalog (SQLite) needs a local output folder, not {out_uri}: "
            "name a catalog with --iceberg-catalog type=rest uri=... (or options['catalog'])"
        )
    root = _local_path(location)
    return {
        "type": "sql",
        "uri": f"sqlite:///{posixpath.join(root, CATALOG_FILE)}",
        "warehouse": posixpath.join(location, ICEBERG_DIR, "warehouse"),
    }


def public_catalog_properties(properties: Mapping[str, str]) -> dict[str, str]:
    """Catalog properties without secrets (what ``--json`` prints)."""
    return {k: v for k, v in properties.items() if not _SECRET.search(k)}


def default_identifier(table_root: str, table_name: str | None) -> str:
    """``acid.<name>``: the source table's name (by name) or its folder's name (by path)."""
    name = table_name.split(".")[-1] if table_name else posixpath.basename(table_root.rstrip("/"))
    cleaned = _NAME_PART.sub("_", name.lower()).strip("_") or "snapshot"
    return f"{DEFAULT_NAMESPACE}.{cleaned}"


def parse_identifier(text: str) -> tuple[str, str]:
    """``namespace.name`` -> (namespace, name); an error naming the argument otherwise."""
    parts = str(text).strip().split(".")
    if len(parts) < 2 or not all(parts):
        raise ValueError(f"iceberg table {text!r} is not namespace.name (e.g. acid.nation)")
    return ".".join(parts[:-1]), parts[-1]


def iceberg_asset_uri(catalog: Mapping[str, str], identifier: str) -> str:
    """The table as an Airflow asset URI: ``iceberg://<catalog host or file>/<ns>/<name>``.

    A catalog with a server (REST, Hive) is named by its host and port, the embedded SQL
    catalog by its database file's path on ``localhost`` (as ``file://localhost/...`` names a
    local file: Airflow keeps no URI with an empty authority)."""
    namespace, name = parse_identifier(identifier)
    uri = str(catalog.get("uri", ""))
    parts = urlsplit(uri)
    if parts.scheme.startswith("sqlite"):
        where = uri.split(":///", 1)[-1]
        authority = "localhost/" + where.lstrip("/")
    elif parts.netloc:
        authority = parts.netloc.rsplit("@", 1)[-1] + parts.path.rstrip("/")
    else:
        authority = str(catalog.get("warehouse", "")).split("://", 1)[-1]
    path = "/".join(namespace.split(".") + [name])
    return f"iceberg://{authority.rstrip('/')}/{path}"


@dataclass(frozen=True)
class IcebergOptions:
    """The Iceberg sink's settings (see the module docstring)."""

    catalog: Mapping[str, str]
    catalog_name: str = DEFAULT_CATALOG_NAME
    table: str | None = None

    @classmethod
    def from_options(cls, options: Mapping[str, Any] | None, out_uri: str) -> IcebergOptions:
        settings = dict(options or {})
        known = {"catalog", "catalog_name", "table"}
        unknown = sorted(set(settings) - known)
        if unknown:
            raise ValueError(f"unknown iceberg options {unknown}; known: {sorted(known)}")
        catalog = settings.get("catalog")
        if catalog:
            from .iceberg_hive import hive4_properties

            catalog = hive4_properties({str(k): str(v) for k, v in dict(catalog).items()})
        else:
            catalog = default_catalog_properties(out_uri)
        table = settings.get("table")
        if table:
            parse_identifier(table)
        return cls(catalog, str(settings.get("catalog_name") or DEFAULT_CATALOG_NAME), table)


@dataclass
class IcebergSink:
    """Publishes the committed snapshots of ``out_uri`` as snapshots of one Iceberg table."""

    out_uri: str
    options: Mapping[str, Any] | None = None
    storage_options: Mapping[str, Any] | None = None
    output_format: str = "iceberg"
    settings: IcebergOptions = field(init=False)
    location: str = field(init=False)

    def __post_init__(self) -> None:
        self.settings = IcebergOptions.from_options(self.options, self.out_uri)
        self.location = _location(self.out_uri)

    # -- the catalog ---------------------------------------------------------------------------

    def catalog(self) -> Any:
        """The pyiceberg catalog the options name (the embedded one is created when missing)."""
        from pyiceberg.catalog import load_catalog

        properties = {**_file_io_properties(self.storage_options), **self.settings.catalog}
        if properties.get("type") == "sql" and str(properties.get("uri", "")).startswith(
            "sqlite:///"
        ):
            folder = posixpath.dirname(properties["uri"][len("sqlite:///") :])
            os.makedirs(folder or ".", exist_ok=True)
        try:
            return load_catalog(self.settings.catalog_name, **properties)
        except Exception as exc:  # noqa: BLE001 - any failure to open it names the catalog
            raise SinkError(
                f"cannot open the Iceberg catalog {public_catalog_properties(properties)}: {exc}"
            ) from exc

    def identifier(self, result: SnapshotResult | None = None) -> str:
        """The table's ``namespace.name`` (the option, else derived from the source table)."""
        if self.settings.table:
            return self.settings.table
        if result is None:
            fs, root = resolve_filesystem(self.out_uri, None, _dict(self.storage_options))
            snapshots = committed_snapshots(fs, root)
            if not snapshots:
                raise SinkError(
                    f"{self.out_uri} holds no committed snapshot: name the table "
                    "(--iceberg-table NS.NAME)"
                )
            result = snapshots[-1]
        return default_identifier(result.table, result.table_name)

    def details(
        self, identifier: str, snapshot_id: int | None, metadata_location: str | None = None
    ) -> dict[str, Any]:
        """The ``--json`` block: enough for a script to open the table (by catalog and name,
        or by its metadata file, as DuckDB's ``iceberg_scan`` does)."""
        return {
            "catalog": public_catalog_properties(self.settings.catalog),
            "catalog_name": self.settings.catalog_name,
            "table": identifier,
            "snapshot_id": snapshot_id,
            "metadata_location": metadata_location,
        }

    def asset_uri(self, identifier: str) -> str:
        return iceberg_asset_uri(self.settings.catalog, identifier)

    def _publication(
        self, identifier: str, table: Any, snapshot_id: int | None, newly: bool
    ) -> Publication:
        return Publication(
            "iceberg",
            self.asset_uri(identifier),
            snapshot_id,
            newly,
            self.details(identifier, snapshot_id, table.metadata_location),
        )

    def load_table(self, identifier: str | None = None) -> Any:
        """The pyiceberg Table (an error naming it when the catalog does not hold it)."""
        from pyiceberg.exceptions import NoSuchTableError

        name = identifier or self.identifier()
        try:
            return self.catalog().load_table(name)
        except NoSuchTableError:
            raise SinkError(f"Iceberg table {name} is not in the catalog") from None

    # -- publishing ----------------------------------------------------------------------------

    def _folder(self) -> tuple[Any, str]:
        return resolve_filesystem(self.out_uri, None, _dict(self.storage_options))

    def publish(self, result: SnapshotResult) -> Publication:
        """Publish the committed snapshot ``result`` as one Iceberg snapshot (idempotent).

        Holds the output folder's commit lock (:mod:`.commit_lock`) meanwhile, as the Parquet
        commit and expiry do: one writer of ``OUT`` and its table at a time."""
        fs, root = self._folder()
        with commit_lock(fs, root, f"Iceberg publication of snapshot {result.snapshot_id}"):
            return self._publish_locked(result)

    def _publish_locked(self, result: SnapshotResult) -> Publication:
        from pyiceberg.exceptions import CommitFailedException, NoSuchTableError

        try:
            check_settings(result.settings)
        except IcebergSchemaError as exc:
            raise SinkError(
                f"snapshot {result.snapshot_id} cannot be an Iceberg table: {exc}"
            ) from None
        identifier = self.identifier(result)
        catalog = self.catalog()
        namespace, _ = parse_identifier(identifier)
        try:
            table = catalog.load_table(identifier)
        except NoSuchTableError:
            table = None
        if table is not None:
            held = published_snapshot(table, result.snapshot_id)
            if held is not None:
                return self._publication(identifier, table, held.snapshot_id, False)
            _check_not_older(table, result, identifier)
        try:
            if table is None:
                catalog.create_namespace_if_not_exists(namespace)
                transaction = self._create_transaction(catalog, identifier, result)
            else:
                transaction = table.transaction()
                self._evolve(transaction, result, identifier)
            self._commit(transaction, result)
        except CommitFailedException as exc:
            raise SinkError(
                f"Iceberg table {identifier}: the commit of snapshot {result.snapshot_id} was "
                f"refused (another writer committed first?): {exc}"
            ) from exc
        table = catalog.load_table(identifier)
        remove_orphan_metadata(table, self.storage_options)
        current = table.current_snapshot()
        return self._publication(identifier, table, current.snapshot_id if current else None, True)

    def _create_transaction(self, catalog: Any, identifier: str, result: SnapshotResult) -> Any:
        schema = iceberg_schema(result.settings)
        return catalog.create_table_transaction(
            identifier,
            schema,
            location=self.location,
            partition_spec=partition_spec(result.settings, schema),
            properties=_table_properties(self.location),
        )

    def _evolve(self, transaction: Any, result: SnapshotResult, identifier: str) -> None:
        """Columns the snapshot adds join the table's schema; other differences are refused."""
        wanted = iceberg_schema(result.settings)
        have = transaction.table_metadata.schema()
        wanted_types, have_types = describe_schema(wanted), describe_schema(have)
        changed = sorted(
            n
            for n in set(wanted_types) & set(have_types)
            if _primitive(wanted_types[n]) != _primitive(have_types[n])
        )
        if changed:
            shown = ", ".join(f"{n}: {have_types[n]} -> {wanted_types[n]}" for n in changed)
            raise SinkError(
                f"Iceberg table {identifier}: snapshot {result.snapshot_id} changes column "
                f"types ({shown}); publish it to a new table (--iceberg-table)"
            )
        wanted_spec = [c["name"] for c in result.settings["partition_columns"]]
        spec = transaction.table_metadata.spec()
        have_spec = [f.name for f in spec.fields]
        if wanted_spec != have_spec:
            raise SinkError(
                f"Iceberg table {identifier} is partitioned by {have_spec or 'nothing'}, "
                f"snapshot {result.snapshot_id} by {wanted_spec or 'nothing'}"
            )
        if set(wanted_types) - set(have_types):
            with transaction.update_schema() as update:
                update.union_by_name(wanted)
            _set_name_mapping(transaction)

    def _commit(self, transaction: Any, result: SnapshotResult) -> None:
        from pyiceberg.io import load_file_io
        from pyiceberg.io.pyarrow import parquet_file_to_data_file

        metadata = transaction.table_metadata
        if metadata.name_mapping() is None:
            _set_name_mapping(transaction)
            metadata = transaction.table_metadata
        io = load_file_io(
            {**_file_io_properties(self.storage_options), **self.settings.catalog},
            self.location,
        )
        current = {f.file_path: f for f in current_data_files(metadata, io)}
        wanted = [posixpath.join(self.location, f.path) for f in result.files]
        added = [p for p in wanted if p not in current]
        listed = set(wanted)
        removed = [f for p, f in current.items() if p not in listed]

        def data_file(path: str) -> Any:  # one footer read: the file's metrics
            return parquet_file_to_data_file(io, metadata, path)

        if len(added) <= 4:
            new_files = [data_file(p) for p in added]
        else:
            with ThreadPoolExecutor(max_workers=8) as pool:
                new_files = list(pool.map(data_file, added))
        summary = snapshot_summary(result)
        with transaction:
            with transaction.update_snapshot(snapshot_properties=summary).overwrite() as change:
                for data_file in removed:
                    change.delete_data_file(data_file)
                for data_file in new_files:
                    change.append_data_file(data_file)

    # -- expiry --------------------------------------------------------------------------------

    def expire(self, keep: int) -> ExpireResult:
        """Keep the newest ``keep`` Iceberg snapshots (Iceberg's snapshot expiration), then the
        output folder's snapshots those reference and every newer one: no file a kept Iceberg
        snapshot references is deleted. Metadata files no kept snapshot references go too."""
        if keep < 1:
            raise ValueError("keep must be at least 1: the latest snapshot is never expired")
        table = self.load_table()
        fs, root = self._folder()
        with commit_lock(fs, root, f"Iceberg expiry keeping {keep} snapshot(s)"):
            return self._expire_locked(table, keep, fs, root)

    def _expire_locked(self, table: Any, keep: int, fs: Any, root: str) -> ExpireResult:
        from pyiceberg.table.snapshots import ancestors_of

        from .expiry import expire_locked as expire_folder_locked

        metadata = table.metadata
        history = list(ancestors_of(table.current_snapshot(), metadata))  # newest first
        kept, expired = history[:keep], history[keep:]
        in_history = {s.snapshot_id for s in history}
        stray = [s for s in metadata.snapshots if s.snapshot_id not in in_history]
        doomed = [s.snapshot_id for s in expired + stray]
        if doomed:
            table.maintenance.expire_snapshots().by_ids(doomed).commit()
            table = self.load_table()
        needed = {
            s.summary.additional_properties.get(SUMMARY_SNAPSHOT_ID) for s in kept if s.summary
        }
        folder = [s.snapshot_id for s in committed_snapshots(fs, root)]
        positions = [i for i, sid in enumerate(folder) if sid in needed]
        keep_folder = max(keep, len(folder) - min(positions)) if positions else len(folder)
        removed = expire_folder_locked(fs, root, max(1, keep_folder))
        metadata_removed = remove_orphan_metadata(table, self.storage_options)
        return ExpireResult(
            removed.kept,
            removed.removed_snapshots,
            tuple(sorted(removed.removed_files + tuple(metadata_removed))),
        )


def _check_not_older(table: Any, result: SnapshotResult, identifier: str) -> None:
    """Refuse to publish a snapshot committed before the one the table shows (an old run's)."""
    current = table.current_snapshot()
    recorded = current.summary.get(SUMMARY_SEQUENCE) if current and current.summary else None
    if recorded is not None and int(recorded) > result.sequence:
        raise SinkError(
            f"Iceberg table {identifier} shows snapshot {current.summary.get(SUMMARY_SNAPSHOT_ID)}"
            f" (sequence {recorded} of {result.out}); {result.snapshot_id} (sequence "
            f"{result.sequence}) is older and is not published over it"
        )


def _set_name_mapping(transaction: Any) -> None:
    """The table's name mapping (Parquet column name -> field id) from its current schema."""
    mapping = transaction.table_metadata.schema().name_mapping.model_dump_json()
    transaction.set_properties(**{NAME_MAPPING_PROPERTY: mapping})


def _dict(value: Mapping[str, Any] | None) -> dict[str, Any] | None:
    return dict(value) if value else None


def _primitive(type_text: str) -> str:
    """A type's text without nested field ids (to compare nested types by shape)."""
    return re.sub(r"\b\d+: ", "", type_text)


def snapshot_summary(result: SnapshotResult) -> dict[str, str]:
    """The ``airflow-acid.*`` snapshot summary properties of a provider snapshot."""
    values = {
        SUMMARY_SNAPSHOT_ID: result.snapshot_id,
        SUMMARY_SOURCE_TABLE: result.table,
        SUMMARY_SOURCE_NAME: result.table_name,
        SUMMARY_WRITE_IDS: result.write_ids,
        SUMMARY_TXNS: result.txns,
        SUMMARY_MAX_WRITE_ID: str(result.max_write_id),
        SUMMARY_SEQUENCE: str(result.sequence),
    }
    return {k: str(v) for k, v in values.items() if v is not None}


def published_snapshot(table: Any, provider_snapshot_id: str) -> Any:
    """The Iceberg snapshot of the table's current history that published the provider
    snapshot ``provider_snapshot_id`` (None if none did)."""
    from pyiceberg.table.snapshots import ancestors_of

    for snapshot in ancestors_of(table.current_snapshot(), table.metadata):
        summary = snapshot.summary
        if summary is not None and summary.get(SUMMARY_SNAPSHOT_ID) == provider_snapshot_id:
            return snapshot
    return None


def current_data_files(metadata: Any, io: Any) -> list[Any]:
    """The data files (pyiceberg DataFile) of the table's current snapshot."""
    snapshot = metadata.current_snapshot()
    if snapshot is None:
        return []
    files = []
    for manifest in snapshot.manifests(io):
        for entry in manifest.fetch_manifest_entry(io, discard_deleted=True):
            files.append(entry.data_file)
    return files


def remove_orphan_metadata(
    table: Any, storage_options: Mapping[str, Any] | None = None
) -> list[str]:
    """Delete files of the table's metadata folder that neither its metadata log nor any of its
    snapshots references (what a killed publication or an expired snapshot left); returns
    their paths relative to the table location. One writer per table, as for ``OUT``."""
    metadata = table.metadata
    folder = metadata.properties.get("write.metadata.path") or posixpath.join(
        metadata.location, "metadata"
    )
    fs, root = resolve_filesystem(_local_path(folder), None, _dict(storage_options))
    keep = {posixpath.basename(table.metadata_location)}
    keep |= {posixpath.basename(entry.metadata_file) for entry in metadata.metadata_log}
    for snapshot in metadata.snapshots:
        keep.add(posixpath.basename(snapshot.manifest_list))
        for manifest in snapshot.manifests(table.io):
            keep.add(posixpath.basename(manifest.manifest_path))
    try:
        present = fs.ls(root, detail=False)
    except FileNotFoundError:
        return []
    removed = []
    location = _local_path(metadata.location).rstrip("/") + "/"
    for path in present:
        name = posixpath.basename(path)
        if name in keep or not name.endswith((".avro", ".metadata.json")):
            continue
        fs.rm_file(path)
        removed.append(path[len(location) :] if path.startswith(location) else path)
    return removed


__all__ = [
    "IcebergOptions",
    "IcebergSink",
    "current_data_files",
    "default_catalog_properties",
    "default_identifier",
    "iceberg_asset_uri",
    "parse_identifier",
    "public_catalog_properties",
    "published_snapshot",
    "remove_orphan_metadata",
    "snapshot_summary",
]
