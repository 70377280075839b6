"""Where a table is read from, and with which view of its writes.

Two ideas, both plain data (JSON in plans and manifests, no metastore client here):

* :class:`TableDefinition`: what a Hive Metastore says of a table: its name, location,
  columns and partition columns with their Hive types, bucketing, ACID kind, and the
  locations of the partitions to read (a partition may live outside the table's folder).
* :class:`TableSource`: what resolution reads: a location, the reader's *read view* (the
  transaction list and the table's write-id list), and the definition when there is one.

Without a metastore and without a write-id list a source is *storage-only*: every write on
storage is read as committed. :func:`storage_only_warning` says so in one sentence that the
CLI, the operators and the manifests repeat.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from .partitions import Partition
from .writeids import ValidTxnList, ValidWriteIdList, parse_write_id_list

STORAGE_ONLY_WARNING = (
    "storage-only mode: no metastore and no write-id list, so every write found on storage is "
    "read as committed; aborted and in-flight (open) writes are read as data. Pass a metastore "
    "and a table name, or the table's valid write-id list, to read only committed writes."
)


def storage_only_warning(write_ids: Any, definition: TableDefinition | None) -> str | None:
    """The storage-only warning when neither a metastore nor a write-id list is at hand.

    ``write_ids`` is a serialized list, a parsed one, or None; an "all committed" list (what
    resolution assumes without one) counts as none."""
    if definition is not None:
        return None
    if write_ids in (None, "") or getattr(write_ids, "is_all_committed", False):
        return STORAGE_ONLY_WARNING
    return None


@dataclass(frozen=True)
class PartitionLocation:
    """One partition to read: its values in Hive's path form (``dt=2024-01-01``) and where
    its folder is (any fsspec URI)."""

    name: str
    location: str

    @property
    def partition(self) -> Partition:
        return Partition.from_components(tuple(self.name.split("/")))

    def to_dict(self) -> dict[str, str]:
        return {"name": self.name, "location": self.location}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PartitionLocation:
        return cls(str(data["name"]), str(data["location"]))


@dataclass(frozen=True)
class TableDefinition:
    """A table as its metastore defines it.

    ``partitions`` are the partitions to read, each with its location: all of them, or those
    a predicate's partition conjuncts kept. ``None`` for an unpartitioned table (its location
    is read whole).
    """

    name: str  # db.table
    metastore: str  # thrift://host:port (never credentials)
    location: str
    columns: tuple[tuple[str, str], ...]
    partition_columns: tuple[tuple[str, str], ...] = ()
    bucket_columns: tuple[str, ...] = ()
    num_buckets: int = -1
    bucketing_version: int = 1
    transactional_properties: str = "default"
    partitions: tuple[PartitionLocation, ...] | None = None
    partitions_total: int | None = None  # partitions the metastore has, before pruning

    @property
    def insert_only(self) -> bool:
        return self.transactional_properties.lower() == "insert_only"

    @property
    def partition_types(self) -> dict[str, str]:
        return dict(self.partition_columns)

    def with_partitions(self, names: Sequence[str]) -> TableDefinition:
        """The same definition reading only the named partitions (in the given order)."""
        if self.partitions is None:
            return self
        by_name = {p.name: p for p in self.partitions}
        missing = [n for n in names if n not in by_name]
        if missing:
            raise KeyError(f"partitions {missing} are not among those of {self.name}")
        return replace(self, partitions=tuple(by_name[n] for n in names))

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "metastore": self.metastore,
            "location": self.location,
            "columns": [{"name": n, "hive_type": t} for n, t in self.columns],
            "partition_columns": [{"name": n, "hive_type": t} for n, t in self.partition_columns],
            "bucket_columns": list(self.bucket_columns),
            "num_buckets": self.num_buckets,
            "bucketing_version": self.bucketing_version,
            "transactional_properties": self.transactional_properties,
            "partitions": (
                None if self.partitions is None else [p.to_dict() for p in self.partitions]
            ),
            "partitions_total": self.partitions_total,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TableDefinition:
        partitions = data.get("partitions")
        return cls(
            name=data["name"],
            metastore=data["metastore"],
            location=data["location"],
            columns=tuple((c["name"], c["hive_type"]) for c in data["columns"]),
            partition_columns=tuple(
                (c["name"], c["hive_type"]) for c in data.get("partition_columns", ())
            ),
            bucket_columns=tuple(data.get("bucket_columns", ())),
            num_buckets=int(data.get("num_buckets", -1)),
            bucketing_version=int(data.get("bucketing_version", 1)),
            transactional_properties=data.get("transactional_properties", "default"),
            partitions=(
                None
                if partitions is None
                else tuple(PartitionLocation.from_dict(p) for p in partitions)
            ),
            partitions_total=data.get("partitions_total"),
        )


@dataclass(frozen=True)
class TableSource:
    """What a reader reads: a location, its read view, and the metastore's definition.

    ``write_ids`` and ``txns`` are Hive's serialized lists (the read view); both ``None`` in
    storage-only mode. A source from a metastore is *pinned*: the lists were read once, and
    every step that reads the table with this source (manifest, plan, each mapped task) sees
    the same writes.
    """

    location: str
    write_ids: str | None = None
    txns: str | None = None
    insert_only: bool = False
    definition: TableDefinition | None = None
    warnings: tuple[str, ...] = field(default=())

    @classmethod
    def storage_only(
        cls,
        location: str,
        write_ids: Any = None,
        txns: Any = None,
        *,
        insert_only: bool = False,
    ) -> TableSource:
        """A source without a metastore; warns when there is no write-id list either."""
        write_ids = None if write_ids in (None, "") else str(write_ids)
        txns = None if txns in (None, "") else str(txns)
        warning = storage_only_warning(write_ids, None)
        return cls(location, write_ids, txns, insert_only, None, (warning,) if warning else ())

    @property
    def table_name(self) -> str | None:
        return self.definition.name if self.definition else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "location": self.location,
            "write_ids": self.write_ids,
            "txns": self.txns,
            "insert_only": self.insert_only,
            "definition": self.definition.to_dict() if self.definition else None,
            "warnings": list(self.warnings),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TableSource:
        definition = data.get("definition")
        return cls(
            location=data["location"],
            write_ids=data.get("write_ids"),
            txns=data.get("txns"),
            insert_only=bool(data.get("insert_only", False)),
            definition=TableDefinition.from_dict(definition) if definition else None,
            warnings=tuple(data.get("warnings", ())),
        )


@dataclass(frozen=True)
class ReadArguments:
    """What a resolution reads, from a location or a :class:`TableSource` (whose lists and
    definition serve unless lists are given), the lists parsed from Hive's strings."""

    location: Any
    write_ids: ValidWriteIdList | None
    txns: ValidTxnList | None
    insert_only: bool = False
    definition: TableDefinition | None = None

    @classmethod
    def of(
        cls,
        table_uri: Any,
        write_ids: ValidWriteIdList | str | None = None,
        txns: ValidTxnList | str | None = None,
        insert_only: bool = False,
    ) -> ReadArguments:
        definition = None
        if isinstance(table_uri, TableSource):
            write_ids = table_uri.write_ids if write_ids is None else write_ids
            txns = table_uri.txns if txns is None else txns
            insert_only = insert_only or table_uri.insert_only
            definition = table_uri.definition
            table_uri = table_uri.location
        if isinstance(write_ids, str):
            write_ids = parse_write_id_list(write_ids)
        if isinstance(txns, str):
            txns = ValidTxnList.parse(txns)
        return cls(table_uri, write_ids, txns, insert_only, definition)


__all__ = [
    "STORAGE_ONLY_WARNING",
    "PartitionLocation",
    "ReadArguments",
    "TableDefinition",
    "TableSource",
    "storage_only_warning",
]
