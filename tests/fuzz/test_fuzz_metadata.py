"""Byte-level mutations of the provider's own metadata: a snapshot's ``plan.json`` and
``manifest.json``, a slice manifest (JSON, JSON lines and Parquet), the column-stats index's
pointer and Parquet files.

Each mutated file is then used as the provider uses it. It must be read correctly (the
snapshot committed or returned holds exactly the rows of an unmutated run) or refused with
one of the provider's errors naming the file; never another exception, never a hang, never a
committed snapshot with other rows.
"""

from __future__ import annotations

import shutil
import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pyarrow.dataset as ds
import pytest
from hive_fixtures import arrange_fixture_table
from hypothesis import given
from hypothesis import strategies as st
from mutations import Mutation, fuzz_settings, mutate_file, mutations

from airflow_provider_acid.acid.rows import AcidFormatError
from airflow_provider_acid.engine.compaction import compact_table
from airflow_provider_acid.engine.manifest_compaction import compact_manifest, compact_planned_slice
from airflow_provider_acid.engine.plan import plan_snapshot
from airflow_provider_acid.output import CommitError, commit_snapshot, latest_snapshot
from airflow_provider_acid.pruning.index import IndexFormatError
from airflow_provider_acid.pruning.manifest import compute_manifest
from airflow_provider_acid.pruning.manifest_files import SliceManifestError, write_manifest

CLEAR_ERRORS = (CommitError, SliceManifestError, IndexFormatError, AcidFormatError)
WHERE = "n_nationkey <= 7"


def rows_of(out: Path) -> list[tuple]:
    table = ds.dataset(str(out), format="parquet").to_table()
    return sorted((tuple(r.values()) for r in table.to_pylist()), key=repr)


def snapshot_rows(result) -> list[tuple]:
    """The rows a committed snapshot's manifest lists (its files, read by path)."""
    paths = [str(Path(result.out) / f.path) for f in result.files]
    table = ds.dataset(paths, format="parquet").to_table() if paths else None
    if table is None:
        return []
    return sorted((tuple(r.values()) for r in table.to_pylist()), key=repr)


@pytest.fixture(scope="module")
def nation(tmp_path_factory) -> Path:
    return arrange_fixture_table("nation", tmp_path_factory.mktemp("fuzz-meta") / "nation")


@pytest.fixture(scope="module")
def reference(nation, tmp_path_factory) -> dict[str, list[tuple]]:
    """Rows of fault-free runs: the whole table, and the manifest of ``WHERE``."""
    base = tmp_path_factory.mktemp("fuzz-reference")
    compact_table(str(nation), str(base / "all"))
    compact_manifest(compute_manifest(str(nation), WHERE), str(base / "where"))
    return {"all": rows_of(base / "all"), "where": rows_of(base / "where")}


class Fuzz:
    """Runs one mutated-file scenario per example in a fresh folder and tallies outcomes."""

    def __init__(self, root: Path, what: str) -> None:
        self.root, self.what = root, what
        self.outcomes: Counter = Counter()

    def refused(self, exc: BaseException, named: str, mutation: Mutation) -> None:
        message = str(exc)
        assert isinstance(exc, CLEAR_ERRORS), (mutation, repr(exc))
        assert named in message, (mutation, message)
        self.outcomes[f"refused ({type(exc).__name__})"] += 1

    def exact(self) -> None:
        self.outcomes["read exactly"] += 1

    def report(self) -> None:
        total = sum(self.outcomes.values())
        print(f"\n[fuzz] {self.what}: {total} examples, {dict(self.outcomes)}")
        assert total >= 10

    def workdir(self) -> Path:
        return Path(tempfile.mkdtemp(dir=self.root))


def file_mutations(path: Path) -> st.SearchStrategy[Mutation]:
    return mutations(path.read_bytes())


# -- plan.json and manifest.json -----------------------------------------------------------------


def test_a_mutated_plan_commits_the_exact_rows_or_is_refused(nation, reference, tmp_path):
    fuzz = Fuzz(tmp_path, "plan.json")
    out, pristine = tmp_path / "out", tmp_path / "pristine"
    plan = plan_snapshot(str(nation), str(out))  # the plan names its folder: kept in place
    shutil.copytree(out, pristine)
    plan_file = out / "_snapshots" / plan.snapshot_id / "plan.json"

    @fuzz_settings
    @given(file_mutations(plan_file))
    def run(mutation: Mutation) -> None:
        work = fuzz.workdir()
        try:
            shutil.rmtree(out)
            shutil.copytree(pristine, out)
            mutate_file(plan_file, mutation)
            try:
                results = [
                    compact_planned_slice(str(out), plan.snapshot_id, key)
                    for key in plan.keys_to_compute
                ]
                committed = commit_snapshot(str(out), plan.snapshot_id, results)
            except Exception as exc:  # noqa: BLE001 - checked to be a clear error
                fuzz.refused(exc, "plan.json", mutation)
                assert latest_snapshot(str(out)) is None
                return
            assert snapshot_rows(committed) == reference["all"], mutation
            assert rows_of(out) == reference["all"], mutation
            fuzz.exact()
        finally:
            shutil.rmtree(work, ignore_errors=True)

    run()
    fuzz.report()


