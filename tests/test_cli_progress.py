"""The CLI on a terminal and in pipes: a progress line only on a terminal and without --quiet,
one error line plus a hint (exit 2), --debug for the traceback, Ctrl-C as exit 130."""

from __future__ import annotations

import errno
import io
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from airflow_provider_acid import cli
from airflow_provider_acid.acid.source import STORAGE_ONLY_WARNING
from airflow_provider_acid.cli_progress import ProgressLine, format_rate, progress_line
from airflow_provider_acid.engine.compaction import compact_table
from airflow_provider_acid.engine.options import CompactionOptions
from airflow_provider_acid.output import BucketResult, CommitError, OutputFile
from airflow_provider_acid.testing.table_writer import AcidTableWriter

REPO = Path(__file__).resolve().parents[1]
BUCKETS = 3


@pytest.fixture(scope="module")
def table(tmp_path_factory) -> str:
    """A small full-ACID table with 3 bucket slices (read-only for the tests)."""
    root = tmp_path_factory.mktemp("cli") / "t"
    writer = AcidTableWriter(
        str(root), [("id", "bigint"), ("name", "string")], buckets=BUCKETS, bucket_by="id"
    )
    writer.insert([{"id": i, "name": f"n{i}"} for i in range(300)])
    writer.delete(lambda r: r["id"] % 10 == 0)
    return writer.root


def run_cli(args: list[str], *, terminal: bool) -> tuple[int, str, str]:
    """Run ``airflow-acid`` in a child process, stderr on a pseudo-terminal or a pipe.

    Returns (exit code, stdout, stderr as the terminal or the pipe received it).
    """
    command = [sys.executable, "-m", "airflow_provider_acid.cli", *args]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    if not terminal:
        done = subprocess.run(
            command, cwd=REPO, env=env, capture_output=True, text=True, timeout=120
        )
        return done.returncode, done.stdout, done.stderr
    master, slave = pty.openpty()
    try:
        process = subprocess.Popen(
            command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=slave, stdin=slave
        )
    finally:
        os.close(slave)
    received = bytearray()
    try:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError as exc:  # EIO: the child closed the terminal's last descriptor
                if exc.errno != errno.EIO:
                    raise
                break
            if not chunk:
                break
            received += chunk
        stdout = process.stdout.read().decode()
        process.wait(timeout=120)
    finally:
        os.close(master)
        process.kill()
        process.stdout.close()
    return process.returncode, stdout, received.decode()


PROGRESS = re.compile(r"buckets (\d+)/(\d+)  rows ([\d,]+)  [\d.]+ (?:[kMG]?B)/s")


def test_a_terminal_sees_the_progress_line_updated_in_place(table, tmp_path):
    code, stdout, stderr = run_cli(
        ["compact", table, "--out", str(tmp_path / "out"), "--workers", "1"], terminal=True
    )

    assert code == 0, stderr
    warning, _, stderr = stderr.partition("\n")  # no write-id list: the storage-only warning
    assert "storage-only" in warning and "write-id" in warning, warning
    warning = warning.removesuffix("\r")  # the terminal's line discipline turns \n into \r\n
    drawn = PROGRESS.findall(stderr)
    assert drawn, repr(stderr)
    assert drawn[-1][:2] == (str(BUCKETS), str(BUCKETS))  # the last bucket is always shown
    assert int(drawn[-1][2].replace(",", "")) == 300  # every row read
    assert stderr.startswith("\r") and stderr.endswith("\n")  # in place, then a final newline
    assert stderr.count("\n") == 1
    assert "committed now" in stdout and "\r" not in stdout  # the summary stays clean
    assert ds.dataset(str(tmp_path / "out"), format="parquet").count_rows() == 270


@pytest.mark.parametrize(
    ("where", "terminal"),
    [
        ("a pipe", False),
        ("--quiet before the subcommand", True),
        ("--quiet after the subcommand", True),
    ],
)
def test_no_progress_in_a_pipe_or_with_quiet(table, tmp_path, where, terminal):
    args = ["compact", table, "--out", str(tmp_path / "out")]
    if where.startswith("--quiet before"):
        args = ["--quiet", *args]
    elif where.startswith("--quiet after"):
        args = [*args, "-q"]

    code, stdout, stderr = run_cli(args, terminal=terminal)

    assert code == 0, stderr
    # no progress: only the storage-only warning (no write-id list), which --quiet keeps
    assert (
        stderr.replace("\r\n", "\n") == f"airflow-acid compact: warning: {STORAGE_ONLY_WARNING}\n"
    )
    assert "committed now" in stdout


