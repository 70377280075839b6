"""`make chaos`: kill -9 and SIGTERM at random points of a compaction, then check what is left.

    .venv/bin/python scripts/chaos.py [--trials N] [--seed S] [--rows-per-bucket N]
        [--buckets N] [--modes cli,task,commit] [--task-every K] [--work DIR] [--json]

Writes a full-ACID demo table (``generate_demo_table``: by default 4 buckets x 300,000 rows
plus deltas, 1.2M rows after deletes) into a temporary folder, then runs ``--trials`` trials
(default 100, ``CHAOS_N`` in the Makefile) of three kinds, the places to kill:

* ``cli``    - ``airflow-acid compact TABLE --out OUT`` in its own process;
* ``task``   - one mapped ``AcidCompactOperator`` task (a generated DAG ``acid_chaos`` mapped
  over the planned slices) run by ``airflow tasks test --map-index K`` in a temporary
  AIRFLOW_HOME on SQLite; the snapshot is planned first with the library;
* ``commit`` - ``commit_snapshot`` of compacted slices, in its own process.

Trials alternate ``cli`` and ``commit``; every ``--task-every``-th (default 10th) is a ``task``
trial, as ``airflow tasks test`` spends about a minute starting on a loaded 2-core machine
(most of it building its in-process execution API) before the task writes for a second.
``--modes`` picks a subset (CI runs ``cli,commit``: no Airflow database to migrate).

Each trial writes to a fresh OUT and sends SIGKILL or SIGTERM (chosen at random) after a
random delay into the time that process writes, measured once per mode by an uninterrupted
calibration run: a compaction (``cli``, ``task``) is signalled a random time within its
calibrated writing time after its first data file appears (its start-up time varies with the
machine's load); a commit a random time within its calibrated duration after it starts. Then
it checks:

1. a folder read (``pyarrow.dataset`` over OUT, which skips ``_``/``.`` names) sees only valid
   Parquet files (each footer read);
2. OUT holds no committed snapshot or one complete snapshot: its manifest lists only files that
   exist, with the recorded sizes and footer row counts, and exactly the expected rows;
3. a re-run (``compact_table`` into the same OUT) commits exactly the expected rows (count and
   the sum of ids), the folder read then returns exactly them, and no temporary is left.

It prints the counts per mode and signal and exits 1 if any check failed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from airflow_provider_acid.acid.storage import TEMPORARY_NAME
from airflow_provider_acid.engine.compaction import compact_slice, compact_table
from airflow_provider_acid.engine.plan import plan_snapshot
from airflow_provider_acid.output.protocol import committed_snapshots
from airflow_provider_acid.testing import generate_demo_table

MODES = ("cli", "task", "commit")
SIGNALS = {"kill -9": signal.SIGKILL, "SIGTERM": signal.SIGTERM}
BIN = Path(sys.executable).parent
DAG_ID = "acid_chaos"


@dataclass(frozen=True)
class Expected:
    """What a correct snapshot of the table holds."""

    rows: int
    id_sum: int


@dataclass(frozen=True)
class Window:
    """When, after its start, a process of a mode writes: kills are drawn in this window."""

    start: float
    end: float

    def draw(self, rng: random.Random) -> float:
        return rng.uniform(self.start, self.end)


@dataclass
class TrialResult:
    number: int
    mode: str
    signal: str
    delay: float
    exit_code: int | None = None
    killed: bool = False  # the signal reached a running process (else it had ended)
    committed_before_rerun: int = 0
    invalid_visible: list[str] = field(default_factory=list)
    commit_problems: list[str] = field(default_factory=list)
    rerun_exact: bool = False
    rerun_problem: str = ""
    temporaries_left: int = 0

    @property
    def ok(self) -> bool:
        return (
            not self.invalid_visible
            and not self.commit_problems
            and self.rerun_exact
            and not self.temporaries_left
        )


# -- checks ----------------------------------------------------------------------------------


def visible_files(out: Path) -> list[str]:
    """The files a folder read of OUT sees: pyarrow's discovery skips every path with a
    component starting with ``_`` or ``.`` below the folder (``selector_ignore_prefixes``)."""
    if not out.exists():
        return []
    found = []
    for path in out.rglob("*"):
        parts = path.relative_to(out).parts
        if path.is_file() and not any(p.startswith(("_", ".")) for p in parts):
            found.append(str(path))
    return sorted(found)


def invalid_visible(out: Path) -> list[str]:
    """Visible files that are not valid Parquet (footer unreadable), and a folder read that
    fails for another reason."""
    bad = []
    for path in visible_files(out):
        try:
            pq.read_metadata(path)
        except Exception as exc:  # noqa: BLE001 - any unreadable file is what we count
            bad.append(f"{path}: {exc}")
    if not bad and visible_files(out):
        try:
            ds.dataset(str(out), format="parquet").count_rows()
        except Exception as exc:  # noqa: BLE001
            bad.append(f"folder read of {out}: {exc}")
    return bad


def commit_problems(out: Path, expected: Expected) -> tuple[int, list[str]]:
    """(committed snapshots, what is wrong with them)."""
    from fsspec.implementations.local import LocalFileSystem

    if not out.exists():
        return 0, []
    snapshots = committed_snapshots(LocalFileSystem(), str(out))
    problems = []
    if len(snapshots) > 1:
        problems.append(f"{len(snapshots)} snapshots committed, expected at most 1")
    for snapshot in snapshots:
        for file in snapshot.files:
            path = out / file.path
            if not path.exists():
                problems.append(f"manifest lists {file.path}, which does not exist")
                continue
            if path.stat().st_size != file.size:
                problems.append(f"{file.path}: {path.stat().st_size} bytes, {file.size} listed")
            try:
                rows = pq.read_metadata(path).num_rows
            except Exception as exc:  # noqa: BLE001 - an unreadable listed file is wrong
                problems.append(f"{file.path}: listed but not valid Parquet ({exc})")
                continue
            if rows != file.rows:
                problems.append(f"{file.path}: {rows} rows, {file.rows} listed")
        if snapshot.rows_written != expected.rows:
            problems.append(f"committed {snapshot.rows_written} rows, expected {expected.rows}")
    return len(snapshots), problems


def temporaries(out: Path) -> list[Path]:
    return [p for p in out.rglob(".*") if p.is_file() and TEMPORARY_NAME.match(p.name)]


def check_rerun(table: Path, out: Path, expected: Expected) -> str:
    """Re-run the compaction; '' when it committed exactly the expected rows."""
    result = compact_table(str(table), str(out))
    if result.rows_written != expected.rows:
        return f"re-run committed {result.rows_written} rows, expected {expected.rows}"
    read = ds.dataset(str(out), format="parquet").to_table(columns=["id"])
    id_sum = pc.sum(read["id"]).as_py() or 0
    if (read.num_rows, id_sum) != (expected.rows, expected.id_sum):
        return (
            f"folder read after the re-run: {read.num_rows} rows (id sum {id_sum}), "
            f"expected {expected.rows} (id sum {expected.id_sum})"
        )
    listed = {str(out / f.path) for f in result.files}
    if set(visible_files(out)) != listed:
        return "the folder holds data files the committed manifest does not list"
    return ""


# -- the processes killed --------------------------------------------------------------------


class Runner:
    """Starts the process of each mode for one OUT (``start`` returns it running)."""

    def __init__(self, work: Path, table: Path, airflow_env: dict[str, str] | None) -> None:
        self.work = work
        self.table = table
        self.airflow_env = airflow_env

    def start(self, mode: str, out: Path, rng: random.Random) -> tuple[subprocess.Popen, float]:
        """The process of ``mode`` writing ``out``, and the time its work starts from (the
        ``commit`` process says when its commit begins, after its imports)."""
        if mode != "commit":
            return self._start(mode, out, rng), time.monotonic()
        process = self._start(mode, out, rng)
        assert process.stdout is not None
        process.stdout.readline()  # "commit" (or nothing, if it failed first)
        return process, time.monotonic()

    def _start(self, mode: str, out: Path, rng: random.Random) -> subprocess.Popen:
        if mode == "cli":
            command = [str(BIN / "airflow-acid"), "compact", str(self.table), "--out", str(out)]
            return _spawn(command, None)
        plan = plan_snapshot(str(self.table), str(out))
        keys = list(plan.keys_to_compute)
        if mode == "task":
            assert self.airflow_env is not None
            dags = Path(self.airflow_env["AIRFLOW__CORE__DAGS_FOLDER"])
            write_dag(dags, out, plan.snapshot_id, keys)
            index = rng.randrange(len(keys))
            command = [str(BIN / "airflow"), "tasks", "test", DAG_ID, "compact"]
            return _spawn(command + ["--map-index", str(index)], self.airflow_env)
        results = [
            compact_slice(str(self.table), key, str(out), plan.snapshot_id).to_dict()
            for key in keys
        ]
        payload = out.parent / f"{out.name}-results.json"
        payload.write_text(json.dumps({"snapshot_id": plan.snapshot_id, "results": results}))
        command = [sys.executable, __file__, "--commit-child", str(out), str(payload)]
        return _spawn(command, None, stdout=subprocess.PIPE)


def _spawn(command: list[str], env: dict[str, str] | None, stdout: Any = None) -> subprocess.Popen:
    return subprocess.Popen(
        command,
        env=env,
        stdout=stdout if stdout is not None else subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def commit_child(out: str, payload: str) -> int:
    """The ``commit`` mode's process: commit the compacted slices of ``payload``."""
    from airflow_provider_acid.output.protocol import commit_snapshot

    data = json.loads(Path(payload).read_text())
    print("commit", flush=True)
    commit_snapshot(out, data["snapshot_id"], data["results"])
    print("committed", flush=True)
    return 0


