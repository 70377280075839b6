"""Operators of the change feed: plan, one mapped task per slice, commit, apply to Iceberg.

A scheduled feed, mapped per bucket slice like compaction::

    plan = AcidPlanChangesOperator(task_id="plan", table="sales.orders",
                                   metastore_conn_id="metastore_default", output_uri=FEED,
                                   start_snapshot_uri=SNAPSHOT, key="id")
    parts = AcidChangesOperator.partial(task_id="changes", output_uri=FEED,
                                        feed_id=plan.output["feed_id"]
                                        ).expand(slice_key=plan.output)
    commit = AcidCommitChangesOperator(task_id="commit", output_uri=FEED,
                                       feed_id=plan.output["feed_id"],
                                       bucket_results=parts.output, outlets=[asset])
    apply = AcidApplyChangesToIcebergOperator(task_id="apply", feed=commit.output,
                                              snapshot_uri=SNAPSHOT)

The watermark is kept with the output: each committed feed's manifest records its B, and the
plan starts the next feed there (the first one at the snapshot's write, ``start_snapshot_uri``,
or ``from_write_id``). Each change is then delivered once; a re-run of a DAG run plans the same
feed, finds it committed, and delivers nothing new; a run without new writes commits an empty
range. The commit adds an asset event per range (its extra: the feed id, the range, counts).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from airflow.sdk import BaseOperator

from ..hooks.acid import AcidHook
from ..hooks.metastore import AcidMetastoreHook
from .task_arguments import mapped_results, none_if_blank, whole_number_or_none


class AcidPlanChangesOperator(BaseOperator):
    """Plans the feed ``(A, B]`` of a table into ``output_uri``; returns the slice keys to map
    :class:`AcidChangesOperator` over, and pushes the XComs ``feed_id``, ``from_write_id`` and
    ``to_write_id``.

    :param output_uri: the feed's folder (its last committed feed is the watermark A).
    :param table_uri: the table's location (storage-only without ``valid_write_ids``).
    :param table: ``DB.TABLE``, by name through ``metastore_conn_id`` (B: its high watermark).
    :param metastore_conn_id: the ``hive_metastore`` connection.
    :param from_write_id: A when ``output_uri`` holds no feed yet.
    :param start_snapshot_uri: or: the snapshot folder whose latest snapshot's write is A.
    :param to_write_id: B (default: the high watermark).
    :param key: the table's key, ``COL[,COL...]`` (pairs updates; Iceberg applies on it).
    :param net: leave out rows both inserted and deleted inside the range.
    :param delete_values: give each delete the deleted row's values (read from the file that
        holds the row, mostly the base); False: its identity only, reading only the range's
        deltas (apply the feed by identity; no ``key``).
    :param identity_snapshot_uri: the provider's snapshot folder at A with identity columns.
    :param valid_write_ids: the write-id list, storage-only.
    :param acid_conn_id: the ``acid`` connection for storage.

    Templated fields: ``output_uri``, ``table_uri``, ``table``, ``metastore_conn_id``,
    ``from_write_id``, ``start_snapshot_uri``, ``to_write_id``, ``key``, ``valid_write_ids``,
    ``acid_conn_id``.
    """

    template_fields: Sequence[str] = (
        "output_uri", "table_uri", "table", "metastore_conn_id", "from_write_id",
        "start_snapshot_uri", "to_write_id", "key", "valid_write_ids", "acid_conn_id",
    )  # fmt: skip

    def __init__(
        self,
        *,
        output_uri: str,
        table_uri: str | None = None,
        table: str | None = None,
        metastore_conn_id: str | None = None,
        from_write_id: int | str | None = None,
        start_snapshot_uri: str | None = None,
        to_write_id: int | str | None = None,
        key: str | Sequence[str] | None = None,
        net: bool = False,
        delete_values: bool = True,
        identity_snapshot_uri: str | None = None,
        valid_write_ids: str | None = None,
        acid_conn_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.output_uri, self.table_uri, self.table = output_uri, table_uri, table
        self.metastore_conn_id = metastore_conn_id
        self.from_write_id, self.start_snapshot_uri = from_write_id, start_snapshot_uri
        self.to_write_id, self.key, self.net = to_write_id, key, net
        self.delete_values = delete_values
        self.identity_snapshot_uri = identity_snapshot_uri
        self.valid_write_ids, self.acid_conn_id = valid_write_ids, acid_conn_id

    def _start(self, hook: AcidHook, out: str) -> int | None:
        from ..engine.change_diff import snapshot_write_id
        from ..engine.change_feed import feed_watermark
        from ..output import latest_snapshot

        if feed_watermark(out, storage_options=hook.storage_options) is not None:
            return None  # the feed's own watermark
        start = whole_number_or_none(self.from_write_id, "from_write_id")
        if start is None and none_if_blank(self.start_snapshot_uri):
            snapshot = latest_snapshot(
                hook.resolve_uri(self.start_snapshot_uri), storage_options=hook.storage_options
            )
            if snapshot is None:
                raise ValueError(f"{self.start_snapshot_uri} holds no committed snapshot")
            start = snapshot_write_id(snapshot)
        if start is None:
            raise ValueError(
                f"{out} holds no feed yet: give from_write_id or start_snapshot_uri (the "
                "snapshot the first feed applies to)"
            )
        return start

    def execute(self, context: Any) -> list[str]:
        from ..engine.change_runs import plan_feed
        from ..engine.sources import open_source

        hook = AcidHook(self.acid_conn_id)
        out = hook.resolve_uri(self.output_uri)
        table, table_uri = none_if_blank(self.table), none_if_blank(self.table_uri)
        metastore = None
        if table:
            metastore = AcidMetastoreHook(
                none_if_blank(self.metastore_conn_id) or AcidMetastoreHook.default_conn_name
            ).address
        source = open_source(
            hook.resolve_uri(table_uri) if table_uri else None,
            table=table,
            metastore=metastore,
            write_ids=none_if_blank(self.valid_write_ids),
            storage_options=hook.storage_options,
        )
        key = self.key.split(",") if isinstance(self.key, str) else (self.key or ())
        identity = none_if_blank(self.identity_snapshot_uri)
        plan = plan_feed(
            source,
            out,
            from_write_id=self._start(hook, out),
            to_write_id=whole_number_or_none(self.to_write_id, "to_write_id"),
            key=[k.strip() for k in key if k.strip()],
            net=bool(self.net),
            delete_values=bool(self.delete_values),
            identity_snapshot=hook.resolve_uri(identity) if identity else None,
            storage_options=hook.storage_options,
        )
        changes = plan.settings["changes"]
        for warning in plan.warnings:
            self.log.warning("%s", warning)
        self.log.info(
            "Feed %s of writes (%s, %s]: %d slice(s)",
            plan.snapshot_id,
            changes["from_write_id"],
            changes["to_write_id"],
            len(plan.keys_to_compute),
        )
        context["ti"].xcom_push(key="feed_id", value=plan.snapshot_id)
        context["ti"].xcom_push(key="from_write_id", value=changes["from_write_id"])
        context["ti"].xcom_push(key="to_write_id", value=changes["to_write_id"])
        return list(plan.keys_to_compute)


class AcidChangesOperator(BaseOperator):
    """Computes one slice of a planned feed (mapped: ``.expand(slice_key=...)``); returns the
    slice's result for :class:`AcidCommitChangesOperator`. Nothing is visible until then.

    :param output_uri: the feed's folder.
    :param feed_id: the plan's feed id.
    :param slice_key: the slice to compute.
    :param acid_conn_id: the ``acid`` connection for storage.

    Templated fields: ``output_uri``, ``feed_id``, ``slice_key``, ``acid_conn_id``.
    """

    template_fields: Sequence[str] = ("output_uri", "feed_id", "slice_key", "acid_conn_id")

    def __init__(
        self,
        *,
        output_uri: str,
        feed_id: str,
        slice_key: str,
        acid_conn_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.output_uri, self.feed_id, self.slice_key = output_uri, feed_id, slice_key
        self.acid_conn_id = acid_conn_id

    def execute(self, context: Any) -> dict[str, Any]:
        from ..engine.change_runs import compute_feed_slice
        from ..engine.memory_pool import use_worker_memory_pool

        use_worker_memory_pool()  # (this task's own process)
        hook = AcidHook(self.acid_conn_id)
        result = compute_feed_slice(
            hook.resolve_uri(self.output_uri),
            self.feed_id,
            self.slice_key,
            storage_options=hook.storage_options,
        )
        self.log.info(
            "Slice %s: %d change rows from %d rows read",
            self.slice_key,
            result.rows_written,
            result.rows_read,
        )
        return result.to_dict()


class AcidCommitChangesOperator(BaseOperator):
    """Commits a feed once every mapped slice succeeded; returns the feed's summary (the CLI's
    ``--json``) and adds an asset event, with the range and counts, to each of ``outlets``.

    :param output_uri: the feed's folder.
    :param feed_id: the plan's feed id.
    :param bucket_results: the mapped :class:`AcidChangesOperator`'s ``.output``.
    :param acid_conn_id: the ``acid`` connection for storage.

    Templated fields: ``output_uri``, ``feed_id``, ``bucket_results``, ``acid_conn_id``.
    """

    template_fields: Sequence[str] = ("output_uri", "feed_id", "bucket_results", "acid_conn_id")

    def __init__(
        self,
        *,
        output_uri: str,
        feed_id: str,
        bucket_results: Any = None,
        acid_conn_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        # a range without changes maps no slice task: the commit still runs then
        kwargs.setdefault("trigger_rule", "none_failed_min_one_success")
        super().__init__(**kwargs)
        self.output_uri, self.feed_id = output_uri, feed_id
        self.bucket_results, self.acid_conn_id = bucket_results, acid_conn_id

    def execute(self, context: Any) -> dict[str, Any]:
        from ..engine.change_runs import commit_feed

        hook = AcidHook(self.acid_conn_id)
        results = [
            r if isinstance(r, Mapping) else json.loads(r)
            for r in mapped_results(self.bucket_results, "bucket_results")
        ]
        feed = commit_feed(
            hook.resolve_uri(self.output_uri),
            self.feed_id,
            results,
            storage_options=hook.storage_options,
        )
        summary = feed.to_dict()
        self.log.info(
            "Feed %s of writes (%d, %d] %s: %s",
            self.feed_id,
            feed.from_write_id,
            feed.to_write_id,
            "committed" if summary["newly_committed"] else "was already committed",
            summary["counts"],
        )
        events = context.get("outlet_events") if hasattr(context, "get") else None
        if events is not None:
            extra = {
                k: summary[k]
                for k in ("feed_id", "from_write_id", "to_write_id", "counts", "newly_committed")
            }
            for outlet in self.outlets or ():
                events[outlet].extra = dict(extra)
        return summary


class AcidApplyChangesToIcebergOperator(BaseOperator):
    """Applies a committed feed to the Iceberg table the provider published from
    ``snapshot_uri`` (one Iceberg snapshot; only files holding a changed key are rewritten).
    A feed applied already is not applied again.

    :param feed: the commit task's summary (its ``.output``).
    :param snapshot_uri: the snapshot folder the Iceberg table was published from.
    :param sink_options: the Iceberg sink's options (``catalog``, ``table``), as when published.
    :param key: the key to apply on (default: the feed's).
    :param acid_conn_id: the ``acid`` connection for storage.

    Templated fields: ``feed``, ``snapshot_uri``, ``sink_options``, ``acid_conn_id``.
    """

    template_fields: Sequence[str] = ("feed", "snapshot_uri", "sink_options", "acid_conn_id")

    def __init__(
        self,
        *,
        feed: Any,
        snapshot_uri: str,
        sink_options: Mapping[str, Any] | None = None,
        key: Sequence[str] | None = None,
        acid_conn_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.feed, self.snapshot_uri, self.sink_options = feed, snapshot_uri, sink_options
        self.key, self.acid_conn_id = key, acid_conn_id

    def execute(self, context: Any) -> dict[str, Any]:
        from ..acid.listing import resolve_filesystem
        from ..output.iceberg import IcebergSink
        from ..output.iceberg_changes import apply_to_iceberg
        from ..output.protocol import read_manifest

        hook = AcidHook(self.acid_conn_id)
        feed = self.feed if isinstance(self.feed, Mapping) else json.loads(self.feed)
        fs, root = resolve_filesystem(feed["out"], None, hook.storage_options)
        result = read_manifest(fs, root, feed["feed_id"])
        if result is None:
            raise ValueError(f"feed {feed['feed_id']} is not committed under {feed['out']}")
        sink = IcebergSink(
            hook.resolve_uri(self.snapshot_uri),
            options=dict(self.sink_options or {}),
            storage_options=hook.storage_options,
        )
        applied = apply_to_iceberg(result, sink.load_table(), key=self.key)
        self.log.info("Iceberg: %s", applied.to_dict())
        return applied.to_dict()


__all__ = [
    "AcidApplyChangesToIcebergOperator",
    "AcidChangesOperator",
    "AcidCommitChangesOperator",
    "AcidPlanChangesOperator",
]
