"""A few trials of `make chaos` (scripts/chaos.py): kill -9 and SIGTERM at random points of a
CLI compaction and of a commit; the folder then holds only valid Parquet files and no or one
complete snapshot, and the re-run commits exactly the expected rows. And the checks catch
what they are for."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from airflow_provider_acid.engine.compaction import compact_table
from airflow_provider_acid.testing import generate_demo_table

REPO = Path(__file__).resolve().parents[2]


def load_chaos():
    spec = importlib.util.spec_from_file_location("chaos_script", REPO / "scripts" / "chaos.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["chaos_script"] = module
    spec.loader.exec_module(module)
    return module


chaos = load_chaos()


def test_a_few_kills_of_the_cli_and_the_commit_leave_the_output_readable_and_re_run_exactly(
    tmp_path,
):
    lines: list[str] = []
    report = chaos.run_chaos(
        4,
        seed=7,
        rows_per_bucket=60_000,
        buckets=2,
        modes=("cli", "commit"),
        work=tmp_path,
        log=lines.append,
    )

    counts = report.counts()
    assert counts["trials"] == 4
    assert counts["by_mode_and_signal"].keys() <= {
        "cli / kill -9",
        "cli / SIGTERM",
        "commit / kill -9",
        "commit / SIGTERM",
    }
    assert counts["invalid_visible_files"] == 0, lines
    assert counts["wrong_commits"] == 0, lines
    assert counts["exact_reruns"] == 4, lines
    assert counts["temporaries_left_after_rerun"] == 0, lines
    assert report.ok


def test_the_checks_catch_a_partial_visible_file_and_a_manifest_listing_a_missing_file(tmp_path):
    writer = generate_demo_table(
        str(tmp_path / "t"), partitions=1, buckets=2, rows_per_bucket=2_000, insert_deltas=0
    )
    expected = chaos.expected_of(writer)
    out = tmp_path / "out"
    result = compact_table(str(tmp_path / "t"), str(out))
    assert chaos.invalid_visible(out) == []
    assert chaos.commit_problems(out, expected) == (1, [])

    first, second = (out / f.path for f in result.files)
    first.write_bytes(first.read_bytes()[:100])  # what a killed writer used to leave
    second.unlink()

    [invalid] = chaos.invalid_visible(out)
    assert str(first) in invalid
    committed, problems = chaos.commit_problems(out, expected)
    assert committed == 1
    assert any("does not exist" in p for p in problems)
    assert any(str(result.files[0].path) in p and "bytes" in p for p in problems)


@pytest.mark.parametrize(
    ("trials", "modes", "expected"),
    [
        (4, ("cli", "commit"), ["cli", "commit", "cli", "commit"]),
        (3, ("cli", "task", "commit"), ["cli", "commit", "task"]),
        (2, ("task",), ["task", "task"]),
    ],
)
def test_the_trial_schedule(trials, modes, expected):
    assert chaos.schedule(trials, modes, 3) == expected
