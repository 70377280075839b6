"""The event triggers behind asset watchers: one event per new delta folder (on real table
folders written by AcidTableWriter) and one per write committed in the real metastore.

The triggers run as the triggerer runs them: their ``run()`` generator in an event loop, here
with a short poll interval, while the test writes to the table. ``make e2e`` shows the whole
chain in a live Airflow: the watcher's event creating a DAG run of ``acid_snapshot_on_change``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from airflow.sdk import Asset, AssetWatcher
from airflow.sdk.module_loading import import_string
from airflow.triggers.base import BaseEventTrigger
from test_metastore_sensor import metastore_conn  # noqa: F401 (fixture)

from airflow_provider_acid.acid.changes import new_delta_folders
from airflow_provider_acid.acid.listing import list_table_files, resolve_filesystem
from airflow_provider_acid.testing import AcidTableWriter
from airflow_provider_acid.triggers.events import (
    AcidDeltaEventTrigger,
    AcidMetastoreWriteEventTrigger,
)

POLL = 0.05
COLUMNS = [("id", "bigint"), ("name", "string")]


def delta_folders(path: str) -> set[tuple[str, str]]:
    """The table's delta and delete-delta folders, as listed (partition, folder)."""
    fs, root = resolve_filesystem(path)
    return {(f.partition, f.folder) for f in new_delta_folders(list_table_files(fs, root), root, 0)}


class Watching:
    """Runs a trigger's generator in an event loop of its own thread and collects its events."""

    def __init__(self, trigger: BaseEventTrigger) -> None:
        self.trigger = trigger
        self.events: list[dict[str, Any]] = []

    async def _collect(self) -> None:
        async for event in self.trigger.run():
            self.events.append(event.payload)

    async def run(self, steps: list[tuple[Callable[[], Any], int]]) -> list[Any]:
        """Each step: do something (a write), then wait until ``n`` events in all were
        yielded, then a few more polls to see that no other event comes."""
        task = asyncio.ensure_future(self._collect())
        results = []
        try:
            await asyncio.sleep(10 * POLL)  # the first look: what exists is no change
            for action, expected in steps:
                results.append(await asyncio.to_thread(action))
                for _ in range(400):
                    if len(self.events) >= expected or task.done():
                        break
                    await asyncio.sleep(POLL)
                await asyncio.sleep(10 * POLL)
                assert len(self.events) == expected, (self.events, expected)
        finally:
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass
        return results


def test_the_triggers_are_event_triggers_of_primitives_for_asset_watchers():
    delta = AcidDeltaEventTrigger("s3://wh/t", ["delete_delta"], ["dt=1"], 5.0, "acid", 7)
    writes = AcidMetastoreWriteEventTrigger("db.t", "metastore_default", 30.0, 3)
    for trigger in (delta, writes):
        path, kwargs = trigger.serialize()
        assert json.loads(json.dumps(kwargs)) == kwargs  # primitives only
        again = import_string(path)(**kwargs)
        assert again.serialize() == (path, kwargs)
        # the trigger's identity in the triggerer: the same for the same arguments
        assert BaseEventTrigger.hash(path, kwargs) == BaseEventTrigger.hash(*again.serialize())
    asset = Asset("t_changes", watchers=[AssetWatcher(name="t_deltas", trigger=delta)])
    assert asset.watchers[0].trigger is delta
    with pytest.raises(ValueError, match="inserts"):
        AcidDeltaEventTrigger("s3://wh/t", ["inserts"])


def test_one_event_per_new_delta_folder(tmp_path: Path):
    table = AcidTableWriter(
        str(tmp_path / "sales"), COLUMNS, [("dt", "string")], buckets=2, bucket_by="id"
    )
    table.insert([{"id": i, "name": f"n{i}", "dt": "2024-01-01"} for i in range(20)])
    before = delta_folders(table.path)
    assert before  # the first write exists before the trigger starts: it is no change
    watching = Watching(AcidDeltaEventTrigger(table.path, poll_interval=POLL))

    def write(action: Callable[[], Any]) -> Callable[[], set[tuple[str, str]]]:
        def run() -> set[tuple[str, str]]:
            was = delta_folders(table.path)
            action()
            return delta_folders(table.path) - was

        return run

    inserted, deleted, updated = asyncio.run(
        watching.run(
            [
                (write(lambda: table.insert([{"id": 99, "name": "x", "dt": "2024-01-02"}])), 1),
                (write(lambda: table.delete(lambda row: row["id"] < 3)), 2),
                # an update: a delete delta and a delta of one write id, two folders
                (write(lambda: table.update(lambda r: r["id"] == 5, {"name": "u"})), 4),
            ]
        )
    )
    assert (len(inserted), len(deleted), len(updated)) == (1, 1, 2)
    seen = [(e["partition"], e["folder"]) for e in watching.events]
    assert len(seen) == len(set(seen))  # each folder once
    assert set(seen) == inserted | deleted | updated
    assert not set(seen) & before
    kinds = {e["folder"]: e["kind"] for e in watching.events}
    assert [kinds[f] for _, f in deleted] == ["delete_delta"]
    assert sorted(kinds[f] for _, f in updated) == ["delete_delta", "delta"]
    write_ids = table.write_id_snapshot().high_watermark
    assert watching.events[-1]["max_write_id"] == write_ids
    assert {e["table_uri"] for e in watching.events} == {table.path}