def write_dag(dags: Path, out: Path, snapshot_id: str, keys: Sequence[str]) -> None:
    """The mapped compaction DAG, over the planned slices of ``out``'s snapshot."""
    source = f'''\
        """Written by scripts/chaos.py: one mapped compaction task over a planned snapshot."""
        import datetime as dt

        from airflow.sdk import DAG

        from airflow_provider_acid.operators.acid import AcidCompactOperator

        with DAG({DAG_ID!r}, schedule=None, start_date=dt.datetime(2024, 1, 1), catchup=False):
            AcidCompactOperator.partial(
                task_id="compact", output_uri={str(out)!r}, snapshot_id={snapshot_id!r}
            ).expand(slice_key={list(keys)!r})
        '''
    dags.mkdir(parents=True, exist_ok=True)
    (dags / f"{DAG_ID}.py").write_text(textwrap.dedent(source))


def prepare_airflow(work: Path) -> dict[str, str]:
    home = work / "airflow"
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "WARNING",
    }
    (home / "dags").mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [str(BIN / "airflow"), "db", "migrate"], env=env, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise SystemExit(f"airflow db migrate failed:\n{done.stderr[-3000:]}")
    return env


def calibrate(runner: Runner, mode: str, out: Path) -> Window:
    """Run ``mode`` once uninterrupted: the window from its first file under OUT to its end."""
    process, started = runner.start(mode, out, random.Random(0))
    if mode == "commit":  # the window is the commit itself, not the interpreter's exit
        assert process.stdout is not None
        process.stdout.readline()  # "committed"
        end = time.monotonic() - started
        if process.wait() != 0:
            raise SystemExit(
                f"calibration run of commit failed with exit code {process.returncode}"
            )
        return Window(0.0, end)
    first = None
    while process.poll() is None:
        if first is None and _writing(out, mode):
            first = time.monotonic() - started
        time.sleep(0.01)
    end = time.monotonic() - started
    if process.returncode != 0:
        raise SystemExit(f"calibration run of {mode} failed with exit code {process.returncode}")
    start = first if first is not None else 0.0
    return Window(max(0.0, start * 0.9), end * 0.95)


