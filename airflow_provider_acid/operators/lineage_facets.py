"""The provider's own OpenLineage run facets (attrs classes, as the OpenLineage client expects).

This module imports OpenLineage at the top: only :mod:`.lineage` imports it, inside the
functions the OpenLineage listener calls, so nothing else needs the optional ``openlineage``
extra. Field names are camelCase, as OpenLineage's own facets are; each facet's JSON schema is
in ``lineage_facets.schema.json`` beside this file (``_schemaURL`` points at its definition).
"""

from __future__ import annotations

import attr
from openlineage.client.facet_v2 import RunFacet

#: Where the facets' JSON schemas are published (the file ships in the package too).
SCHEMA_URL = (
    "https://github.com/airflow-provider-acid/airflow-provider-acid/blob/main/"
    "airflow_provider_acid/operators/lineage_facets.schema.json"
)


@attr.define
class AcidReadViewRunFacet(RunFacet):
    """The read view a run read the Hive table with: the write-id list and the transaction
    list (Hive's serialized forms), where they came from, and the highest write id read.

    ``storageOnly`` is True when neither a metastore nor a write-id list was given (every write
    on storage was read as committed); ``warnings`` repeats what the run warned.
    """

    table: str
    validWriteIds: str | None = attr.field(default=None)  # noqa: N815
    validTxns: str | None = attr.field(default=None)  # noqa: N815
    metastore: str | None = attr.field(default=None)
    maxWriteId: int | None = attr.field(default=None)  # noqa: N815
    storageOnly: bool = attr.field(default=False)  # noqa: N815
    warnings: list[str] = attr.field(factory=list)

    @staticmethod
    def _get_schema() -> str:
        return SCHEMA_URL + "#/$defs/AcidReadViewRunFacet"


@attr.define
class AcidPruningRunFacet(RunFacet):
    """What the slice manifest pruned (``pruning.manifest_files.PruningMetrics``): partitions,
    bucket slices, data files and bytes, total and kept, and the skipping ratio (the share of
    data files that cannot match the predicate)."""

    predicate: str
    partitionsTotal: int  # noqa: N815
    partitionsKept: int  # noqa: N815
    slicesTotal: int  # noqa: N815
    slicesKept: int  # noqa: N815
    slicesPrunedByBucket: int  # noqa: N815
    filesTotal: int  # noqa: N815
    filesCandidate: int  # noqa: N815
    filesNotIndexed: int  # noqa: N815
    bytesTotal: int  # noqa: N815
    bytesKept: int  # noqa: N815
    skippingRatio: float  # noqa: N815
    granularity: str | None = attr.field(default=None)
    manifestUri: str | None = attr.field(default=None)  # noqa: N815

    @staticmethod
    def _get_schema() -> str:
        return SCHEMA_URL + "#/$defs/AcidPruningRunFacet"


@attr.define
class AcidCompactionRunFacet(RunFacet):
    """Rows a compaction read, dropped and wrote (``output.records.SnapshotResult.totals``),
    for a whole snapshot or one bucket slice (``sliceKey``): ``rowsWritten = rowsRead -
    rowsInvalid - rowsDeleted - rowsFiltered``."""

    snapshotId: str  # noqa: N815
    rowsRead: int  # noqa: N815
    rowsInvalid: int  # noqa: N815
    rowsDeleted: int  # noqa: N815
    rowsFiltered: int  # noqa: N815
    rowsWritten: int  # noqa: N815
    files: int
    bytes: int
    slices: int
    slicesReused: int = attr.field(default=0)  # noqa: N815
    sliceKey: str | None = attr.field(default=None)  # noqa: N815
    committed: bool = attr.field(default=False)
    outputFormat: str = attr.field(default="parquet")  # noqa: N815

    @staticmethod
    def _get_schema() -> str:
        return SCHEMA_URL + "#/$defs/AcidCompactionRunFacet"
