"""The pruning report a manifest task writes next to its manifest, under a real dag.test().

The snapshot chain (manifest, plan, mapped compaction, commit) runs on a demo table written by
the simulator, with a predicate that the partition step, Hive's bucketing hash and the column
statistics each prune part of. Every figure of the report is checked against what the run
itself recorded (the manifest, the committed snapshot, the table's rows), not against numbers
written here. tests/provider/test_report_browser.py renders the same page in Chromium.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pytest
from test_example_dags import xcom
from test_snapshot_tasks import register

from airflow_provider_acid.operators.links import REPORT_XCOM_KEY, report_path
from airflow_provider_acid.operators.snapshot_tasks import acid_snapshot_tasks
from airflow_provider_acid.output import latest_snapshot
from airflow_provider_acid.plugins.reports import task_xcom
from airflow_provider_acid.pruning.explain import conjuncts
from airflow_provider_acid.pruning.expressions import to_sql
from airflow_provider_acid.pruning.manifest import parse_predicate
from airflow_provider_acid.pruning.manifest_files import read_manifest
from airflow_provider_acid.pruning.report import build_report, read_report, report_uri_for
from airflow_provider_acid.testing import generate_demo_table

BUCKETS = 4


def predicate_ids(predicate: str) -> set[int]:
    """The ids of the predicate's IN term."""
    (term,) = [t for t in conjuncts(parse_predicate(predicate)) if " IN " in to_sql(t)]
    return {int(v) for v in term.values}


@dataclass(frozen=True)
class ReportRun:
    run: Any
    writer: Any
    out: Path
    where: str
    summary: dict[str, Any]

    @property
    def report_path(self) -> Path:
        return Path(self.summary["report_uri"])


def run_with_report(tmp_path: Path, dag_id: str = "acid_report") -> ReportRun:
    """dag.test() of the snapshot chain; the predicate picks one id of the second partition
    and one of the third (so bucket pruning and statistics both prune), and no partition
    before the second (pruned on its values)."""
    from airflow.sdk import DAG

    writer = generate_demo_table(
        str(tmp_path / "sales"), rows_per_bucket=200, partitions=4, buckets=BUCKETS, seed=5
    )
    rows = writer.expected_rows()
    days = sorted(set(rows.column("dt").to_pylist()))
    ids = [
        pc.min(rows.filter(pc.equal(rows.column("dt"), day)).column("id")).as_py()
        for day in days[1:3]
    ]
    where = f"dt >= '{days[1]}' AND id IN ({ids[0]}, {ids[1]})"
    out = tmp_path / "out"
    with DAG(dag_id=dag_id, schedule=None) as dag:
        tasks = acid_snapshot_tasks(
            table_uri=writer.path,
            output_uri=str(out),
            where=where,
            valid_write_ids=writer.valid_write_ids(),
            manifest_kwargs={"bucketing": {"columns": ["id"], "buckets": BUCKETS}},
        )
    (tmp_path / "dags").mkdir()
    run = register(dag, tmp_path / "dags").test()
    assert run.state == "success"
    summary = xcom(run, tasks.manifest.task_id)
    return ReportRun(run, writer, out, where, summary)


@pytest.fixture(scope="module")
def report_run(airflow_db, tmp_path_factory) -> ReportRun:
    return run_with_report(tmp_path_factory.mktemp("report"))


