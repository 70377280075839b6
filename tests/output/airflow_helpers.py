"""What the sinks' Airflow tests share: a DAG registered for ``dag.test()``, a task's XCom and
an asset's events (the ``airflow_db`` fixture is in tests/conftest.py)."""

from __future__ import annotations

import json
from pathlib import Path


def register(dag, tmp_path: Path):
    """dag.test() runs DAGs its bundle knows: store this one as the dags-folder bundle's."""
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.dag_processing.dagbag import DagBag, sync_bag_to_db

    DagBundlesManager().sync_bundles_to_db()
    folder = tmp_path / f"no-dags-{dag.dag_id}"
    folder.mkdir()
    bag = DagBag(dag_folder=str(folder))
    bag.bag_dag(dag)
    sync_bag_to_db(bag, "dags-folder", None)
    return dag


def task_xcom(run, task_id: str) -> dict:
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        row = (
            session.query(XComModel)
            .filter_by(dag_id=run.dag_id, run_id=run.run_id, task_id=task_id, key="return_value")
            .first()
        )
        return json.loads(row.value) if isinstance(row.value, str) else row.value


def asset_events(uri: str) -> list[dict]:
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session

    with create_session() as session:
        rows = (
            session.query(AssetEvent)
            .join(AssetModel, AssetEvent.asset_id == AssetModel.id)
            .filter(AssetModel.uri == uri)
            .order_by(AssetEvent.id)
            .all()
        )
        return [dict(r.extra or {}) for r in rows]
