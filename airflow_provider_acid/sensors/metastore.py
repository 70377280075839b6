"""AcidMetastoreWriteSensor: waits for committed writes to a Hive ACID table, per its metastore."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from airflow.sdk import BaseSensorOperator, PokeReturnValue, conf
from airflow.sdk.exceptions import AirflowException

from ..engine.watermark import snapshot_watermark
from ..hooks.acid import AcidHook
from ..hooks.metastore import AcidMetastoreHook
from ..metastore.changes import SnapshotWatermark, committed_writes_since
from ..metastore.client import MetastoreClient, split_table_name
from ..metastore.notifications import TableLogReader, current_event_id
from ..operators import lineage
from ..operators.lineage import OpenLineageMixin
from ..operators.task_arguments import whole_number_or_none
from ..triggers.metastore import WAIT_ON, AcidMetastoreWriteTrigger


class AcidMetastoreWriteSensor(OpenLineageMixin, BaseSensorOperator):
    """Waits until the metastore shows writes to a table committed since a watermark.

    Only committed writes count, never open or aborted ones. The watermark is
    ``above_write_id`` when given, else the last snapshot committed under ``snapshot_uri`` (the
    write-id list it was read with: a write open then and committed since counts too; its
    highest write id for a snapshot read without one), else 0 (any commit). For tables
    without a metastore, ``AcidDeltaSensor`` watches storage instead. Returns, as its XCom,
    ``{"table", "metastore" (URI without credentials), "watermark", "write_ids" (the newly
    committed ones, sorted), "valid_write_ids" (the table's write-id list then), "waited_in"
    ("worker" or "triggerer")}``.

    ``wait_on="notifications"`` waits on the metastore's notification log instead of polling
    the write-id list (where the metastore has the log on; an error names the metastore when
    it has not). The first look (and the trigger's, when it starts) reads the write-id list,
    the log's cursor taken before it (the newest event id, or ``after_event_id``); later
    looks, and the trigger, read the log from the cursor and look at the write-id list again
    only when it shows a commit of the table (another table's commit or an abort does not
    count). Its XCom adds ``last_event_id``: the
    cursor to give the next run as ``after_event_id``. The cursor is kept between looks in
    every mode: ``mode="poke"`` in the running task, ``mode="reschedule"`` in Airflow's task
    state store (Airflow 3.3+, per try: each reschedule runs in a new process with the task's
    XComs cleared; without the store the sensor refuses the mode), ``deferrable`` in the
    trigger's arguments. A cursor the log has left behind (its time-to-live removed the events
    after it) fails the task with an error saying so; a retry starts with a first look again.

    :param table: ``db.table`` in the metastore.
    :param metastore_conn_id: the ``hive_metastore`` connection.
    :param above_write_id: the watermark; templated, so ``"{{ params.since }}"`` works.
    :param snapshot_uri: output location whose last committed snapshot gives the watermark.
    :param snapshot_committed_before: only snapshots committed before this time count
        (templated; ``"{{ data_interval_end }}"`` makes re-runs of an interval repeatable).
    :param acid_conn_id: the ``acid`` connection for the snapshots' storage credentials.
    :param deferrable: wait in the triggerer instead of a worker slot.
    :param poll_interval: seconds between looks (also the sensor's ``poke_interval``).
    :param poke_before_defer: deferrable only: look once on the worker first and return at
        once when writes are there (False: hand over to the triggerer straight away).
    :param wait_on: ``write_ids`` (the default: poll the table's write-id list) or
        ``notifications`` (read the metastore's notification log).
    :param after_event_id: ``notifications`` only: the log's cursor, the id of the last event
        already seen (templated; default: the newest event when the sensor starts).

    Templated fields: ``table``, ``metastore_conn_id``, ``above_write_id``, ``snapshot_uri``,
    ``snapshot_committed_before``, ``acid_conn_id``, ``after_event_id``.
    """

    template_fields: Sequence[str] = (
        "table",
        "metastore_conn_id",
        "above_write_id",
        "snapshot_uri",
        "snapshot_committed_before",
        "acid_conn_id",
        "after_event_id",
    )
    ui_color = "#d6eaf8"

    def __init__(
        self,
        *,
        table: str,
        metastore_conn_id: str = AcidMetastoreHook.default_conn_name,
        above_write_id: int | str | None = None,
        snapshot_uri: str | None = None,
        snapshot_committed_before: str | None = None,
        acid_conn_id: str | None = None,
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        poll_interval: float = 60.0,
        poke_before_defer: bool = True,
        wait_on: str = "write_ids",
        after_event_id: int | str | None = None,
        **kwargs: Any,
    ) -> None:
        if wait_on not in WAIT_ON:
            raise ValueError(f"wait_on must be one of {WAIT_ON}, got {wait_on!r}")
        kwargs.setdefault("poke_interval", poll_interval)
        super().__init__(**kwargs)
        self.table = table
        self.metastore_conn_id = metastore_conn_id
        self.above_write_id = above_write_id
        self.snapshot_uri = snapshot_uri
        self.snapshot_committed_before = snapshot_committed_before
        self.acid_conn_id = acid_conn_id
        self.deferrable = deferrable
        self.poll_interval = poll_interval
        self.poke_before_defer = poke_before_defer
        self.wait_on = wait_on
        self.after_event_id = after_event_id
        self._memory = _MemoryCursor()  # poke mode: the log's reader between looks

    def _since(self) -> SnapshotWatermark:
        above = whole_number_or_none(self.above_write_id, "above_write_id")
        if above is not None:
            return SnapshotWatermark(above)
        if self.snapshot_uri:
            hook = AcidHook(self.acid_conn_id)
            return snapshot_watermark(
                hook.resolve_uri(self.snapshot_uri),
                self.table,
                committed_before=self.snapshot_committed_before or None,
                storage_options=hook.storage_options,
            )  # 0 when nothing is committed yet: any commit counts
        return SnapshotWatermark(0)

    def _lineage_on_start(self) -> lineage.RunLineage:
        """OpenLineage: the table watched, by name (``hive://HOST:PORT``, ``db.table``)."""
        metastore = AcidMetastoreHook(self.metastore_conn_id).uri
        return lineage.named_table_lineage(metastore, self.table)

    def _cursor(self, hook: AcidMetastoreHook) -> int:
        """The log's cursor: ``after_event_id``, else the newest event id (the log must be on)."""
        with MetastoreClient(hook.address) as client:
            newest = current_event_id(client)
        given = whole_number_or_none(self.after_event_id, "after_event_id")
        return newest if given is None else given

    def _result(
        self, metastore: str, writes: dict[str, Any], waited_in: str = "worker"
    ) -> dict[str, Any]:
        seen = writes["valid_write_ids"]  # OpenLineage: the read view of the last look
        self._keep_lineage(lambda: lineage.named_table_lineage(metastore, self.table, seen))
        cursor = writes.get("last_event_id")
        return {
            "table": writes["table"],
            "metastore": metastore,
            "watermark": writes["watermark"],
            "write_ids": list(writes["write_ids"]),
            "valid_write_ids": writes["valid_write_ids"],
            "waited_in": waited_in,
            **({"last_event_id": cursor} if cursor is not None else {}),
        }

    def _look(self, since: SnapshotWatermark, cursor: int | None = None) -> PokeReturnValue:
        hook = AcidMetastoreHook(self.metastore_conn_id)
        writes = committed_writes_since(hook.address, self.table, **since.since())
        self.log.info(
            "%d write(s) of %s committed since write %d: %s (write ids now %s)",
            len(writes.write_ids),
            writes.table,
            writes.watermark,
            list(writes.write_ids),
            writes.valid_write_ids,
        )
        if writes.high_watermark < writes.watermark:
            self.log.warning(
                "%s has allocated write ids up to %d only, below the watermark %d: was the "
                "table dropped and created again?",
                writes.table,
                writes.high_watermark,
                writes.watermark,
            )
        found = writes.to_dict() | ({"last_event_id": cursor} if cursor is not None else {})
        return PokeReturnValue(writes.found, self._result(hook.uri, found))

    def _cursor_store(self, context: Any) -> _CursorStore:
        """Where the log's reader is kept between looks: this object in ``poke`` mode (one
        process runs every look), Airflow's task state store in ``reschedule`` mode."""
        if not self.reschedule:
            return self._memory
        store = context.get("task_state_store")
        if store is None:
            raise AirflowException(
                f"AcidMetastoreWriteSensor on {self.table}: wait_on='notifications' with "
                "mode='reschedule' keeps the log's cursor in Airflow's task state store between "
                "looks, which this Airflow lacks (3.3 has it): use mode='poke', "
                "deferrable=True, or wait_on='write_ids'"
            )
        return _TaskStateCursor(store, context["ti"].try_number)

    def poke(self, context: Any) -> PokeReturnValue:
        if self.wait_on != "notifications":
            return self._look(self._since())
        hook = AcidMetastoreHook(self.metastore_conn_id)
        store = self._cursor_store(context)
        kept = store.load(hook.uri, self.table)
        if kept is None:  # the first look: the log's cursor, then the write-id list
            reader = TableLogReader(self.table, self._cursor(hook))
            found = self._look(self._since(), reader.after_event_id)
        else:
            with MetastoreClient(hook.address) as client:
                log = kept.read(client)
            reader = kept
            if not (log.committed_write_ids or log.unmatched_commits):
                self.log.info(
                    "No commit of %s in the log up to event %d", self.table, log.last_event_id
                )
                store.save(hook.uri, reader)
                return PokeReturnValue(False)
            found = self._look(self._since(), log.last_event_id)
        if found:
            store.clear()
        else:  # kept only now: a failed look reads the same events again at the next one
            store.save(hook.uri, reader)
        return found

    def execute(self, context: Any) -> Any:
        if not self.deferrable:
            self._memory = _MemoryCursor()  # this try's; copies of the operator share one
            return super().execute(context)
        since = self._since()
        cursor = None
        if self.wait_on == "notifications":  # taken before the look: no commit falls between
            cursor = self._cursor(AcidMetastoreHook(self.metastore_conn_id))
        if self.poke_before_defer:
            done = self._look(since, cursor)
            if done:
                return done.xcom_value
        self.defer(
            trigger=AcidMetastoreWriteTrigger(
                table=self.table,
                metastore_conn_id=self.metastore_conn_id,
                poll_interval=self.poll_interval,
                wait_on=self.wait_on,
                after_event_id=cursor,
                **since.since(),
            ),
            method_name="execute_complete",
            timeout=timedelta(seconds=self.timeout) if self.timeout else None,
        )

    def execute_complete(self, context: Any, event: dict[str, Any]) -> dict[str, Any]:
        """Resumes after the trigger: its writes, or the trigger's error as a task failure."""
        if not event or event.get("status") != "success":
            message = (event or {}).get("message", "the trigger sent no event")
            raise AirflowException(f"AcidMetastoreWriteSensor on {self.table}: {message}")
        return self._result(event["metastore"], event, waited_in="triggerer")


# -- where the log's reader is kept between looks ---------------------------------------------

STATE_KEY = "acid_metastore_log"  # the task state store's key (reschedule mode)


def _table_name(table: str) -> str:
    return ".".join(split_table_name(table))


class _CursorStore:
    """Keeps a :class:`TableLogReader` between the sensor's looks."""

    def load(self, metastore: str, table: str) -> TableLogReader | None:
        """The reader kept for this metastore and table in this try, or None (the first look)."""
        raise NotImplementedError

    def save(self, metastore: str, reader: TableLogReader) -> None:
        raise NotImplementedError

    def clear(self) -> None:
        raise NotImplementedError


class _MemoryCursor(_CursorStore):
    def __init__(self) -> None:
        self._kept: tuple[str, dict[str, Any]] | None = None

    def load(self, metastore: str, table: str) -> TableLogReader | None:
        if self._kept is None or self._kept[0] != metastore:
            return None
        reader = TableLogReader.resume(self._kept[1])
        return reader if reader.table == _table_name(table) else None

    def save(self, metastore: str, reader: TableLogReader) -> None:
        self._kept = (metastore, reader.state())

    def clear(self) -> None:
        self._kept = None


class _TaskStateCursor(_CursorStore):
    """Airflow's task state store (3.3+): kept across reschedules, which start every look in a
    new process with the task's XComs cleared. Scoped to the try: a retry, or a cleared task run
    again, starts with a first look of its own."""

    def __init__(self, store: Any, try_number: int) -> None:
        self._store = store
        self._try = int(try_number)

    def load(self, metastore: str, table: str) -> TableLogReader | None:
        kept = self._store.get(STATE_KEY)
        if not isinstance(kept, dict) or kept.get("try_number") != self._try:
            return None
        reader = TableLogReader.resume(kept["reader"])
        if kept.get("metastore") != metastore or reader.table != _table_name(table):
            return None  # the connection or the table changed: start again
        return reader

    def save(self, metastore: str, reader: TableLogReader) -> None:
        value = {"try_number": self._try, "metastore": metastore, "reader": reader.state()}
        self._store.set(STATE_KEY, value)

    def clear(self) -> None:
        self._store.delete(STATE_KEY)
