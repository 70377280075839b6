"""What the operators share before they call the library: their table arguments as a source,
compaction options, the re-plan guard, warnings logged, and the lineage of what they read.

A table is given by location (``table_uri``) or by name (``table`` and a metastore
connection); :func:`open_task_source` makes either into the one source every step reads.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from airflow.sdk.exceptions import AirflowFailException

from ..acid.source import TableSource
from ..engine.compaction import SourceChangedError
from ..engine.options import CompactionOptions
from ..hooks.acid import AcidHook
from ..hooks.metastore import AcidMetastoreHook
from ..output import BucketResult
from . import lineage


def compaction_options(
    partition_types: Mapping[str, str] | None, **kwargs: Any
) -> CompactionOptions:
    """The compaction options of a task.

    :param partition_types: Hive types of partition columns (None or empty: inferred).
    :param kwargs: the other :class:`CompactionOptions` fields.
    """
    return CompactionOptions(partition_types=dict(partition_types or {}) or None, **kwargs)


def none_if_blank(value: Any) -> Any:
    """None for a blank text (a templated argument left empty), else the value as given.

    :param value: the argument.
    """
    return None if isinstance(value, str) and not value.strip() else value


def whole_number_or_none(value: Any, name: str) -> int | None:
    """A templated whole number: None for None or a blank text, else ``int(value)``; a
    :class:`ValueError` naming the argument when it is not one.

    :param value: the argument.
    :param name: the argument's name, for the error.
    """
    value = none_if_blank(value)
    if value is None:
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a whole number, got {value!r}") from None


def mapped_results(value: Any, name: str) -> list[Any]:
    """The results of a mapped task (``parts.output``) as a list, fetched at once.

    Airflow gives them as a lazy sequence: iterating it asks for one XCom at a time, and
    once more after the last (a 404 the task SDK logs as "XCom not found"); a whole slice of
    it is one request. Each result is as pushed (a mapping, or its JSON text).

    :param value: the argument: the lazy sequence, a list, its JSON text (a rendered
        template), or None (no results).
    :param name: the argument's name, for the error.
    """
    if value is None:
        return []
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            value = None
        if not isinstance(value, list):
            raise ValueError(f"{name} must be a list of the mapped task's results") from None
    if isinstance(value, (bytes, Mapping)):
        raise ValueError(
            f"{name} must be a list of the mapped task's results, got {type(value).__name__}"
        )
    if isinstance(value, Sequence):
        return list(value[:])
    return list(value)


def table_arguments(
    table_uri: str | None, table: str | None, metastore_conn_id: str | None
) -> tuple[str | None, str | None, str | None]:
    """``(table_uri, table, metastore_conn_id)`` with blanks as None, checked: exactly one of
    ``table_uri`` and ``table``; a metastore connection only with ``table`` (by name, the
    hook's default connection when none is named).

    :param table_uri: the table's location.
    :param table: the table's name (DB.TABLE).
    :param metastore_conn_id: the metastore connection (with ``table`` only).
    """
    table_uri, table = none_if_blank(table_uri), none_if_blank(table)
    metastore_conn_id = none_if_blank(metastore_conn_id)
    if table_uri and table:
        raise ValueError(
            f"give the table by location (table_uri={table_uri!r}) or by name "
            f"(table={table!r}), not both"
        )
    if not table_uri and not table:
        raise ValueError(
            "name the table: table_uri (its location) or table ('DB.TABLE', with metastore_conn_id)"
        )
    if table_uri and metastore_conn_id:
        raise ValueError(
            f"metastore_conn_id={metastore_conn_id!r} needs a table name: give table='DB.TABLE' "
            f"to read by name, or drop metastore_conn_id to read {table_uri!r} storage-only"
        )
    if table and not metastore_conn_id:
        metastore_conn_id = AcidMetastoreHook.default_conn_name
    return table_uri, table, metastore_conn_id


def open_task_source(
    task: Any,
    hook: AcidHook,
    *,
    table_uri: str | None,
    table: str | None,
    metastore: Any = None,
    where: Any = None,
    write_ids: str | None = None,
    txns: str | None = None,
    current_txn: int | None = None,
) -> TableSource:
    """The table's source (``engine.sources.open_source``), logged by name.

    :param task: the task (for its log).
    :param hook: the storage hook (its storage options).
    :param table_uri: the table's location.
    :param table: the table's name.
    :param metastore: the metastore (URI, address or client), with ``table``.
    :param where: a predicate choosing the partitions listed, by name.
    :param write_ids: a write-id list to read with instead of the metastore's.
    :param txns: its transaction list.
    :param current_txn: the task's own read transaction, if it opened one.
    """
    from ..engine.sources import open_source

    with replan_needed():  # a wrong keytab or principal fails at once, too
        source = open_source(
            hook.resolve_uri(table_uri) if table_uri else None,
            table=table,
            metastore=metastore,
            where=where,
            write_ids=none_if_blank(write_ids),
            txns=none_if_blank(txns),
            storage_options=hook.storage_options,
            current_txn=current_txn,
        )
    if source.definition is not None:
        task.log.info(
            "Table %s from %s at %s, read view %s (transactions %s)",
            source.definition.name,
            source.definition.metastore,
            source.location,
            source.write_ids,
            source.txns,
        )
    return source


@contextmanager
def replan_needed() -> Iterator[None]:
    """A source file gone since the view was pinned (Hive's Cleaner): retrying the task cannot
    bring it back, only a new plan can (a new DAG run, or clearing from the manifest task), so
    the task fails at once, with the message naming the file. So does an error that says a
    retry cannot help (``retryable = False``: a wrong keytab or principal, clock skew)."""
    try:
        yield
    except SourceChangedError as exc:
        raise AirflowFailException(str(exc)) from exc
    except Exception as exc:
        if getattr(exc, "retryable", True) is False:
            raise AirflowFailException(str(exc)) from exc
        raise


def log_warnings(task: Any, warnings: Sequence[str]) -> None:
    """Log each warning in the task's log.

    :param task: the task.
    :param warnings: the warnings.
    """
    for warning in warnings:
        task.log.warning("%s", warning)


def lineage_of_slice(hook: AcidHook, out: str, result: BucketResult) -> lineage.RunLineage:
    """A mapped task's lineage: its plan names the table and the columns.

    :param hook: the storage hook of the output.
    :param out: the output location.
    :param result: the slice's compaction result.
    """
    from ..acid.listing import resolve_filesystem
    from ..output import read_plan

    fs, root = resolve_filesystem(out, storage_options=hook.storage_options)
    return lineage.slice_lineage(read_plan(fs, root, result.snapshot_id), result, out)


def lineage_of_arguments(task: Any) -> lineage.RunLineage | None:
    """The table a task names in its arguments (before it runs): by name, the metastore
    connection's ``hive://HOST:PORT``; by location, the storage location.

    :param task: the task.
    """
    table_uri = none_if_blank(getattr(task, "table_uri", None))
    table = none_if_blank(getattr(task, "table", None))
    if table:
        conn_id = none_if_blank(getattr(task, "metastore_conn_id", None))
        hook = AcidMetastoreHook(conn_id or AcidMetastoreHook.default_conn_name)
        return lineage.named_table_lineage(hook.uri, table)
    if table_uri:
        hook = AcidHook(getattr(task, "acid_conn_id", None))
        return lineage.location_lineage(hook.resolve_uri(table_uri))
    return None


def manifest_uri_for(output_uri: str, run_id: str | None) -> str:
    """Where a run's slice manifest is written below the output.

    :param output_uri: the output location.
    :param run_id: the DAG run id (None: ``manual``).
    """
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in (run_id or "manual"))
    return posixpath.join(output_uri.rstrip("/"), "_manifests", f"{safe}.json")