def _writing(out: Path, mode: str) -> bool:
    """Has the process started writing data files (the commit process: from its start)?"""
    if mode == "commit":
        return True
    folders = [d for d in out.glob("*") if d.is_dir() and not d.name.startswith("_")]
    return any(p.is_file() for d in folders for p in d.iterdir())


# -- trials ----------------------------------------------------------------------------------


def run_trial(
    runner: Runner,
    number: int,
    mode: str,
    window: Window,
    expected: Expected,
    rng: random.Random,
) -> TrialResult:
    sig_name = rng.choice(sorted(SIGNALS))
    out = runner.work / "trials" / f"{number:04d}-{mode}"
    process, started = runner.start(mode, out, rng)
    if mode == "commit":
        delay = window.draw(rng)
    else:  # from its first file on (its start-up time varies with the machine's load)
        while process.poll() is None and not _writing(out, mode):
            time.sleep(0.005)
        began = time.monotonic() - started
        delay = began + rng.uniform(0.0, 0.9 * (window.end - window.start))
    remaining = delay - (time.monotonic() - started)
    if remaining > 0:
        time.sleep(remaining)
    killed = process.poll() is None
    if killed:
        os.killpg(process.pid, SIGNALS[sig_name])
    code = process.wait()
    result = TrialResult(number, mode, sig_name, round(delay, 3), code, killed)
    result.invalid_visible = invalid_visible(out)
    result.committed_before_rerun, result.commit_problems = commit_problems(out, expected)
    try:
        result.rerun_problem = check_rerun(runner.table, out, expected)
    except Exception as exc:  # noqa: BLE001 - a failed re-run is what we count
        result.rerun_problem = f"re-run failed: {type(exc).__name__}: {exc}"
    result.rerun_exact = not result.rerun_problem
    result.temporaries_left = len(temporaries(out))
    shutil.rmtree(out, ignore_errors=True)
    return result


