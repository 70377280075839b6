"""AcidDeltaTrigger against a real S3-compatible server, through an ``acid`` connection."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import pytest
import s3fs

import airflow_provider_acid.triggers.acid as trigger_module
from airflow_provider_acid.acid.listing import (
    aclose_filesystem,
    alist_table_files,
    open_async_filesystem,
)
from airflow_provider_acid.triggers.acid import AcidDeltaTrigger

CONN_ID = "acid_s3_test"
NEW_FOLDER = "delete_delta_0000005_0000005_0000"
#: How long the server takes to answer each listing while the trigger polls (seconds).
LISTING_LATENCY = 0.25
TICK = 0.01


@pytest.fixture
def acid_connection(s3, monkeypatch):
    """An ``acid`` connection to the server, defined the way deployments do: by environment."""
    monkeypatch.setenv(
        f"AIRFLOW_CONN_{CONN_ID.upper()}",
        json.dumps({"conn_type": "acid", "extra": s3.connection_extra}),
    )
    return CONN_ID


class AsyncListingSpy:
    """Wraps ``open_async_filesystem`` in the trigger module and the ``_find`` of what it opens.

    Records the filesystems opened and, for each ``_find``, when it ran, on which thread and
    whether it was awaited on the trigger's own running event loop.
    """

    def __init__(self, monkeypatch) -> None:
        self.opened: list[tuple[object, str]] = []
        self.finds: list[dict] = []
        self.sync_calls: list[str] = []
        real_open = trigger_module.open_async_filesystem

        def open_and_watch(uri, storage_options=None):
            fs, root = real_open(uri, storage_options)
            self.opened.append((fs, root))
            real_find = fs._find

            async def find(path, *args, **kwargs):
                record = {
                    "loop": asyncio.get_running_loop(),
                    "thread": threading.get_ident(),
                    "start": time.monotonic(),
                }
                self.finds.append(record)
                try:
                    return await real_find(path, *args, **kwargs)
                finally:
                    record["end"] = time.monotonic()

            def refuse(name):
                def call(*args, **kwargs):
                    self.sync_calls.append(name)
                    raise AssertionError(f"blocking {name}() called on the event loop")

                return call

            fs._find = find
            fs.find = refuse("find")
            fs.isdir = refuse("isdir")
            return fs, root

        monkeypatch.setattr(trigger_module, "open_async_filesystem", open_and_watch)

    async def close_all(self) -> None:
        """Close what the trigger opened (a no-op for what it closed itself)."""
        for fs, _ in self.opened:
            await aclose_filesystem(fs)


def test_trigger_fires_on_a_delete_delta_uploaded_later_without_blocking_the_loop(
    s3, hive_table, acid_connection, monkeypatch
):
    url = s3.upload_table(hive_table("nation"), s3.url("nation"))
    spy = AsyncListingSpy(monkeypatch)
    trigger = AcidDeltaTrigger(
        url, 4, ["delete_delta"], poll_interval=0.05, acid_conn_id=acid_connection
    )
    ticks: list[float] = []

    async def ticker() -> None:
        while True:
            ticks.append(time.monotonic())
            await asyncio.sleep(TICK)

    async def scenario():
        loop = asyncio.get_running_loop()
        ticking = asyncio.create_task(ticker())
        waiting = asyncio.ensure_future(trigger.run().__anext__())
        try:
            with s3.slow("ListObjectsV2", LISTING_LATENCY):
                deadline = time.monotonic() + 20
                while len([f for f in spy.finds if "end" in f]) < 3:  # write 4 is no news
                    assert not waiting.done(), waiting.result()
                    assert time.monotonic() < deadline, "the trigger does not poll"
                    await asyncio.sleep(0.02)
                assert not waiting.done()
                await asyncio.to_thread(
                    s3.fs.pipe, f"{url}/{NEW_FOLDER}/bucket_00000", b"deletes" * 20
                )
                event = await asyncio.wait_for(waiting, timeout=20)
        finally:
            ticking.cancel()
            await spy.close_all()
        return loop, event

    loop, event = asyncio.run(scenario())

    assert event.payload == {
        "status": "success",
        "folders": [
            {
                "partition": "",
                "folder": NEW_FOLDER,
                "kind": "delete_delta",
                "min_write_id": 5,
                "max_write_id": 5,
            }
        ],
    }
    # s3fs in asynchronous mode, opened with the connection's endpoint and credentials.
    ((fs, root),) = spy.opened
    assert isinstance(fs, s3fs.S3FileSystem)
    assert fs.asynchronous is True
    assert fs.client_kwargs["endpoint_url"] == s3.endpoint_url
    assert fs.key == s3.key
    assert root == url.removeprefix("s3://")
    # Every listing was awaited on the trigger's event loop, in its thread; nothing blocking.
    assert len(spy.finds) >= 4
    assert {f["loop"] for f in spy.finds} == {loop}
    assert len({f["thread"] for f in spy.finds}) == 1
    assert spy.sync_calls == []
    # While each slow listing was in flight, the ticker went on ticking: the loop was free.
    for find in spy.finds:
        assert find["end"] - find["start"] >= LISTING_LATENCY * 0.9
        during = [t for t in ticks if find["start"] < t < find["end"]]
        assert len(during) >= 0.3 * LISTING_LATENCY / TICK, (find, len(during))


def test_each_poll_is_one_listing_request(s3, hive_table, acid_connection, monkeypatch):
    url = s3.upload_table(hive_table("hcube_tbl6_partitioned"), s3.url("polls"))
    key = url.removeprefix(f"s3://{s3.bucket}/")
    trigger = AcidDeltaTrigger(url, 1, poll_interval=0.05, acid_conn_id=acid_connection)
    polls = 4
    spy = AsyncListingSpy(monkeypatch)
    s3.requests.clear()

    async def scenario():
        run = trigger.run()
        waiting = asyncio.ensure_future(run.__anext__())
        deadline = time.monotonic() + 20
        while len(s3.requests.all()) < polls and time.monotonic() < deadline:
            assert not waiting.done(), waiting.result()
            await asyncio.sleep(0.01)
        waiting.cancel()  # as the triggerer does when the task is cleared or times out
        with pytest.raises(asyncio.CancelledError):
            await waiting
        await run.aclose()
        await spy.close_all()

    with s3.requests.recording() as seen:
        asyncio.run(scenario())

    listings = seen[:polls]
    assert [r.operation for r in listings] == ["ListObjectsV2"] * polls
    assert {(r.bucket, r.query["prefix"][0], r.query["delimiter"][0]) for r in listings} == {
        (s3.bucket, key + "/", "")
    }


def test_trigger_reports_a_missing_table_as_an_error_event(s3, acid_connection, monkeypatch):
    url = s3.url("missing")
    spy = AsyncListingSpy(monkeypatch)
    trigger = AcidDeltaTrigger(url, 0, poll_interval=0.05, acid_conn_id=acid_connection)

    async def scenario():
        try:
            return await trigger.run().__anext__()
        finally:
            await spy.close_all()

    event = asyncio.run(scenario())
    assert event.payload["status"] == "error"
    assert "TableLocationError" in event.payload["message"]
    assert url.removeprefix("s3://") in event.payload["message"]


def test_aclose_filesystem_closes_the_s3fs_session(s3, hive_table):
    url = s3.upload_table(hive_table("nation"), s3.url("close"))

    async def scenario():
        fs, root = open_async_filesystem(url, s3.storage_options)
        first = await alist_table_files(fs, root)
        client = fs._s3
        session = client._endpoint.http_session
        await aclose_filesystem(fs)
        closed = session._sessions is None or all(s.closed for s in session._sessions.values())
        await aclose_filesystem(fs)  # twice is fine
        again = await alist_table_files(fs, root)  # a new client after closing
        await aclose_filesystem(fs)
        return first, again, closed

    first, again, closed = asyncio.run(scenario())
    assert closed
    assert [f.name for f in first] == [f.name for f in again]
    assert len(first) == 3  # a delta and two delete deltas, each one bucket file


def test_the_trigger_closes_its_s3_session(s3, hive_table, acid_connection, monkeypatch):
    url = s3.upload_table(hive_table("nation"), s3.url("closing"))
    spy = AsyncListingSpy(monkeypatch)
    fires = AcidDeltaTrigger(url, 3, poll_interval=0.05, acid_conn_id=acid_connection)
    missing = AcidDeltaTrigger(s3.url("gone"), 3, acid_conn_id=acid_connection)

    async def scenario():
        for trigger in (fires, missing):
            run = trigger.run()
            await run.__anext__()
            await run.aclose()
        still_open = [fs for fs, _ in spy.opened if fs._s3 is not None]
        await spy.close_all()
        return still_open

    assert asyncio.run(scenario()) == []
