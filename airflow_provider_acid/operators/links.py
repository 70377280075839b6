"""AcidPruningReportLink: the manifest task's "Pruning report" button in the Airflow UI.

The manifest task writes its HTML report next to its manifest (on local disk or an object
store) and pushes the report's location as XCom ``report_uri``. A browser cannot open that
location from the UI: a page served over http may not link to ``file://`` (browsers refuse
to navigate there), and an ``s3://`` URL means nothing to it. So Airflow serves the report
itself: the provider's plugin (:mod:`airflow_provider_acid.plugins.reports`) adds a small
FastAPI app to the API server, at ``/acid/reports/{dag_id}/{run_id}/{task_id}``, which reads
the task's ``report_uri`` XCom from the metadata database, checks that the user may read the
DAG's XComs (the UI's session cookie, as for every other API call), and returns the page read
through the task's ``acid`` connection. The link is that address under ``[api] base_url``;
the page needs nothing else (no script, no external style sheet).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from airflow.sdk import BaseOperatorLink

#: the XCom keys the manifest task pushes: the report's location and the connection it is read
#: with
REPORT_XCOM_KEY = "report_uri"
REPORT_CONN_XCOM_KEY = "report_acid_conn_id"
#: where the plugin's app is mounted on the API server
REPORTS_PREFIX = "/acid/reports"


def report_path(dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> str:
    """The report's address on the API server (below ``[api] base_url``)."""
    path = "/".join(quote(part, safe="") for part in (dag_id, run_id, task_id))
    suffix = f"?map_index={map_index}" if map_index is not None and map_index >= 0 else ""
    return f"{REPORTS_PREFIX}/{path}{suffix}"


def _base_url() -> str:
    from airflow.sdk.configuration import conf

    return (conf.get("api", "base_url", fallback="") or "").rstrip("/")


class AcidPruningReportLink(BaseOperatorLink):
    """Opens the pruning report of a manifest task (empty before the task wrote one)."""

    name = "Pruning report"

    def get_link(self, operator: Any, *, ti_key: Any) -> str:
        from airflow.sdk.execution_time.xcom import XCom

        if not XCom.get_value(ti_key=ti_key, key=REPORT_XCOM_KEY):
            return ""
        map_index = getattr(ti_key, "map_index", -1)
        return _base_url() + report_path(ti_key.dag_id, ti_key.run_id, ti_key.task_id, map_index)
