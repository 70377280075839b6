"""Every parameter of every public hook, operator, sensor and trigger has a ``:param name:``
line in its docstring, and the templated fields are listed (``Templated fields:``)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from typing import Any

import pytest

LAYERS = ("hooks", "operators", "sensors", "triggers")
PARAM = re.compile(r"^\s*:param\s+(?:[\w\[\], |.]+\s+)?(\w+):", re.MULTILINE)
TEMPLATED = re.compile(r"^\s*Templated fields:(.*?)(?:\n\s*\n|\Z)", re.MULTILINE | re.DOTALL)


def _public_callables() -> list[tuple[str, Any]]:
    """The public hooks, operators, sensors and triggers with an ``__init__`` of their own,
    each defined in a module of the Airflow layer, and the task factories."""
    from airflow.sdk import BaseHook, BaseOperator
    from airflow.triggers.base import BaseTrigger

    from airflow_provider_acid.operators.snapshot_tasks import acid_snapshot_tasks

    found: list[tuple[str, Any]] = [
        ("operators.snapshot_tasks.acid_snapshot_tasks", acid_snapshot_tasks)
    ]
    for layer in LAYERS:
        package = importlib.import_module(f"airflow_provider_acid.{layer}")
        for info in pkgutil.iter_modules(package.__path__):
            if info.name.startswith("_"):
                continue
            module = importlib.import_module(f"{package.__name__}.{info.name}")
            for name, value in vars(module).items():
                if name.startswith("_") or getattr(value, "__module__", None) != module.__name__:
                    continue
                if (
                    inspect.isclass(value)
                    and issubclass(value, (BaseHook, BaseOperator, BaseTrigger))
                    and "__init__" in vars(value)
                ):
                    found.append((f"{module.__name__}.{name}", value))
    return found


def _parameters(target: Any) -> list[str]:
    function = target.__init__ if inspect.isclass(target) else target
    return [
        p.name
        for p in inspect.signature(function).parameters.values()
        if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]


def _docstring(target: Any) -> str:
    parts = [inspect.getdoc(target) or ""]
    if inspect.isclass(target):
        parts.append(inspect.getdoc(vars(target)["__init__"]) or "")
    return "\n".join(parts)


PUBLIC = _public_callables()


def test_the_walk_finds_every_kind() -> None:
    names = {name.rsplit(".", 1)[1] for name, _ in PUBLIC}
    for expected in (
        "AcidHook",
        "AcidMetastoreHook",
        "AcidSliceManifestOperator",
        "AcidCompactOperator",
        "AcidDeltaSensor",
        "AcidMetastoreWriteSensor",
        "AcidDeltaTrigger",
        "AcidMetastoreWriteEventTrigger",
        "acid_snapshot_tasks",
    ):
        assert expected in names


@pytest.mark.parametrize(("name", "target"), PUBLIC, ids=[n for n, _ in PUBLIC])
def test_every_parameter_is_documented(name: str, target: Any) -> None:
    documented = set(PARAM.findall(_docstring(target)))
    missing = [p for p in _parameters(target) if p not in documented]
    assert not missing, f"{name}: no ':param NAME:' line for {', '.join(missing)}"
    unknown = sorted(documented - set(_parameters(target)))
    assert not unknown, f"{name}: ':param' lines for no parameter: {', '.join(unknown)}"


@pytest.mark.parametrize(
    ("name", "target"),
    [(n, t) for n, t in PUBLIC if getattr(t, "template_fields", ())],
    ids=[n for n, t in PUBLIC if getattr(t, "template_fields", ())],
)
def test_templated_fields_are_listed(name: str, target: Any) -> None:
    listed = TEMPLATED.search(_docstring(target))
    assert listed, f"{name}: no 'Templated fields:' line"
    names = set(re.findall(r"``(\w+)``", listed.group(1)))
    missing = [f for f in target.template_fields if f not in names]
    assert not missing, f"{name}: templated but not listed: {', '.join(missing)}"
    extra = sorted(names - set(target.template_fields))
    assert not extra, f"{name}: listed as templated but not: {', '.join(extra)}"
