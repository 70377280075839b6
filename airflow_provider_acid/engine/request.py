"""Checking a snapshot request typed by a person (the on-demand DAG's form) before any work.

Every problem is reported at once, each naming its argument; nothing is written.
"""

from __future__ import annotations

from typing import Any

from ..acid.listing import resolve_filesystem
from ..acid.locations import check_location, check_outside_table
from ..acid.resolution import resolve_read_view
from ..acid.schema import definition_schema, table_schema
from ..acid.writeids import parse_write_id_list
from ..pruning.binding import bind
from ..pruning.expressions import to_sql
from ..pruning.manifest import parse_predicate


class SnapshotRequestError(ValueError):
    """One or more arguments of a snapshot request are not acceptable."""


def _first_checks(
    locations: dict[str, str],
    allowed_prefixes: str | list[str] | None,
    valid_write_ids: str | None,
    problems: list[str],
) -> str | None:
    """Locations below the allowed prefixes and the write-id list's form (its normal text, or
    None); each problem is added to ``problems``."""
    for what, uri in locations.items():
        try:
            check_location(uri, allowed_prefixes, what=what)
        except ValueError as exc:
            problems.append(str(exc))
    write_ids = (valid_write_ids or "").strip() or None
    if write_ids is not None:
        try:
            parse_write_id_list(write_ids)
        except ValueError as exc:
            problems.append(f"valid_write_ids: {exc}")
    return write_ids


def validate_snapshot_request(
    *,
    table_uri: str,
    output_uri: str,
    predicate: str | None,
    valid_write_ids: str | None,
    allowed_prefixes: str | list[str] | None,
    storage_options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Check locations against the allowed prefixes, the write-id list's form, and the
    predicate against the table's columns (reading one file footer, writing nothing).

    Returns the normalised request (the predicate in its normal form).
    """
    problems: list[str] = []
    write_ids = _first_checks(
        {"table_uri": table_uri, "output_uri": output_uri},
        allowed_prefixes,
        valid_write_ids,
        problems,
    )
    try:
        check_outside_table(output_uri, table_uri)
    except ValueError as exc:
        problems.append(str(exc))
    if problems:  # do not even list a location that is not allowed
        raise SnapshotRequestError("; ".join(problems))
    normalised = None
    try:
        fs, root = resolve_filesystem(table_uri, storage_options=storage_options)
        snapshot = resolve_read_view(root, write_ids, filesystem=fs)
        schema = table_schema(snapshot, fs)
        normalised = to_sql(bind(parse_predicate(predicate), schema))
    except ValueError as exc:
        problems.append(f"predicate: {exc}")
    except OSError as exc:
        problems.append(f"table_uri: {exc}")
    if problems:
        raise SnapshotRequestError("; ".join(problems))
    return {
        "table_uri": table_uri,
        "output_uri": output_uri,
        "predicate": normalised,
        "valid_write_ids": write_ids,
    }


def validate_named_snapshot_request(
    *,
    table: str,
    metastore: Any,
    output_uri: str,
    predicate: str | None,
    valid_write_ids: str | None,
    allowed_prefixes: str | list[str] | None,
    storage_options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The same checks for a table by name: the output location below an allowed prefix, the
    table in the metastore (it exists, it is transactional, its location and its partitions'
    are below an allowed prefix, and the output outside it), the write-id list its own, and the
    predicate's columns among the metastore's. Writes nothing.

    The metastore's errors (unknown table, not transactional, a refused connection naming host
    and port, a write-id list of another table, a missing location) are raised as they are.
    """
    from .sources import open_source

    problems: list[str] = []
    write_ids = _first_checks(
        {"output_uri": output_uri}, allowed_prefixes, valid_write_ids, problems
    )
    try:
        expr = parse_predicate(predicate)
    except ValueError as exc:
        problems.append(f"predicate: {exc}")
    if problems:  # before asking the metastore
        raise SnapshotRequestError("; ".join(problems))
    source = open_source(
        table=table, metastore=metastore, write_ids=write_ids, storage_options=storage_options
    )
    definition = source.definition
    assert definition is not None
    located = [("table location", definition.location)] + [
        (f"partition {p.name}", p.location) for p in definition.partitions or ()
    ]
    for what, uri in located:
        try:
            check_location(uri, allowed_prefixes, what=f"{definition.name}'s {what}")
        except ValueError as exc:
            problems.append(str(exc))
    try:
        check_outside_table(output_uri, source.location)
    except ValueError as exc:
        problems.append(str(exc))
    try:
        normalised = to_sql(bind(expr, definition_schema(definition)))
    except ValueError as exc:
        problems.append(f"predicate: {exc}")
    if problems:
        raise SnapshotRequestError("; ".join(problems))
    return {
        "table": definition.name,
        "metastore": definition.metastore,
        "table_uri": None,
        "output_uri": output_uri,
        "predicate": normalised,
        "valid_write_ids": write_ids,
    }