def test_the_report_lies_next_to_the_manifest_and_adds_up_to_its_metrics(report_run):
    summary = report_run.summary
    manifest = read_manifest(summary["manifest_uri"])
    assert summary["report_uri"] == report_uri_for(summary["manifest_uri"])
    assert report_run.report_path.parent == Path(summary["manifest_uri"]).parent
    run = report_run.run
    stored = task_xcom(run.dag_id, run.run_id, "manifest", -1, REPORT_XCOM_KEY)
    assert stored == summary["report_uri"]

    report = read_report(summary["report_uri"])
    assert report.complete and report.predicate == manifest.predicate
    assert report.slices == build_report(manifest).slices  # the manifest's verdicts, as written
    m = manifest.metrics
    assert dict(report.metrics) == m.to_dict()
    parts = report.partitions()
    assert sum(p.data_files for p in parts) == m.files_total
    assert sum(p.candidates for p in parts) == m.files_candidate
    assert sum(p.size for p in parts) == m.bytes_total
    assert sum(p.bytes_kept for p in parts) == m.bytes_kept
    assert sum(p.slices for p in parts) == m.slices_total
    assert sum(p.slices_kept for p in parts) == m.slices_kept == len(manifest.slices)
    assert {(s.partition, s.bucket) for s in report.slices if s.kept} == {
        (s.partition, s.bucket) for s in manifest.slices
    }
    # the first day is ruled out on its value: before listing, or listed and pruned whole
    terms = {to_sql(t) for t in conjuncts(parse_predicate(report.predicate))}
    (dt_term,) = [t for t in terms if t.startswith("dt ")]
    by_value = [
        p
        for p in parts
        if all(s.step == "partition" for s in report.slices if s.partition == p.partition)
    ]
    assert (m.partitions_total - len(parts)) + len(by_value) == 1
    assert {s.reason for s in report.slices if s.step == "partition"} <= {dt_term}
    for p in parts:
        expected = 1 - p.candidates / p.data_files
        assert p.skipping_ratio == pytest.approx(expected)


def test_each_pruned_slice_names_the_term_that_ruled_it_out(report_run):
    report = read_report(report_run.summary["report_uri"])
    terms = {to_sql(t) for t in conjuncts(parse_predicate(report.predicate))}
    steps = defaultdict(list)
    for s in report.slices:
        steps[s.step].append(s)
        if s.kept:
            assert s.reason == "" and s.files_kept == s.data_files
        else:
            assert s.files_kept == 0 and s.bytes_kept == 0
    # Hive's hash puts the two ids in at most two buckets: the others of each listed
    # partition are pruned by bucket; of the rest, the partitions without those ids by
    # their id statistics (the IN term)
    assert steps["bucket"] and steps["statistics"] and steps["kept"]
    in_term = next(t for t in terms if " IN " in t)
    assert {s.reason for s in steps["statistics"]} == {in_term}
    assert all(s.reason.startswith(report.predicate) for s in steps["bucket"])
    allowed = {s.bucket for s in steps["kept"]} | {s.bucket for s in steps["statistics"]}
    assert allowed and allowed.isdisjoint({s.bucket for s in steps["bucket"]})
    # and truly: no live row of a statistics-pruned slice's partition has those ids
    rows = report_run.writer.expected_rows()
    ids = predicate_ids(report.predicate)
    for s in steps["statistics"]:
        day = s.partition.split("=", 1)[1]
        in_day = rows.filter(pc.equal(rows.column("dt"), day)).column("id").to_pylist()
        kept_days = {k.partition for k in steps["kept"]}
        if s.partition not in kept_days:
            assert not ids & set(in_day)


def test_the_commit_adds_rows_read_deleted_and_written_per_partition(report_run):
    report = read_report(report_run.summary["report_uri"])
    snapshot = latest_snapshot(str(report_run.out))
    assert report.snapshot_id == snapshot.snapshot_id
    sums: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for b in snapshot.buckets:
        for i, n in enumerate((b.rows_read, b.rows_deleted, b.rows_filtered, b.rows_written)):
            sums[b.partition][i] += n
    got = {
        r.partition: [r.rows_read, r.rows_deleted, r.rows_filtered, r.rows_written]
        for r in report.rows
    }
    assert got == dict(sums)
    assert sum(r.rows_written for r in report.rows) == snapshot.rows_written
    # what was written is what a correct reader returns for the predicate
    rows = report_run.writer.expected_rows(report_run.writer.valid_write_ids())
    ids = predicate_ids(report.predicate)
    matching = [i for i in rows.column("id").to_pylist() if i in ids]
    assert snapshot.rows_written == len(matching) > 0