def test_above_write_id_counts_the_folders_above_it_as_new(tmp_path: Path):
    table = AcidTableWriter(str(tmp_path / "t"), COLUMNS)
    for i in range(3):
        table.insert([{"id": i, "name": "a"}])
    watching = Watching(
        AcidDeltaEventTrigger(
            table.path, kinds=["delete_delta"], above_write_id=1, poll_interval=POLL
        )
    )
    asyncio.run(watching.run([(lambda: table.delete(lambda r: r["id"] == 0), 1)]))
    # writes 2 and 3 are deltas (not watched); only the delete delta of write 4 counts
    assert [(e["kind"], e["min_write_id"]) for e in watching.events] == [("delete_delta", 4)]


def test_one_event_per_write_committed_in_the_metastore(metastore_db, metastore_conn):  # noqa: F811
    writer = metastore_db.writer("events", COLUMNS)
    metastore_db.register(writer)
    writer.insert([{"id": 1, "name": "before"}])  # committed before the trigger starts
    name = metastore_db.table_name("events")
    watching = Watching(AcidMetastoreWriteEventTrigger(name, metastore_conn, poll_interval=POLL))
    opened: list[Any] = []

    def open_a_write() -> int:
        txn = writer.begin()
        txn.insert([{"id": 2, "name": "open, committed later"}])
        opened.append(txn)
        return txn.write_id

    def commit_it() -> int:
        opened[0].commit()
        return opened[0].write_id

    def abort_one() -> int:
        txn = writer.begin()
        txn.insert([{"id": 3, "name": "aborted"}])
        txn.abort()
        return txn.write_id

    def two_commits() -> list[int]:
        writer.insert([{"id": 4, "name": "a"}])
        writer.delete(lambda r: r["id"] == 1)
        return [
            writer.write_id_snapshot().high_watermark - 1,
            writer.write_id_snapshot().high_watermark,
        ]

    open_id, committed_id, aborted_id, last_two = asyncio.run(
        watching.run([(open_a_write, 0), (commit_it, 1), (abort_one, 1), (two_commits, 3)])
    )
    assert open_id == committed_id
    assert [e["write_id"] for e in watching.events] == [committed_id, *last_two]
    assert aborted_id not in [e["write_id"] for e in watching.events]
    assert {e["table"] for e in watching.events} == {name}
    assert watching.events[-1]["valid_write_ids"] == writer.valid_write_ids()


def test_the_example_dag_is_scheduled_on_the_watched_asset(monkeypatch, tmp_path: Path):
    import importlib
    import sys

    from airflow.serialization.serialized_objects import DagSerialization

    dags = str(Path(__file__).resolve().parents[2] / "dags")
    monkeypatch.syspath_prepend(dags)
    monkeypatch.setenv("ACID_WATCH_TABLE_URI", str(tmp_path / "sales"))
    monkeypatch.setenv("ACID_WATCH_OUTPUT_URI", str(tmp_path / "out"))
    monkeypatch.setenv("ACID_WATCH_ABOVE_WRITE_ID", "4")
    sys.modules.pop("acid_snapshot_on_change", None)
    module = importlib.import_module("acid_snapshot_on_change")
    try:
        (watcher,) = module.changes.watchers
        assert isinstance(watcher.trigger, AcidDeltaEventTrigger)
        assert watcher.trigger.table_uri == str(tmp_path / "sales")
        assert watcher.trigger.above_write_id == 4
        serialised = json.dumps(DagSerialization.to_dict(module.dag), default=str)
        assert "airflow_provider_acid.triggers.events.AcidDeltaEventTrigger" in serialised
        assert module.changes.name in serialised
        assert module.dag.get_task("what_changed").downstream_task_ids == {"manifest"}
    finally:
        sys.modules.pop("acid_snapshot_on_change", None)
    # unconfigured, the file's DAG is scheduled on nothing (a fresh triggerer watches nothing)
    monkeypatch.delenv("ACID_WATCH_TABLE_URI")
    monkeypatch.delenv("ACID_WATCH_OUTPUT_URI")
    module = importlib.import_module("acid_snapshot_on_change")
    sys.modules.pop("acid_snapshot_on_change", None)
    assert module.dag.schedule is None and not hasattr(module, "changes")