def test_debug_after_the_subcommand_shows_the_traceback(tmp_path):
    code, _, stderr = run_cli(["inspect", str(tmp_path / "missing"), "--debug"], terminal=False)
    assert code == 1
    warning, _, stderr = stderr.partition("\n")
    assert warning == f"airflow-acid inspect: warning: {STORAGE_ONLY_WARNING}"
    assert stderr.startswith("Traceback (most recent call last):")
    assert (
        stderr.rstrip()
        .splitlines()[-1]
        .startswith("airflow_provider_acid.acid.listing.TableLocationError: table location")
    )


# -- errors: one line plus a hint, in-process ---------------------------------------------------


def error_lines(capsys) -> list[str]:
    captured = capsys.readouterr()
    assert captured.out == ""
    # these tables are read storage-only: the warning may come first, on a line of its own
    return [line for line in captured.err.splitlines() if not line.endswith(STORAGE_ONLY_WARNING)]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["compact", "{table}", "--out", "{out}", "--valid-write-ids", "nonsense"], "expected"),
        (["inspect", "{tmp}/missing"], "does not exist"),
        (["manifest", "{table}", "--where", "id >>> 5"], "cannot parse WHERE text 'id >>> 5'"),
        (["compact", "{table}", "--out", "{out}", "--partition", "x"], "is not a k=v"),
    ],
    ids=["WriteIdListError", "TableLocationError", "PredicateError", "ValueError"],
)
def test_a_library_error_is_one_line_and_a_hint(table, tmp_path, capsys, args, message):
    filled = [
        a.format(table=table, out=tmp_path / "out", tmp=tmp_path) for a in args
    ]  # fmt: skip
    assert cli.main(filled) == 2
    error, hint = error_lines(capsys)
    assert error.startswith(f"airflow-acid {args[0]}: error: ") and message in error
    assert "\x1b" not in error  # no terminal escapes outside a terminal
    # a predicate is the user's text: its error points at --help, a traceback would not help
    debug = "hint: run with --debug for the traceback"
    assert hint == (f"hint: see airflow-acid {args[0]} --help" if "WHERE" in message else debug)


def test_each_library_error_class_takes_the_one_line_path(monkeypatch, capsys, tmp_path):
    from airflow_provider_acid.acid.listing import TableLocationError
    from airflow_provider_acid.acid.writeids import WriteIdListError
    from airflow_provider_acid.pruning.predicates import PredicateError

    errors = [
        CommitError("2 file(s) do not verify under out:\n  part-1 is missing"),
        PredicateError("unknown column 'x'"),
        WriteIdListError("expected 'db.table:...'"),
        TableLocationError("table location 'x' does not exist"),
        PermissionError("Access Denied"),
    ]
    for exc in errors:

        def fail(*args, _exc=exc, **kwargs):
            raise _exc

        monkeypatch.setattr("airflow_provider_acid.engine.compaction.compact_table", fail)
        assert cli.main(["compact", "t", "--out", str(tmp_path / "o")]) == 2
        error, hint = error_lines(capsys)
        assert error == f"airflow-acid compact: error: {' '.join(str(exc).split())}"
        if isinstance(exc, PredicateError):
            assert hint == "hint: see airflow-acid compact --help"
            continue
        assert hint.startswith("hint: ") and hint.endswith("run with --debug for the traceback")
    assert "credentials" in hint  # the PermissionError's hint says where to look


def test_an_unexpected_error_is_one_line_naming_its_type(monkeypatch, capsys, tmp_path):
    def fail(*args, **kwargs):
        raise TypeError("unsupported operand")

    monkeypatch.setattr("airflow_provider_acid.engine.compaction.compact_table", fail)
    assert cli.main(["compact", "t", "--out", str(tmp_path / "o")]) == 2
    error, hint = error_lines(capsys)
    assert error == "airflow-acid compact: error: TypeError: unsupported operand"
    assert "--debug" in hint
    with pytest.raises(TypeError):
        cli.main(["compact", "t", "--out", str(tmp_path / "o"), "--debug"])


