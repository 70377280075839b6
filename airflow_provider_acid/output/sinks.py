"""Where a committed snapshot is published: the Parquet folder itself, or a table format.

Every format starts from the same commit (:func:`.protocol.commit_snapshot`): the data files
of the output folder and its manifest. A table-format sink then publishes that snapshot as one
commit of its own table over the same data files (no rewrite), and that commit is its readers'
commit point. Publishing is idempotent: a sink that already holds the snapshot (recorded in its
own commit metadata) publishes nothing and says so.

Sinks are chosen by name (``--format`` on the CLI, ``output_format`` on the operators):

* ``parquet`` - the folder and its manifests, nothing more (the default);
* ``iceberg`` - an Iceberg table through pyiceberg (:mod:`.iceberg`);
* ``delta`` - a Delta Lake table through delta-rs (:mod:`.delta`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .publication import Publication, Sink, SinkError
from .records import ExpireResult, SnapshotResult

OUTPUT_FORMATS = ("parquet", "iceberg", "delta")
DEFAULT_OUTPUT_FORMAT = "parquet"


def check_output_format(value: str) -> str:
    """``value`` as a known output format name; a ValueError naming the choices otherwise."""
    name = str(value).strip().lower()
    if name not in OUTPUT_FORMATS:
        raise ValueError(f"output_format {value!r} is not one of {', '.join(OUTPUT_FORMATS)}")
    return name


@dataclass(frozen=True)
class ParquetFolderSink:
    """The output folder itself: the commit protocol's manifest is the commit point."""

    out_uri: str
    storage_options: Mapping[str, Any] | None = None
    output_format: str = "parquet"

    def publish(self, result: SnapshotResult) -> Publication:
        return Publication("parquet", result.out, None, result.newly_committed, {})

    def expire(self, keep: int) -> ExpireResult:
        from .expiry import expire_snapshots

        options = dict(self.storage_options) if self.storage_options else None
        return expire_snapshots(self.out_uri, keep=keep, storage_options=options)


