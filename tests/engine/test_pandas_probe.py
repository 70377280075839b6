"""A worker started by the CLI leaves pandas unimported: pyarrow would import it (43 MiB) at its
first conversion. Each case runs in a fresh process: this one imported pandas long ago."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_provider_acid.testing.table_writer import AcidTableWriter

pytest.importorskip("pandas")  # what is left unimported must be installed


def _table(tmp_path: Path) -> str:
    t = AcidTableWriter(
        str(tmp_path / "t"),
        [("id", "bigint"), ("at", "timestamp"), ("name", "string")],
        buckets=2,
        bucket_by="id",
    )
    t.insert([{"id": i, "at": (1_700_000_000 + i) * 10**9, "name": f"n{i}"} for i in range(10)])
    t.delete(lambda r: r["id"] == 3)
    return t.root


def _run(code: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def _compact(tmp_path: Path, module: str, call: str) -> dict:
    """Compact a small table by ``call`` (``{table}``, ``{out}``) of what ``module`` names, in a
    fresh process: what it returned, and whether pandas got imported."""
    table, out = _table(tmp_path), str(tmp_path / "out")
    return _run(
        f"import json, sys, {module}\n"
        f"done = {module}.{call.format(table=repr(table), out=repr(out))}\n"
        "print(json.dumps({'done': done, 'pandas': 'pandas' in sys.modules}))\n"
    )


def test_the_cli_compacts_without_importing_pandas(tmp_path):
    call = "main(['compact', {table}, '--out', {out}])"
    assert _compact(tmp_path, "airflow_provider_acid.cli", call) == {"done": 0, "pandas": False}


def test_the_library_alone_imports_pandas_at_its_first_conversion(tmp_path):
    """What the CLI avoids: the same compaction, called as a library, imports pandas. (If a
    pyarrow release stops importing pandas at its first conversion, this fails: then
    :mod:`.pandas_probe` has nothing left to do.)"""
    call = "compact_table({table}, {out}).rows_written"
    module = "airflow_provider_acid.engine.compaction"
    assert _compact(tmp_path, module, call) == {"done": 9, "pandas": True}


def test_pandas_still_comes_when_it_is_really_used():
    seen = _run(
        "import json, sys\n"
        "from airflow_provider_acid.engine.pandas_probe import keep_pandas_unimported\n"
        "left = keep_pandas_unimported()\n"
        "import pyarrow as pa, pyarrow.compute as pc\n"
        "total = pc.add(pa.array([1, 2]), 3).to_pylist()\n"
        "before = 'pandas' in sys.modules\n"
        "frame = pa.table({'a': [1, 2]}).to_pandas()\n"
        "print(json.dumps({'left': left, 'total': total, 'before': before,\n"
        "                  'frame': type(frame).__name__, 'rows': len(frame),\n"
        "                  'again': keep_pandas_unimported()}))\n"
    )
    assert seen == {
        "left": True,
        "total": [4, 5],
        "before": False,
        "frame": "DataFrame",
        "rows": 2,
        "again": False,
    }
