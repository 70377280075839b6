"""The API server serves the manifest tasks' pruning reports (the target of
:class:`~airflow_provider_acid.operators.links.AcidPruningReportLink`).

``GET /acid/reports/{dag_id}/{run_id}/{task_id}[?map_index=N]`` reads the task's
``report_uri`` XCom, and the connection it was written with, from the metadata database and
returns the page, read through that ``acid`` connection (local disk or an object store). Only
what a manifest task recorded can be served, never a path from the request. The caller must
be allowed to read the DAG's XComs (``requires_access_dag``: the UI's session cookie or a
bearer token, as every API call). The page is returned with a Content-Security-Policy that
forbids scripts and every fetch, as it needs none.

Registered as the plugin ``acid_reports`` (:class:`AcidReportsPlugin`).
"""

from __future__ import annotations

from typing import Any

from airflow.plugins_manager import AirflowPlugin
from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import HTMLResponse

from ..operators.links import REPORT_CONN_XCOM_KEY, REPORT_XCOM_KEY, REPORTS_PREFIX

#: the page needs no script, font, image or fetch: forbid them all
CONTENT_SECURITY_POLICY = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"


def task_xcom(dag_id: str, run_id: str, task_id: str, map_index: int, key: str) -> Any:
    """One XCom of a task instance, from the metadata database (None when absent)."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        value = session.scalar(
            select(XComModel.value).where(
                XComModel.dag_id == dag_id,
                XComModel.run_id == run_id,
                XComModel.task_id == task_id,
                XComModel.map_index == map_index,
                XComModel.key == key,
            )
        )
    return XComModel.deserialize_value(_Row(value)) if value is not None else None


class _Row:
    """What ``XComModel.deserialize_value`` reads: an object with ``value``."""

    def __init__(self, value: Any) -> None:
        self.value = value


def read_report_page(dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> str:
    """The page of a task's report; HTTPException 404 when the task recorded none."""
    uri = task_xcom(dag_id, run_id, task_id, map_index, REPORT_XCOM_KEY)
    if not uri:
        raise HTTPException(404, f"task {dag_id}.{task_id} of run {run_id} wrote no report")
    from ..acid.listing import resolve_filesystem
    from ..hooks.acid import AcidHook

    conn_id = task_xcom(dag_id, run_id, task_id, map_index, REPORT_CONN_XCOM_KEY)
    hook = AcidHook(conn_id or None)
    fs, path = resolve_filesystem(hook.resolve_uri(uri), storage_options=hook.storage_options)
    try:
        with fs.open(path, "r", encoding="utf-8") as handle:
            return handle.read()
    except FileNotFoundError as exc:
        raise HTTPException(404, f"the report {uri} is gone") from exc


async def authorise(request: Request) -> None:
    """The API server's own check, made when a report is asked for: the caller (a bearer
    token, else the UI session's cookie) may read the DAG's XComs. The security stack is
    imported here, not with the plugin: every Airflow process loads plugins, and only the API
    server answers requests."""
    from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity
    from airflow.api_fastapi.core_api.security import (
        COOKIE_NAME_JWT_TOKEN,
        requires_access_dag,
        resolve_user_from_token,
    )

    header = request.headers.get("authorization", "")
    scheme, _, credentials = header.partition(" ")
    token = credentials if scheme.lower() == "bearer" and credentials else None
    user = await resolve_user_from_token(token or request.cookies.get(COOKIE_NAME_JWT_TOKEN))
    requires_access_dag(method="GET", access_entity=DagAccessEntity.XCOM)(request, user)


def create_app() -> FastAPI:
    app = FastAPI(title="airflow-provider-acid reports")

    @app.get(
        "/{dag_id}/{run_id}/{task_id}",
        response_class=HTMLResponse,
        dependencies=[Depends(authorise)],
    )
    def report(dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> HTMLResponse:
        page = read_report_page(dag_id, run_id, task_id, map_index)
        return HTMLResponse(page, headers={"Content-Security-Policy": CONTENT_SECURITY_POLICY})

    return app


class AcidReportsPlugin(AirflowPlugin):
    """Mounts the reports app on the API server at ``/acid/reports``."""

    name = "acid_reports"
    fastapi_apps = [{"app": create_app(), "url_prefix": REPORTS_PREFIX, "name": "Pruning reports"}]
