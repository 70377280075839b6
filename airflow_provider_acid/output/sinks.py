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

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from .records import ExpireResult, SnapshotResult

OUTPUT_FORMATS = ("parquet", "iceberg", "delta")
DEFAULT_OUTPUT_FORMAT = "parquet"


class SinkError(RuntimeError):
    """A table-format sink could not publish or expire (names the table and the cause)."""


@dataclass(frozen=True)
class Publication:
    """A snapshot as published by a sink.

    ``asset_uri`` names the published table as Airflow asset URIs go; ``table_version`` is the
    table's own snapshot id or version (None for the Parquet folder); ``details`` is the block
    the CLI's ``--json`` prints under the format's name (enough for a script to open the table);
    ``newly_published`` is False when the sink already held this snapshot.
    """

    output_format: str
    asset_uri: str
    table_version: int | None = None
    newly_published: bool = False
    details: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "output_format": self.output_format,
            "asset_uri": self.asset_uri,
            "table_version": self.table_version,
            "newly_published": self.newly_published,
            "details": dict(self.details),
        }


class Sink(Protocol):
    """A place committed snapshots are published to."""

    output_format: str

    def publish(self, result: SnapshotResult) -> Publication:
        """Publish the committed snapshot ``result`` (idempotent)."""
        ...

    def expire(self, keep: int) -> ExpireResult:
        """Keep the newest ``keep`` snapshots, in the sink and in the output folder."""
        ...


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
        from .protocol import expire_snapshots

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