def test_the_extra_link_points_at_the_report_served_by_the_api_server(report_run):
    run = report_run.run
    link = task_xcom(run.dag_id, run.run_id, "manifest", -1, "_link_AcidPruningReportLink")
    assert link.endswith(report_path(run.dag_id, run.run_id, "manifest"))

    from fastapi.testclient import TestClient

    from airflow_provider_acid.plugins.reports import (
        AcidReportsPlugin,
        create_app,
        read_report_page,
    )

    (app_spec,) = AcidReportsPlugin.fastapi_apps
    assert app_spec["url_prefix"] == "/acid/reports"
    page = read_report_page(run.dag_id, run.run_id, "manifest")
    assert page == report_run.report_path.read_text()
    # the API server's own auth: refused without a valid token, served with one
    from airflow.api_fastapi.app import create_auth_manager
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser

    auth = create_auth_manager()
    auth.init()
    token = auth.generate_jwt(SimpleAuthManagerUser(username="admin", role="admin"))
    client = TestClient(create_app())
    path = report_path(run.dag_id, run.run_id, "manifest").removeprefix("/acid/reports")
    assert client.get(path).status_code == 401
    assert client.get(path, headers={"Authorization": "Bearer forged"}).status_code == 403
    served = client.get(path, headers={"Authorization": f"Bearer {token}"})
    assert served.status_code == 200 and served.text == page
    assert "script-src" not in served.headers["content-security-policy"]
    assert served.headers["content-security-policy"].startswith("default-src 'none'")
    elsewhere = client.get(
        path.replace("/manifest", "/plan"), headers={"Authorization": f"Bearer {token}"}
    )
    assert elsewhere.status_code == 404  # only what a task recorded is served
    # a small HTML page naming the task, not FastAPI's JSON
    assert elsewhere.headers["content-type"].startswith("text/html")
    assert "No pruning report" in elsewhere.text and "task plan of DAG" in elsewhere.text
    assert len(elsewhere.content) < 2_000


def test_a_failed_commit_shows_as_failed(airflow_db, tmp_path):
    """The compacted files vanish before the commit: the commit fails, and the report says
    so, with the commit's error, instead of "not yet committed"; a report whose commit never
    ran is served, once its run failed, as failed before its commit."""
    from dataclasses import replace

    from airflow.sdk import DAG, task

    from airflow_provider_acid.plugins.reports import read_report_page
    from airflow_provider_acid.pruning.report import write_report

    writer = generate_demo_table(str(tmp_path / "sales"), rows_per_bucket=100, seed=2)
    out = tmp_path / "out"
    with DAG(dag_id="acid_report_failed_commit", schedule=None) as dag:
        tasks = acid_snapshot_tasks(table_uri=writer.path, output_uri=str(out))

        @task
        def lose_the_files() -> None:
            for part in out.rglob("*.parquet"):
                if not any(p.startswith("_") for p in part.relative_to(out).parts):
                    part.unlink()

        tasks.compact >> lose_the_files() >> tasks.commit
    (tmp_path / "dags").mkdir()
    run = register(dag, tmp_path / "dags").test()
    assert run.state == "failed"
    report_uri = xcom(run, "manifest")["report_uri"]
    report = read_report(report_uri)
    assert report.rows is None and report.snapshot_id is None
    assert report.commit_error.startswith("CommitError: ") and ".parquet" in report.commit_error
    page = Path(report_uri).read_text()
    assert 'id="commit-failed"' in page and 'id="commit-pending"' not in page
    assert read_report_page(run.dag_id, run.run_id, "manifest") == page

    write_report(replace(report, commit_error=None), report_uri)  # as if the commit never ran
    assert 'id="commit-pending"' in Path(report_uri).read_text()
    served = read_report_page(run.dag_id, run.run_id, "manifest")
    assert 'id="commit-failed"' in served and 'id="commit-pending"' not in served
    assert f"the run {run.run_id} failed before its commit (failed tasks: commit)" in served
