"""The checksums that let a damaged plan or slice manifest be told from a good one: a file
written reads back as it was, one without a checksum (written before they existed) still
reads, and one whose content changed is refused naming it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hive_fixtures import arrange_fixture_table

from airflow_provider_acid.acid.listing import resolve_filesystem
from airflow_provider_acid.engine.plan import plan_snapshot
from airflow_provider_acid.output import CommitError
from airflow_provider_acid.output.protocol import read_plan
from airflow_provider_acid.pruning.manifest import compute_manifest
from airflow_provider_acid.pruning.manifest_files import (
    SliceManifestError,
    read_manifest,
    write_manifest,
)


@pytest.fixture
def nation(tmp_path) -> Path:
    return arrange_fixture_table("nation", tmp_path / "nation")


@pytest.mark.parametrize("form", ["json", "jsonl", "parquet"])
def test_a_slice_manifest_reads_back_as_written(form, nation, tmp_path):
    manifest = compute_manifest(str(nation), "n_nationkey <= 7")
    path = write_manifest(manifest, str(tmp_path / f"m.{form}"))
    assert read_manifest(path).to_dict() == manifest.to_dict()


def test_a_slice_manifest_without_checksum_reads_and_a_changed_one_is_refused(nation, tmp_path):
    manifest = compute_manifest(str(nation), "n_nationkey <= 7")
    path = tmp_path / "m.json"
    write_manifest(manifest, str(path))
    data = json.loads(path.read_text())
    assert data.pop("checksum").startswith("sha256:")
    path.write_text(json.dumps(data))
    assert read_manifest(str(path)).to_dict() == manifest.to_dict()  # written before checksums

    write_manifest(manifest, str(path))
    path.write_text(path.read_text().replace('"n_nationkey <= 7"', '"n_nationkey <= 8"'))
    with pytest.raises(SliceManifestError, match=r"m\.json.*checksum"):
        read_manifest(str(path))


def test_a_plan_without_checksum_reads_and_a_changed_one_is_refused(nation, tmp_path):
    out = tmp_path / "out"
    plan = plan_snapshot(str(nation), str(out))
    fs, root = resolve_filesystem(str(out))
    path = out / "_snapshots" / plan.snapshot_id / "plan.json"
    data = json.loads(path.read_text())
    assert read_plan(fs, root, plan.snapshot_id) == plan

    path.write_text(json.dumps({k: v for k, v in data.items() if k != "checksum"}))
    assert read_plan(fs, root, plan.snapshot_id) == plan

    data["settings"]["row_group_rows"] += 1
    path.write_text(json.dumps(data))
    with pytest.raises(CommitError, match=r"plan\.json: damaged plan.*checksum"):
        read_plan(fs, root, plan.snapshot_id)