def expected_of(writer: Any) -> Expected:
    rows = writer.expected_rows()
    return Expected(rows.num_rows, pc.sum(rows["id"]).as_py() or 0)


@dataclass
class ChaosReport:
    trials: list[TrialResult]
    windows: dict[str, Window]
    seconds: float

    def counts(self) -> dict[str, Any]:
        by = Counter((t.mode, t.signal) for t in self.trials)
        return {
            "trials": len(self.trials),
            "by_mode_and_signal": {f"{m} / {s}": n for (m, s), n in sorted(by.items())},
            "signals_sent_to_a_running_process": sum(1 for t in self.trials if t.killed),
            "killed_before_its_commit": sum(
                1 for t in self.trials if t.committed_before_rerun == 0
            ),
            "committed_before_the_signal_took_effect": sum(
                1 for t in self.trials if t.committed_before_rerun
            ),
            "invalid_visible_files": sum(len(t.invalid_visible) for t in self.trials),
            "wrong_commits": sum(1 for t in self.trials if t.commit_problems),
            "exact_reruns": sum(1 for t in self.trials if t.rerun_exact),
            "temporaries_left_after_rerun": sum(t.temporaries_left for t in self.trials),
            "seconds": round(self.seconds, 1),
        }

    @property
    def ok(self) -> bool:
        return all(t.ok for t in self.trials)


