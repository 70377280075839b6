"""The example DAG files as the dag-processor sees them: every file defines its DAG, a half
configuration is an import error naming the variables, and the assets are the same whatever
the environment of the process that parses them."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

DAGS = Path(__file__).resolve().parents[2] / "dags"
FILES = sorted(p.stem for p in DAGS.glob("*.py"))
WATCH = ("ACID_WATCH_TABLE_URI", "ACID_WATCH_TABLE", "ACID_WATCH_OUTPUT_URI")


def parse(name: str, monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> Any:
    """The module of dags/NAME.py, imported afresh under ``env`` (a new module each time, as
    each parse of the dag-processor is)."""
    for key in (*WATCH, "ACID_OUTPUT_URI", "ACID_TABLE_URI", "ACID_TABLE"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    spec = importlib.util.spec_from_file_location(f"_parsed_{name}", DAGS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def assets(dag: Any) -> dict[str, str]:
    """Every asset the DAG declares (schedule and outlets): name -> URI."""
    from airflow.sdk import Asset

    found = {}
    for task in dag.tasks:
        for outlet in getattr(task, "outlets", None) or []:
            if isinstance(outlet, Asset):
                found[outlet.name] = outlet.uri
    schedule = dag.schedule if isinstance(dag.schedule, (list, tuple)) else []
    for asset in schedule:
        found[asset.name] = asset.uri
    return found


@pytest.mark.parametrize("name", FILES)
def test_every_file_defines_its_dag_with_nothing_set(name, monkeypatch):
    module = parse(name, monkeypatch, {})
    assert module.dag.dag_id == name


def test_the_unconfigured_watcher_dag_says_what_to_set(monkeypatch):
    dag = parse("acid_snapshot_on_change", monkeypatch, {}).dag
    assert dag.schedule is None  # scheduled on nothing: the triggerer watches nothing
    for variable in WATCH:
        assert variable in dag.doc_md
    assert [t.task_id for t in dag.tasks] == ["not_configured"]


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"ACID_WATCH_TABLE_URI": "/data/t"}, ["ACID_WATCH_OUTPUT_URI"]),
        ({"ACID_WATCH_TABLE": "db.t"}, ["ACID_WATCH_OUTPUT_URI"]),
        ({"ACID_WATCH_OUTPUT_URI": "/out"}, ["ACID_WATCH_TABLE_URI", "ACID_WATCH_TABLE"]),
        (
            {
                "ACID_WATCH_TABLE_URI": "/t",
                "ACID_WATCH_TABLE": "db.t",
                "ACID_WATCH_OUTPUT_URI": "/o",
            },
            ["ACID_WATCH_TABLE_URI", "ACID_WATCH_TABLE"],
        ),
    ],
)
def test_half_a_watcher_configuration_is_an_import_error_naming_it(env, named, monkeypatch):
    with pytest.raises(ImportError) as raised:
        parse("acid_snapshot_on_change", monkeypatch, env)
    message = str(raised.value)
    assert "\n" not in message
    for variable in named:
        assert variable in message


def test_the_configured_watcher_dag_watches_the_table(monkeypatch, tmp_path):
    env = {"ACID_WATCH_TABLE_URI": str(tmp_path / "t"), "ACID_WATCH_OUTPUT_URI": str(tmp_path)}
    dag = parse("acid_snapshot_on_change", monkeypatch, env).dag
    (name,) = assets(dag)
    assert name.startswith("acid_changes_") and name.endswith("_t")


@pytest.mark.parametrize("name", FILES)
def test_assets_are_the_same_whatever_the_environment(name, monkeypatch, tmp_path):
    """Two processes parsing a file with different settings (the dag-processor's and a
    worker's) must declare an asset of a name with the same URI, or Airflow marks one of them
    inactive and the commit's asset event fails."""
    first = {
        "ACID_OUTPUT_URI": str(tmp_path / "a"),
        "ACID_TABLE_URI": str(tmp_path / "t"),
        "ACID_WATCH_TABLE_URI": str(tmp_path / "t"),
        "ACID_WATCH_OUTPUT_URI": str(tmp_path / "a"),
    }
    second = {
        **first,
        "ACID_OUTPUT_URI": "s3://bucket/elsewhere",
        "ACID_WATCH_OUTPUT_URI": "s3://bucket/elsewhere",
    }
    one = assets(parse(name, monkeypatch, first).dag)
    other = assets(parse(name, monkeypatch, second).dag)
    assert one == other
    nothing_set = assets(parse(name, monkeypatch, {}).dag)
    for asset, uri in nothing_set.items():
        assert one.get(asset, uri) == uri


def test_the_materialisation_asset_is_fixed(monkeypatch, tmp_path):
    dag = parse(
        "acid_snapshot_materialisation", monkeypatch, {"ACID_OUTPUT_URI": str(tmp_path)}
    ).dag
    assert assets(dag) == {
        "acid_demo_snapshot": "acid-snapshot://acid_snapshot_materialisation/snapshots"
    }
