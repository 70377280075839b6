"""What a sink gives back: a :class:`Publication`, the :class:`Sink` protocol and its error.

The sinks (:mod:`.iceberg`, :mod:`.delta`) and :mod:`.sinks`, which chooses among them, share
these; they live here so that a sink imports nothing from the module that chooses it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from .records import ExpireResult, SnapshotResult


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


__all__ = ["Publication", "Sink", "SinkError"]
