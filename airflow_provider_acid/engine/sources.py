"""A table by location or by name, as the one :class:`TableSource` every step reads.

The CLI and the operators turn their arguments into a source here, then hand it to the library
call they make (``compute_manifest``, ``compact_table``, ``resolve_read_view``, ...):

* by name (``table="db.tbl"`` and a metastore): the metastore's definition (columns,
  partition columns and types, bucketing, ACID kind), only the partitions a predicate's
  partition conjuncts or the given partition specs keep, each at its own location, and one
  read view (transaction list, then the table's write-id list) pinned for every later step;
* by location (``table_uri``): storage-only, with the write-id list if one is given, and the
  storage-only warning if not.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..acid.schema import definition_schema
from ..acid.source import TableDefinition, TableSource
from ..acid.writeids import ValidTxnList, parse_write_id_list


def _spec_filter(partitions: Sequence[str | Mapping[str, Any]]):
    from ..acid.partition_listing import partition_specs

    specs = partition_specs(partitions)

    def keep(values: Sequence[Mapping[str, str | None]]) -> list[bool]:
        return [any(all(v.get(k) == s[k] for k in s) for s in specs) for v in values]

    return keep


def _predicate_filter(where: Any):
    from ..pruning.binding import bind
    from ..pruning.expressions import AlwaysTrue
    from ..pruning.manifest import parse_predicate
    from ..pruning.partition_stats import partitions_might_match

    expr = parse_predicate(where)
    if isinstance(expr, AlwaysTrue):
        return None

    def keep(definition: TableDefinition, values: Sequence[Mapping[str, str | None]]) -> list[bool]:
        schema = definition_schema(definition)
        return partitions_might_match(bind(expr, schema), schema, values)

    return keep


def open_source(
    table_uri: str | None = None,
    *,
    table: str | None = None,
    metastore: Any = None,
    where: Any = None,
    partitions: Sequence[str | Mapping[str, Any]] | None = None,
    write_ids: Any = None,
    txns: Any = None,
    insert_only: bool = False,
    storage_options: dict[str, Any] | None = None,
    current_txn: int | None = None,
    api: str = "auto",
) -> TableSource:
    """The source to read: by ``table`` name through ``metastore``, or at ``table_uri``.

    ``where`` (a predicate) and ``partitions`` (``dt=2024-01-01`` specs) choose, by name,
    which partitions are listed at all. ``write_ids``/``txns`` given with a table name must
    be that table's; they then replace the metastore's view (e.g. to replay a run).
    ``metastore`` is a URI (``thrift://HOST:PORT``), a ``MetastoreAddress`` or an open
    ``MetastoreClient``.
    """
    if table and table_uri:
        raise ValueError(
            f"give the table by location (table_uri={table_uri!r}) or by name "
            f"(table={table!r}), not both"
        )
    if not table:
        if metastore:
            raise ValueError("metastore given without a table name: name the table (DB.TABLE)")
        if not table_uri:
            raise ValueError("name a table: its location (table_uri) or DB.TABLE with a metastore")
        return TableSource.storage_only(table_uri, write_ids, txns, insert_only=insert_only)
    if not metastore:
        raise ValueError(
            f"table {table!r} is read by name: give the metastore (thrift://HOST:PORT)"
        )
    from ..metastore.source import open_table
    from ..metastore.view import check_view_table

    by_spec = _spec_filter(partitions) if partitions else None
    by_predicate = _predicate_filter(where)

    def keep(definition: TableDefinition, values: Sequence[Mapping[str, str | None]]) -> list[bool]:
        kept = [True] * len(values)
        if by_spec is not None:
            kept = [a and b for a, b in zip(kept, by_spec(values), strict=True)]
        if by_predicate is not None:
            kept = [a and b for a, b in zip(kept, by_predicate(definition, values), strict=True)]
        return kept

    source = open_table(
        metastore,
        table,
        partition_filter=keep if (by_spec or by_predicate) else None,
        current_txn=current_txn,
        storage_options=storage_options,
        api=api,
    )
    if txns not in (None, "") and write_ids in (None, ""):
        raise ValueError(
            f"table {table}: a transaction list (valid_txns) without its write-id list "
            "(valid_write_ids) would mix two views: give both, or neither (the metastore's)"
        )
    if write_ids not in (None, ""):
        given = parse_write_id_list(str(write_ids))
        check_view_table(given, table)
        source = TableSource(
            source.location,
            str(given),
            str(ValidTxnList.parse(str(txns))) if txns else source.txns,
            source.insert_only,
            source.definition,
        )
    return source


__all__ = ["open_source"]
