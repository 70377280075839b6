"""The Arrow memory pool of a worker: jemalloc once the CLI or an operator that reads rows runs,
unless ``ARROW_DEFAULT_MEMORY_POOL`` chose one."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from airflow_provider_acid.engine.memory_pool import POOL_VARIABLE, use_worker_memory_pool
from airflow_provider_acid.testing.table_writer import AcidTableWriter


def _has_jemalloc() -> bool:
    try:
        pa.jemalloc_memory_pool()
    except NotImplementedError:
        return False
    return True


needs_jemalloc = pytest.mark.skipif(not _has_jemalloc(), reason="pyarrow built without jemalloc")


@pytest.fixture
def mimalloc_default(monkeypatch):
    """pyarrow's own default (mimalloc) as the process's pool; restored afterwards."""
    monkeypatch.delenv(POOL_VARIABLE, raising=False)
    before = pa.default_memory_pool()
    pa.set_memory_pool(pa.mimalloc_memory_pool())
    yield
    pa.set_memory_pool(before)


def _table(tmp_path: Path) -> AcidTableWriter:
    t = AcidTableWriter(str(tmp_path / "t"), [("id", "bigint")], buckets=2, bucket_by="id")
    t.insert([{"id": i} for i in range(10)])
    t.delete(lambda r: r["id"] == 3)
    return t


@needs_jemalloc
def test_a_worker_allocates_from_jemalloc(mimalloc_default):
    assert use_worker_memory_pool() == "jemalloc"
    assert pa.default_memory_pool().backend_name == "jemalloc"
    jemalloc = pa.jemalloc_memory_pool()
    before = jemalloc.bytes_allocated()
    values = pa.array(range(1_000_000), pa.int64())  # 8 MB, from the default pool
    assert jemalloc.bytes_allocated() - before >= 8_000_000
    del values


def test_a_pool_chosen_by_whoever_runs_the_process_is_kept(mimalloc_default, monkeypatch):
    monkeypatch.setenv(POOL_VARIABLE, "mimalloc")
    assert use_worker_memory_pool() == "mimalloc"
    assert pa.default_memory_pool().backend_name == "mimalloc"


@needs_jemalloc
def test_the_cli_compacts_with_jemalloc(mimalloc_default, tmp_path, capsys):
    from airflow_provider_acid.cli import main

    assert main(["compact", _table(tmp_path).root, "--out", str(tmp_path / "out")]) == 0
    assert "9 written" in capsys.readouterr().out
    assert pa.default_memory_pool().backend_name == "jemalloc"


@needs_jemalloc
def test_the_compact_and_changes_operators_switch_their_process_to_jemalloc(
    mimalloc_default, tmp_path
):
    pytest.importorskip("airflow")
    from airflow_provider_acid.engine.change_runs import plan_feed
    from airflow_provider_acid.operators.acid import AcidCompactOperator
    from airflow_provider_acid.operators.change_feed import AcidChangesOperator

    t = _table(tmp_path)
    done = AcidCompactOperator(
        task_id="compact", table_uri=t.root, output_uri=str(tmp_path / "out")
    ).execute({})
    assert done["rows_written"] == 9
    assert pa.default_memory_pool().backend_name == "jemalloc"

    pa.set_memory_pool(pa.mimalloc_memory_pool())
    feed_out = str(tmp_path / "feed")
    plan = plan_feed(t.root, feed_out, from_write_id=0)
    result = AcidChangesOperator(
        task_id="changes", output_uri=feed_out, feed_id=plan.snapshot_id,
        slice_key=plan.keys_to_compute[0],
    ).execute({})  # fmt: skip
    assert result["rows_written"] > 0
    assert pa.default_memory_pool().backend_name == "jemalloc"
