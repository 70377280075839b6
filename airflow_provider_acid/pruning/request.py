"""Checking a snapshot request typed by a person (the on-demand DAG's form) before any work.

Every problem is reported at once, each naming its argument; nothing is written.
"""

from __future__ import annotations

from typing import Any

from ..acid.listing import resolve_filesystem
from ..acid.locations import check_location, check_outside_table
from ..acid.schema import table_schema
from ..acid.snapshot import resolve_snapshot
from ..acid.writeids import parse_write_id_list
from .binding import bind
from .expressions import to_sql
from .manifest import parse_predicate


class SnapshotRequestError(ValueError):
    """One or more arguments of a snapshot request are not acceptable."""


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
    for what, uri in (("table_uri", table_uri), ("output_uri", output_uri)):
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
    try:
        check_outside_table(output_uri, table_uri)
    except ValueError as exc:
        problems.append(str(exc))
    if problems:  # do not even list a location that is not allowed
        raise SnapshotRequestError("; ".join(problems))
    normalised = None
    try:
        fs, root = resolve_filesystem(table_uri, storage_options=storage_options)
        snapshot = resolve_snapshot(root, write_ids, filesystem=fs)
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