def run_chaos(
    trials: int,
    *,
    seed: int = 0,
    rows_per_bucket: int = 300_000,
    buckets: int = 4,
    modes: Sequence[str] = MODES,
    task_every: int = 10,
    work: Path | None = None,
    log: Any = print,
) -> ChaosReport:
    """Run the trials (see the module docstring) in ``work`` (a temporary folder if None)."""
    began = time.monotonic()
    own = work is None
    work = Path(tempfile.mkdtemp(prefix="acid-chaos-")) if work is None else work
    try:
        table = work / "table"
        writer = generate_demo_table(
            str(table), partitions=1, buckets=buckets, rows_per_bucket=rows_per_bucket, seed=seed
        )
        expected = expected_of(writer)
        log(f"table      {table}: {expected.rows:,} rows expected")
        airflow_env = prepare_airflow(work) if "task" in modes else None
        runner = Runner(work, table, airflow_env)
        windows = {}
        for mode in modes:
            window = windows[mode] = calibrate(runner, mode, work / "calibration" / mode)
            log(f"calibrate  {mode}: kills drawn from {window.start:.2f} s to {window.end:.2f} s")
        rng = random.Random(seed)
        results = []
        sequence = schedule(trials, modes, task_every)
        for number, mode in enumerate(sequence):
            result = run_trial(runner, number, mode, windows[mode], expected, rng)
            results.append(result)
            status = "ok" if result.ok else "FAILED"
            log(
                f"trial {number:3d} {mode:6s} {result.signal:7s} after {result.delay:5.2f} s: "
                f"exit {result.exit_code}, committed {result.committed_before_rerun}, {status}"
                + ("" if result.ok else f" {_failure(result)}")
            )
        return ChaosReport(results, windows, time.monotonic() - began)
    finally:
        if own:
            shutil.rmtree(work, ignore_errors=True)


def schedule(trials: int, modes: Sequence[str], task_every: int) -> list[str]:
    """The mode of each trial: ``cli`` and ``commit`` alternating, every ``task_every``-th a
    ``task`` (each as far as ``modes`` has it)."""
    others = [m for m in modes if m != "task"] or ["task"]
    sequence: list[str] = []
    for number in range(trials):
        if "task" in modes and (number % task_every == task_every - 1 or others == ["task"]):
            sequence.append("task")
        else:
            sequence.append(others[sum(1 for m in sequence if m != "task") % len(others)])
    return sequence


def _failure(result: TrialResult) -> str:
    return "; ".join(
        [*result.invalid_visible[:2], *result.commit_problems[:2], result.rerun_problem]
        + ([f"{result.temporaries_left} temporaries left"] if result.temporaries_left else [])
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["--commit-child"]:
        return commit_child(args[1], args[2])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=int(os.environ.get("CHAOS_N", 100)))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rows-per-bucket", type=int, default=300_000)
    parser.add_argument("--buckets", type=int, default=4)
    parser.add_argument("--modes", default=os.environ.get("CHAOS_MODES") or ",".join(MODES))
    parser.add_argument("--task-every", type=int, default=10)
    parser.add_argument("--work", type=Path, help="keep the work folder here (default: temp)")
    parser.add_argument("--json", action="store_true", help="print the counts as JSON")
    options = parser.parse_args(args)
    modes = [m.strip() for m in options.modes.split(",") if m.strip()]
    unknown = sorted(set(modes) - set(MODES))
    if unknown or not modes:
        parser.error(f"--modes takes a comma-separated subset of {', '.join(MODES)}")
    if options.work is not None:
        options.work.mkdir(parents=True, exist_ok=True)
    report = run_chaos(
        options.trials,
        seed=options.seed,
        rows_per_bucket=options.rows_per_bucket,
        buckets=options.buckets,
        modes=modes,
        task_every=max(1, options.task_every),
        work=options.work,
    )
    counts = report.counts()
    if options.json:
        print(json.dumps({**counts, "windows": {m: asdict(w) for m, w in report.windows.items()}}))
    else:
        for name, value in counts.items():
            if isinstance(value, dict):
                for key, n in value.items():
                    print(f"  {key:40s} {n}")
            else:
                print(f"{name.replace('_', ' '):42s} {value}")
    print("chaos: " + ("every check held" if report.ok else "CHECKS FAILED"))
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
