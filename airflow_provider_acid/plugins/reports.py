"""The API server serves the manifest tasks' pruning reports (the target of
:class:`~airflow_provider_acid.operators.links.AcidPruningReportLink`).

``GET /acid/reports/{dag_id}/{run_id}/{task_id}[?map_index=N]`` reads the task's
``report_uri`` XCom, and the connection it was written with, from the metadata database and
returns the page, read through that ``acid`` connection (local disk or an object store). Only
what a manifest task recorded can be served, never a path from the request. The caller must
be allowed to read the DAG's XComs (``requires_access_dag``: the UI's session cookie or a
bearer token, as every API call). The page is returned with a Content-Security-Policy that
forbids scripts and every fetch, as it needs none. A report whose run failed before its
commit says so (not "not yet committed"); a report that is missing is a small HTML page with
status 404 naming the task.

Registered as the plugin ``acid_reports`` (:class:`AcidReportsPlugin`).
"""

from __future__ import annotations

import html
from typing import Any

from airflow.plugins_manager import AirflowPlugin
from fastapi import Depends, FastAPI, Request
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


class ReportMissing(LookupError):
    """No report to show (the message says which task's, and why)."""


def failed_before_commit(dag_id: str, run_id: str) -> str | None:
    """Why a run ended without committing (its failed tasks), None unless it failed."""
    from airflow.models.dagrun import DagRun
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        state = session.scalar(
            select(DagRun.state).where(DagRun.dag_id == dag_id, DagRun.run_id == run_id)
        )
        if state != "failed":
            return None
        failed = session.scalars(
            select(TaskInstance.task_id)
            .where(
                TaskInstance.dag_id == dag_id,
                TaskInstance.run_id == run_id,
                TaskInstance.state == "failed",
            )
            .distinct()
        ).all()
    tasks = ", ".join(sorted(failed)) or "none recorded"
    return f"the run {run_id} failed before its commit (failed tasks: {tasks})"


def read_report_page(dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> str:
    """The page of a task's report; :class:`ReportMissing` when the task recorded none or
    it is gone. A report still waiting for its commit in a run that failed is shown
    failed."""
    page = _stored_page(dag_id, run_id, task_id, map_index)
    from ..pruning.report import report_from_page
    from ..pruning.report_page import render_html

    report = report_from_page(page)
    if report.rows is None and report.commit_error is None:
        failure = failed_before_commit(dag_id, run_id)
        if failure is not None:
            return render_html(report.with_failure(failure))
    return page


def missing_page(message: str) -> str:
    """The small page of a report that is not there."""
    text = html.escape(message)
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>No pruning report'
        '</title></head><body style="font:14px system-ui,sans-serif;margin:24px">'
        f'<h1 style="font-size:18px">No pruning report</h1><p id="missing">{text}.</p>'
        "</body></html>"
    )


def _stored_page(dag_id: str, run_id: str, task_id: str, map_index: int) -> str:
    uri = task_xcom(dag_id, run_id, task_id, map_index, REPORT_XCOM_KEY)
    if not uri:
        raise ReportMissing(
            f"task {task_id} of DAG {dag_id}, run {run_id}, wrote no report (it has not run "
            "yet, failed before writing one, or was run with report=False)"
        )
    from ..acid.listing import resolve_filesystem
    from ..hooks.acid import AcidHook

    conn_id = task_xcom(dag_id, run_id, task_id, map_index, REPORT_CONN_XCOM_KEY)
    hook = AcidHook(conn_id or None)
    fs, path = resolve_filesystem(hook.resolve_uri(uri), storage_options=hook.storage_options)
    try:
        with fs.open(path, "r", encoding="utf-8") as handle:
            return handle.read()
    except FileNotFoundError as exc:
        raise ReportMissing(
            f"the report {uri} of task {task_id} of DAG {dag_id}, run {run_id}, is gone"
        ) from exc


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
        headers = {"Content-Security-Policy": CONTENT_SECURITY_POLICY}
        try:
            page = read_report_page(dag_id, run_id, task_id, map_index)
        except ReportMissing as exc:
            return HTMLResponse(missing_page(str(exc)), status_code=404, headers=headers)
        return HTMLResponse(page, headers=headers)

    return app


class AcidReportsPlugin(AirflowPlugin):
    """Mounts the reports app on the API server at ``/acid/reports``."""

    name = "acid_reports"
    fastapi_apps = [{"app": create_app(), "url_prefix": REPORTS_PREFIX, "name": "Pruning reports"}]
