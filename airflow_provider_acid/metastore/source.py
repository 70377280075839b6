"""A table by name: its definition, its kept partitions' locations and one pinned read view.

:func:`open_table` is the one call the CLI and the operators make to read a table through its
metastore. In order: the table (and that it is transactional), its partition names, the
partitions a filter keeps (evaluated locally on the names' values, so any predicate works,
whatever the metastore's filter pushdown supports), those partitions' locations, and the read
view. Only the kept partitions' locations are listed afterwards.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..acid.listing import resolve_filesystem
from ..acid.partitions import Partition
from ..acid.source import TableDefinition, TableSource
from .client import MetastoreClient
from .connection import MetastoreAddress
from .errors import TableLocationMissingError
from .tables import check_transactional, table_definition
from .view import ReadView, read_view

#: Given the table's definition (columns and partition columns, no partitions yet) and each
#: partition's values (``{"dt": "2024-01-01"}``, None for Hive's default partition), which
#: partitions to keep.
PartitionFilter = Callable[[TableDefinition, Sequence[Mapping[str, str | None]]], Sequence[bool]]


def open_table(
    metastore: str | MetastoreAddress | MetastoreClient,
    table: str,
    *,
    partition_filter: PartitionFilter | None = None,
    current_txn: int | None = None,
    storage_options: dict[str, Any] | None = None,
    check_location: bool = True,
    api: str = "auto",
) -> TableSource:
    """The :class:`TableSource` of ``db.table``: definition, kept partitions, read view.

    Raises ``TableNotFoundError`` (unknown database or table), ``NotTransactionalError``,
    ``MetastoreConnectionError`` (naming host and port) and ``TableLocationMissingError``.
    """
    if isinstance(metastore, MetastoreClient):
        return _open(
            metastore, table, partition_filter, current_txn, storage_options, check_location
        )
    with MetastoreClient(metastore, api=api) as client:
        return _open(client, table, partition_filter, current_txn, storage_options, check_location)


def _open(
    client: MetastoreClient,
    table: str,
    partition_filter: PartitionFilter | None,
    current_txn: int | None,
    storage_options: dict[str, Any] | None,
    check_location: bool,
) -> TableSource:
    thrift_table = client.get_table(table)
    check_transactional(thrift_table)  # before anything else is asked or listed
    partitions = None
    total = None
    if thrift_table.partitionKeys:
        names = client.partition_names(table)
        total = len(names)
        if partition_filter is not None and names:
            values = [Partition.from_components(tuple(n.split("/"))).as_dict() for n in names]
            bare = table_definition(thrift_table, client.address.uri)
            keep = list(partition_filter(bare, values))
            names = [n for n, k in zip(names, keep, strict=True) if k]
        partitions = client.partitions_by_names(table, names) if names else []
    definition = table_definition(
        thrift_table, client.address.uri, partitions, partitions_total=total
    )
    if check_location:
        fs, path = resolve_filesystem(definition.location, storage_options=storage_options)
        if not fs.isdir(path):
            raise TableLocationMissingError(
                f"table {definition.name}: its location {definition.location} (from the "
                f"{client.where}) does not exist or is not a folder"
            )
    view = read_view(client, definition.name, current_txn=current_txn)
    return source_from(definition, view)


def source_from(definition: TableDefinition, view: ReadView) -> TableSource:
    """A pinned source: the definition read with one view."""
    return TableSource(
        location=definition.location,
        write_ids=str(view.write_ids),
        txns=str(view.txns),
        insert_only=definition.insert_only,
        definition=definition,
    )


__all__ = ["PartitionFilter", "open_table", "source_from"]
