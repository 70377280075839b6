"""Old import paths the README showed keep working for one release, with a DeprecationWarning,
and give the very objects of the new paths (docs/layout.md)."""

from __future__ import annotations

import importlib
import sys

import pytest

from airflow_provider_acid.acid import read_view, resolution
from airflow_provider_acid.engine import compaction, plan


def _fresh(name: str):
    sys.modules.pop(name, None)
    with pytest.warns(DeprecationWarning, match=name.replace(".", r"\.")):
        return importlib.import_module(name)


def test_acid_snapshot() -> None:
    old = _fresh("airflow_provider_acid.acid.snapshot")
    assert old.resolve_snapshot is resolution.resolve_read_view
    assert old.TableSnapshot is read_view.TableReadView
    assert old.PartitionSnapshot is read_view.PartitionReadView
    assert old.check_placed is resolution.check_placed


def test_acid_compaction() -> None:
    old = _fresh("airflow_provider_acid.acid.compaction")
    assert old.compact_table is compaction.compact_table
    assert old.CompactionOptions is compaction.CompactionOptions
    assert old.plan_snapshot is plan.plan_snapshot
    assert set(compaction.__all__) <= set(old.__all__)


@pytest.mark.parametrize(
    ("old", "new"), [("TableSnapshot", "TableReadView"), ("PartitionSnapshot", "PartitionReadView")]
)
def test_read_view_names(old: str, new: str) -> None:
    with pytest.warns(DeprecationWarning, match=f"{old} is deprecated: use {new}"):
        assert getattr(read_view, old) is getattr(read_view, new)
    with pytest.raises(AttributeError):
        read_view.NoSuchName  # noqa: B018