def test_a_mutated_snapshot_manifest_reads_exactly_or_is_refused(nation, reference, tmp_path):
    fuzz = Fuzz(tmp_path, "manifest.json")
    out, pristine = tmp_path / "out", tmp_path / "pristine"
    committed = compact_table(str(nation), str(out))
    shutil.copytree(out, pristine)
    manifest = out / "_snapshots" / committed.snapshot_id / "manifest.json"

    @fuzz_settings
    @given(file_mutations(manifest))
    def run(mutation: Mutation) -> None:
        work = fuzz.workdir()
        try:
            shutil.rmtree(out)
            shutil.copytree(pristine, out)
            mutate_file(manifest, mutation)
            try:
                latest = latest_snapshot(str(out))
                again = compact_table(str(nation), str(out))
            except Exception as exc:  # noqa: BLE001 - checked to be a clear error
                fuzz.refused(exc, "manifest.json", mutation)
                return
            for result in (latest, again):
                assert result is not None, mutation
                assert result.snapshot_id == committed.snapshot_id
                assert result.files == committed.files, mutation
                assert result.totals() == committed.totals(), mutation
                assert snapshot_rows(result) == reference["all"], mutation
            fuzz.exact()
        finally:
            shutil.rmtree(work, ignore_errors=True)

    run()
    fuzz.report()


# -- slice manifests -------------------------------------------------------------------------


@pytest.mark.parametrize("form", ["json", "jsonl", "parquet"])
def test_a_mutated_slice_manifest_compacts_exactly_or_is_refused(form, nation, reference, tmp_path):
    fuzz = Fuzz(tmp_path, f"slice manifest (.{form})")
    pristine = tmp_path / f"run.{form}"
    write_manifest(compute_manifest(str(nation), WHERE), str(pristine))

    @fuzz_settings
    @given(file_mutations(pristine))
    def run(mutation: Mutation) -> None:
        work = fuzz.workdir()
        try:
            path = work / pristine.name
            shutil.copy(pristine, path)
            mutate_file(path, mutation)
            try:
                result = compact_manifest(str(path), str(work / "out"))
            except Exception as exc:  # noqa: BLE001 - checked to be a clear error
                fuzz.refused(exc, pristine.name, mutation)
                assert latest_snapshot(str(work / "out")) is None
                return
            assert snapshot_rows(result) == reference["where"], mutation
            fuzz.exact()
        finally:
            shutil.rmtree(work, ignore_errors=True)

    run()
    fuzz.report()


# -- the column-stats index ------------------------------------------------------------------


@pytest.mark.parametrize("refresh", [False, True], ids=["read", "refresh"])
def test_a_mutated_index_file_prunes_exactly_or_is_refused(refresh, nation, reference, tmp_path):
    fuzz = Fuzz(tmp_path, f"index files ({'refresh' if refresh else 'read'})")
    pristine = tmp_path / "index"
    compute_manifest(str(nation), WHERE, index_uri=str(pristine), refresh=True)
    files = sorted(p.relative_to(pristine).as_posix() for p in pristine.rglob("*") if p.is_file())
    assert any(f.startswith("_pointers/") for f in files)
    assert any(f.endswith(".parquet") for f in files)
    by_name: dict[str, Callable] = {f: file_mutations(pristine / f) for f in files}

    @fuzz_settings
    @given(st.sampled_from(files).flatmap(lambda f: st.tuples(st.just(f), by_name[f])))
    def run(case: tuple[str, Mutation]) -> None:
        relative, mutation = case
        work = fuzz.workdir()
        try:
            index = work / "index"
            shutil.copytree(pristine, index)
            mutate_file(index / relative, mutation)
            try:
                manifest = compute_manifest(
                    str(nation), WHERE, index_uri=str(index), refresh=refresh
                )
                result = compact_manifest(manifest, str(work / "out"))
            except Exception as exc:  # noqa: BLE001 - checked to be a clear error
                fuzz.refused(exc, Path(relative).name, mutation)
                return
            assert snapshot_rows(result) == reference["where"], (relative, mutation)
            fuzz.exact()
        finally:
            shutil.rmtree(work, ignore_errors=True)

    run()
    fuzz.report()
