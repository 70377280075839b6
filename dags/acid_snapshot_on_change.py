"""A snapshot of a Hive ACID table each time it changes: event-driven, through an asset watcher.

The DAG is scheduled on an asset whose :class:`~airflow.sdk.AssetWatcher` runs, in the
triggerer, one of the provider's event triggers (``airflow_provider_acid.triggers.events``):

* by location (``ACID_WATCH_TABLE_URI``): :class:`AcidDeltaEventTrigger`, an event per new
  delta or delete-delta folder on storage;
* by name (``ACID_WATCH_TABLE``, ``DB.TABLE``, through ``ACID_METASTORE_CONN_ID``):
  :class:`AcidMetastoreWriteEventTrigger`, an event per write committed in the metastore.

Each event becomes an asset event (its ``extra`` holds the trigger's payload: the folder, or the
write id) and so a DAG run, with no timer and no manual trigger; the run snapshots the table
into ``ACID_WATCH_OUTPUT_URI`` (keeping the newest two snapshots). Events that arrive while a
run is queued are served by that run. ``ACID_WATCH_POLL_SECONDS`` sets how often the trigger
looks (default 30); ``ACID_WATCH_ABOVE_WRITE_ID`` makes every change above that write count,
even one made before the triggerer started (by default only later ones count).

Without a table configured the DAG is defined unscheduled, watching nothing (so that a fresh
deployment's triggerer watches nothing): its doc and its one task name the variables to set.
Half a configuration (a table but no output, or both a name and a location) is an import
error naming the variables.
"""

from __future__ import annotations

import os
import re

import pendulum
from airflow.sdk import DAG, Asset, AssetWatcher, task

from airflow_provider_acid.operators.snapshot_tasks import acid_snapshot_tasks

TABLE_URI = os.environ.get("ACID_WATCH_TABLE_URI", "")
TABLE_NAME = os.environ.get("ACID_WATCH_TABLE", "")
METASTORE_CONN = os.environ.get("ACID_METASTORE_CONN_ID", "metastore_default")
OUTPUT_URI = os.environ.get("ACID_WATCH_OUTPUT_URI", "")
POLL_SECONDS = float(os.environ.get("ACID_WATCH_POLL_SECONDS", "30"))
ABOVE = os.environ.get("ACID_WATCH_ABOVE_WRITE_ID", "")
ABOVE_WRITE_ID = int(ABOVE) if ABOVE.strip() else None


def table_changes(table_uri: str, table: str) -> Asset:
    """The asset of the table's changes, fed by the watcher that fits how it is named."""
    # imported here: an unconfigured file stays cheap to parse (the metastore trigger's module
    # loads the Thrift bindings)
    from airflow_provider_acid.triggers.events import (
        AcidDeltaEventTrigger,
        AcidMetastoreWriteEventTrigger,
    )

    if table:
        trigger = AcidMetastoreWriteEventTrigger(
            table=table,
            metastore_conn_id=METASTORE_CONN,
            poll_interval=POLL_SECONDS,
            above_write_id=ABOVE_WRITE_ID,
        )
    else:
        trigger = AcidDeltaEventTrigger(
            table_uri=table_uri, poll_interval=POLL_SECONDS, above_write_id=ABOVE_WRITE_ID
        )
    slug = re.sub(r"[^A-Za-z0-9_]+", "_", table or table_uri).strip("_")[-200:]
    return Asset(
        name=f"acid_changes_{slug}",
        watchers=[AssetWatcher(name=f"acid_watch_{slug}", trigger=trigger)],
    )


SETTINGS = (
    "set ACID_WATCH_TABLE_URI (the table's location) or ACID_WATCH_TABLE (DB.TABLE, through "
    "the hive_metastore connection ACID_METASTORE_CONN_ID), and ACID_WATCH_OUTPUT_URI (where "
    "the snapshots go), in the environment of every Airflow process"
)


def configuration_error() -> str | None:
    """What is wrong with a half-given configuration (None: complete, or not given at all)."""
    if TABLE_URI and TABLE_NAME:
        return (
            f"acid_snapshot_on_change: ACID_WATCH_TABLE_URI={TABLE_URI!r} and "
            f"ACID_WATCH_TABLE={TABLE_NAME!r} are both set: set one of them"
        )
    if (TABLE_URI or TABLE_NAME) and not OUTPUT_URI:
        return f"acid_snapshot_on_change: ACID_WATCH_OUTPUT_URI is not set: {SETTINGS}"
    if OUTPUT_URI and not (TABLE_URI or TABLE_NAME):
        return (
            "acid_snapshot_on_change: ACID_WATCH_OUTPUT_URI is set but neither "
            f"ACID_WATCH_TABLE_URI nor ACID_WATCH_TABLE: {SETTINGS}"
        )
    return None


if configuration_error():
    raise ImportError(configuration_error())

if not (TABLE_URI or TABLE_NAME):
    with DAG(
        dag_id="acid_snapshot_on_change",
        schedule=None,
        start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
        catchup=False,
        tags=["acid", "example", "event-driven"],
        doc_md=f"**Not configured: it watches no table.** To use it, {SETTINGS}.\n\n{__doc__}",
    ) as dag:

        @task
        def not_configured() -> None:
            """Fails, naming the variables to set."""
            raise RuntimeError(f"acid_snapshot_on_change watches no table: {SETTINGS}")

        not_configured()
else:
    changes = table_changes(TABLE_URI, TABLE_NAME)
    with DAG(
        dag_id="acid_snapshot_on_change",
        schedule=[changes],
        start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
        catchup=False,
        max_active_runs=1,
        tags=["acid", "example", "event-driven"],
        doc_md=__doc__,
    ) as dag:

        @task
        def what_changed(triggering_asset_events=None) -> list[dict]:
            """The watcher's payloads behind this run: the folders or the write ids."""
            payloads = [
                (event.extra or {}).get("payload", {})
                for events in (triggering_asset_events or {}).values()
                for event in events
            ]
            for payload in payloads:
                print(f"table changed: {payload}")
            return payloads

        snapshot = acid_snapshot_tasks(
            table_uri=TABLE_URI or None,
            table=TABLE_NAME or None,
            metastore_conn_id=METASTORE_CONN if TABLE_NAME else None,
            output_uri=OUTPUT_URI,
            keep_snapshots=2,
        )
        what_changed() >> snapshot.first