def test_ctrl_c_is_one_line_and_exit_130(monkeypatch, capsys, tmp_path):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr("airflow_provider_acid.engine.compaction.compact_table", interrupted)
    assert cli.main(["compact", "t", "--out", str(tmp_path / "o")]) == 130
    assert error_lines(capsys) == [
        "airflow-acid compact: interrupted; nothing was committed, run it again to finish"
    ]
    monkeypatch.setattr(cli, "resolve_read_view", interrupted)
    assert cli.main(["inspect", "t"]) == 130
    assert error_lines(capsys) == ["airflow-acid inspect: interrupted"]
    with pytest.raises(KeyboardInterrupt):
        cli.main(["inspect", "t", "--debug"])


def test_debug_and_quiet_parse_before_and_after_the_subcommand():
    parser = cli.build_parser()
    plain = parser.parse_args(["inspect", "t"])
    assert (plain.debug, plain.quiet) == (False, False)
    for args in (["--debug", "-q", "inspect", "t"], ["inspect", "t", "--debug", "--quiet"]):
        parsed = parser.parse_args(args)
        assert (parsed.debug, parsed.quiet) == (True, True), args
    mixed = parser.parse_args(["--debug", "compact", "t", "--out", "o", "--quiet"])
    assert (mixed.debug, mixed.quiet) == (True, True)


# -- the progress hook and the line ---------------------------------------------------------------


def test_the_progress_hook_sees_every_computed_slice_and_changes_nothing(table, tmp_path):
    calls: list[tuple[str, int, int]] = []
    options = CompactionOptions(max_workers=2)
    with_progress = compact_table(
        table,
        str(tmp_path / "a"),
        options=options,
        progress=lambda r, done, total: calls.append((r.slice_key, done, total)),
    )
    without = compact_table(table, str(tmp_path / "b"), options=options)

    assert [(done, total) for _, done, total in calls] == [(1, 3), (2, 3), (3, 3)]
    assert sorted(key for key, _, _ in calls) == [b.slice_key for b in with_progress.buckets]
    assert with_progress.snapshot_id == without.snapshot_id
    assert with_progress.buckets == without.buckets
    # an already committed snapshot computes nothing, so reports nothing
    calls.clear()
    compact_table(table, str(tmp_path / "a"), options=options, progress=lambda *a: calls.append(a))
    assert calls == []


def bucket(rows: int, size: int) -> BucketResult:
    return BucketResult(
        snapshot_id="0" * 16,
        slice_key="#0",
        partition="",
        bucket=0,
        fingerprint="f",
        files=(OutputFile("part.parquet", rows, size),),
        rows_read=rows,
        rows_invalid=0,
        rows_deleted=0,
        rows_filtered=0,
        rows_written=rows,
        delete_keys=0,
    )


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_line_is_redrawn_in_place_throttled_and_ended():
    stream, clock = io.StringIO(), Clock()
    with ProgressLine(stream, enabled=True, clock=clock, min_interval=0.5) as line:
        clock.now += 1.0
        line(bucket(1_234_000, 12_300_000), 1, 3)
        clock.now += 0.1  # too soon: not redrawn
        line(bucket(567, 1), 2, 3)
        clock.now += 0.1  # the last bucket is always drawn
        line(bucket(0, 0), 3, 3)
    assert stream.getvalue() == (
        "\rbuckets 1/3  rows 1,234,000  12.3 MB/s\rbuckets 3/3  rows 1,234,567  10.3 MB/s\n"
    )


def test_a_shorter_line_wipes_the_longer_one_before_it():
    stream, clock = io.StringIO(), Clock()
    line = ProgressLine(stream, enabled=True, clock=clock, min_interval=0)
    clock.now += 1
    line(bucket(10, 5_000_000), 1, 2)
    clock.now += 1000
    line(bucket(0, 0), 2, 2)
    first, second = stream.getvalue().split("\r")[1:]
    assert len(second) == len(first) and second.rstrip().endswith("B/s")
    line.close()
    line.close()  # idempotent
    assert stream.getvalue().count("\n") == 1


def test_nothing_is_drawn_when_disabled_or_not_a_terminal():
    stream = io.StringIO()  # not a terminal
    with progress_line(False, stream) as line:
        line(bucket(10, 10), 1, 1)
    assert stream.getvalue() == "" and line.rows == 10  # still counted
    with ProgressLine(stream, enabled=False) as line:
        line(bucket(10, 10), 1, 1)
    assert stream.getvalue() == ""


def test_rates_are_in_decimal_units():
    assert [format_rate(r) for r in (0, 999, 1_000, 12_345_678, 2.5e9)] == [
        "0 B/s",
        "999 B/s",
        "1.0 kB/s",
        "12.3 MB/s",
        "2.5 GB/s",
    ]
