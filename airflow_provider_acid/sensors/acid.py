"""AcidDeltaSensor: waits for new delta / delete_delta folders in a Hive ACID table."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from airflow.sdk import BaseSensorOperator, PokeReturnValue, conf
from airflow.sdk.exceptions import AirflowException

from ..acid.changes import NewDeltaFolder, find_new_delta_folders, parse_kinds
from ..hooks.acid import AcidHook
from ..operators import lineage
from ..operators.lineage import OpenLineageMixin
from ..operators.task_arguments import whole_number_or_none
from ..triggers.acid import AcidDeltaTrigger


class AcidDeltaSensor(OpenLineageMixin, BaseSensorOperator):
    """Waits until a table holds delta folders with write ids above a watermark.

    The watermark is ``above_write_id`` when given, else the highest write id of the last
    snapshot committed under ``snapshot_uri``, else 0 (any delta). Returns, as its XCom,
    ``{"table_uri", "waited_in" ("worker" or "triggerer"), "watermark", "max_write_id",
    "folders": [{partition, folder, kind, min_write_id, max_write_id}, ...]}``.

    :param table_uri: table location (path, fsspec URL, or relative to the connection prefix).
    :param above_write_id: the watermark; templated, so ``"{{ params.since }}"`` works.
    :param snapshot_uri: output location whose last committed snapshot gives the watermark.
    :param snapshot_committed_before: only snapshots committed before this time count
        (templated; ``"{{ data_interval_end }}"`` makes re-runs of an interval repeatable).
    :param kinds: ``"delta"``, ``"delete_delta"`` or both.
    :param partitions: only these partition paths (``k=v[/k2=v2]``).
    :param acid_conn_id: the ``acid`` connection for storage credentials.
    :param deferrable: wait in the triggerer instead of a worker slot.
    :param poll_interval: seconds between looks (also the sensor's ``poke_interval``).
    :param poke_before_defer: deferrable only: look once on the worker first and return at
        once when folders are there (False: hand over to the triggerer straight away).

    Templated fields: ``table_uri``, ``above_write_id``, ``snapshot_uri``,
    ``snapshot_committed_before``, ``partitions``, ``acid_conn_id``.
    """

    template_fields: Sequence[str] = (
        "table_uri",
        "above_write_id",
        "snapshot_uri",
        "snapshot_committed_before",
        "partitions",
        "acid_conn_id",
    )
    ui_color = "#d6eaf8"

    def __init__(
        self,
        *,
        table_uri: str,
        above_write_id: int | str | None = None,
        snapshot_uri: str | None = None,
        snapshot_committed_before: str | None = None,
        kinds: Sequence[str] = ("delta", "delete_delta"),
        partitions: Sequence[str] | None = None,
        acid_conn_id: str | None = None,
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        poll_interval: float = 60.0,
        poke_before_defer: bool = True,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("poke_interval", poll_interval)
        super().__init__(**kwargs)
        parse_kinds(kinds)  # a typo fails at DAG parse time, naming the kind
        self.table_uri = table_uri
        self.above_write_id = above_write_id
        self.snapshot_uri = snapshot_uri
        self.snapshot_committed_before = snapshot_committed_before
        self.kinds = list(kinds)
        self.partitions = list(partitions) if partitions is not None else None
        self.acid_conn_id = acid_conn_id
        self.deferrable = deferrable
        self.poll_interval = poll_interval
        self.poke_before_defer = poke_before_defer

    def _lineage_on_start(self) -> lineage.RunLineage:
        """OpenLineage: the table watched, at its location."""
        return lineage.location_lineage(AcidHook(self.acid_conn_id).resolve_uri(self.table_uri))

    def _watermark(self) -> int:
        above = whole_number_or_none(self.above_write_id, "above_write_id")
        if above is not None:
            return above
        if self.snapshot_uri:
            from ..output import last_committed_write_id

            hook = AcidHook(self.acid_conn_id)
            return last_committed_write_id(
                hook.resolve_uri(self.snapshot_uri),
                committed_before=self.snapshot_committed_before or None,
                storage_options=hook.storage_options,
            )  # 0 when nothing is committed yet: any delta counts
        return 0

    def _result(
        self, watermark: int, folders: list[dict[str, Any]], waited_in: str = "worker"
    ) -> dict[str, Any]:
        return {
            "table_uri": self.table_uri,
            "waited_in": waited_in,
            "watermark": watermark,
            "max_write_id": max((f["max_write_id"] for f in folders), default=watermark),
            "folders": folders,
        }

    def poke(self, context: Any) -> PokeReturnValue:
        watermark = self._watermark()
        hook = AcidHook(self.acid_conn_id)
        folders: list[NewDeltaFolder] = find_new_delta_folders(
            hook.resolve_uri(self.table_uri),
            watermark,
            self.kinds,
            self.partitions,
            storage_options=hook.storage_options,
        )
        self.log.info(
            "%d new folder(s) above write %d in %s", len(folders), watermark, self.table_uri
        )
        return PokeReturnValue(
            bool(folders), self._result(watermark, [f.to_dict() for f in folders])
        )

    def execute(self, context: Any) -> Any:
        if not self.deferrable:
            return super().execute(context)
        if self.poke_before_defer:
            done = self.poke(context)
            if done:
                return done.xcom_value
            watermark = done.xcom_value["watermark"]
        else:
            watermark = self._watermark()
        hook = AcidHook(self.acid_conn_id)
        self.defer(
            trigger=AcidDeltaTrigger(
                table_uri=hook.resolve_uri(self.table_uri),
                above_write_id=watermark,
                kinds=self.kinds,
                partitions=self.partitions,
                poll_interval=self.poll_interval,
                acid_conn_id=self.acid_conn_id,
            ),
            method_name="execute_complete",
            kwargs={"watermark": watermark},
            timeout=timedelta(seconds=self.timeout) if self.timeout else None,
        )

    def execute_complete(
        self, context: Any, event: dict[str, Any], watermark: int = 0
    ) -> dict[str, Any]:
        """Resumes after the trigger: its folders, or the trigger's error as a task failure."""
        if not event or event.get("status") != "success":
            message = (event or {}).get("message", "the trigger sent no event")
            raise AirflowException(f"AcidDeltaSensor on {self.table_uri}: {message}")
        return self._result(watermark, event["folders"], waited_in="triggerer")