def open_sink(
    output_format: str,
    out_uri: str,
    *,
    options: Mapping[str, Any] | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> Sink:
    """The sink named ``output_format`` for the output folder ``out_uri``.

    ``options`` are the format's own settings (for Iceberg the pyiceberg catalog properties and
    the table identifier, for Delta the table URI); each sink documents its keys and defaults.
    Table-format sinks are imported here, lazily: their libraries are optional extras.
    """
    name = check_output_format(output_format)
    settings = dict(options or {})
    if name == "parquet":
        return ParquetFolderSink(out_uri, storage_options)
    if name == "iceberg":
        from .iceberg import IcebergSink

        return IcebergSink(out_uri, options=settings, storage_options=storage_options)
    from .delta import DeltaSink

    return DeltaSink(out_uri, options=settings, storage_options=storage_options)


@dataclass(frozen=True)
class PublishedSnapshot:
    """A committed snapshot, its publication by the sink, and what expiry removed after it."""

    result: SnapshotResult
    publication: Publication
    expired: ExpireResult | None = None

    def summary_fields(self) -> dict[str, Any]:
        """What the operators add to their snapshot summary (XCom, metrics, asset events):
        the format, the table's asset URI and its snapshot id or version, and the format's
        ``--json`` block under its name (``iceberg`` or ``delta``)."""
        fields: dict[str, Any] = {
            "output_format": self.publication.output_format,
            "asset_uri": self.publication.asset_uri,
            "table_version": self.publication.table_version,
            "newly_published": self.publication.newly_published,
        }
        if self.publication.output_format != "parquet":
            fields[self.publication.output_format] = dict(self.publication.details)
        return fields


def publish_snapshot(
    result: SnapshotResult,
    output_format: str = DEFAULT_OUTPUT_FORMAT,
    *,
    out_uri: str | None = None,
    options: Mapping[str, Any] | None = None,
    storage_options: Mapping[str, Any] | None = None,
    keep: int | None = None,
) -> PublishedSnapshot:
    """Publish a committed snapshot with the sink ``output_format``, then (with ``keep``)
    expire all but the newest ``keep`` snapshots through that sink.

    ``out_uri`` is the output folder as the caller named it (default: ``result.out``). The
    Parquet manifest's commit comes first (it is ``result``); a table-format sink's commit
    follows, so a run killed in between leaves a committed manifest that the re-run (which
    finds it committed) publishes: publishing is idempotent.
    """
    if keep is not None and keep < 1:
        raise ValueError("keep must be at least 1: the latest snapshot is never expired")
    sink = open_sink(
        output_format, out_uri or result.out, options=options, storage_options=storage_options
    )
    publication = sink.publish(result)
    expired = sink.expire(keep) if keep is not None else None
    return PublishedSnapshot(result, publication, expired)


def commit_and_publish(
    out_uri: str,
    snapshot_id: str,
    bucket_results: Iterable[Any],
    output_format: str = DEFAULT_OUTPUT_FORMAT,
    *,
    options: Mapping[str, Any] | None = None,
    storage_options: Mapping[str, Any] | None = None,
    keep: int | None = None,
) -> PublishedSnapshot:
    """Commit a planned snapshot's bucket results (:func:`.protocol.commit_snapshot`), then
    :func:`publish_snapshot` it: the commit task of a mapped snapshot in one call."""
    check_output_format(output_format)  # a bad name fails before the commit
    from .protocol import commit_snapshot

    result = commit_snapshot(
        out_uri,
        snapshot_id,
        bucket_results,
        storage_options=dict(storage_options) if storage_options else None,
    )
    return publish_snapshot(
        result,
        output_format,
        out_uri=out_uri,
        options=options,
        storage_options=storage_options,
        keep=keep,
    )


def table_asset_uri(
    output_format: str,
    out_uri: str,
    *,
    options: Mapping[str, Any] | None = None,
    table: str | None = None,
    table_uri: str | None = None,
) -> str | None:
    """The asset URI of the table a snapshot of ``table`` (by name) or ``table_uri`` (by
    location) will be published to, known before any run (None for ``parquet``: the folder's
    asset is the caller's). What :attr:`Publication.asset_uri` of its publications will be."""
    name = check_output_format(output_format)
    if name == "parquet":
        return None
    if name == "iceberg":
        from .iceberg import IcebergSink, default_identifier

        sink = IcebergSink(out_uri, options=dict(options or {}))
        identifier = sink.settings.table or default_identifier(table_uri or "", table)
        return sink.asset_uri(identifier)
    sink = open_sink(name, out_uri, options=options)
    asset_uri = getattr(sink, "asset_uri", None)
    if callable(asset_uri):
        return str(asset_uri())
    location = str(dict(options or {}).get("uri") or out_uri)
    if "://" in location:
        return location.rstrip("/")
    import os

    return "file://" + os.path.abspath(location).rstrip("/")


def check_sink(
    output_format: str,
    out_uri: str,
    *,
    options: Mapping[str, Any] | None = None,
    storage_options: Mapping[str, Any] | None = None,
    timestamp_unit: str = "us",
) -> None:
    """Refuse, before any work, a sink whose options are wrong or that cannot hold snapshots
    written with ``timestamp_unit`` (Iceberg v2 keeps microseconds)."""
    name = check_output_format(output_format)
    if name == "parquet":
        return
    open_sink(name, out_uri, options=options, storage_options=storage_options)
    if name == "iceberg":
        from .iceberg_schema import IcebergSchemaError, check_settings

        try:
            check_settings({"timestamp_unit": timestamp_unit})
        except IcebergSchemaError as exc:
            raise SinkError(str(exc)) from None
    if name == "delta":
        from .delta import check_timestamp_unit

        check_timestamp_unit(timestamp_unit)


__all__ = [
    "DEFAULT_OUTPUT_FORMAT",
    "OUTPUT_FORMATS",
    "ParquetFolderSink",
    "Publication",
    "PublishedSnapshot",
    "Sink",
    "SinkError",
    "check_output_format",
    "check_sink",
    "commit_and_publish",
    "open_sink",
    "publish_snapshot",
    "table_asset_uri",
]
