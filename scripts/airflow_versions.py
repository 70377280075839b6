"""``make airflow-versions``: a smoke subset under the oldest supported Airflow 3 and the newest.

For each version, a virtualenv of its own under ``.cache/airflow-versions/`` (made anew each
run with uv, whose cache makes this quick) holds that ``apache-airflow`` and this project,
installed from the working tree; ``scripts/_airflow_smoke.py`` then runs in it: the provider
loads with no warning, every example DAG parses, and one ``dag.test()`` of the main DAG commits
the snapshot a demo table's live rows make. The oldest version is the lower bound of ``apache-
airflow`` in pyproject.toml; the newest is whatever the index offers today (uv resolves it
unpinned).

    python scripts/airflow_versions.py [--only oldest|newest] [--keep]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CACHE = REPO / ".cache" / "airflow-versions"
UV = shutil.which("uv", path=str(Path(sys.executable).parent)) or "uv"


def oldest_supported() -> str:
    """The ``apache-airflow>=X`` lower bound pyproject.toml declares."""
    text = (REPO / "pyproject.toml").read_text()
    found = re.search(r'^\s*"apache-airflow>=([0-9.]+)[,"]', text, re.MULTILINE)
    if found:
        return found.group(1)
    raise SystemExit("airflow-versions: pyproject.toml has no apache-airflow>=X bound")


#: The oldest Airflow is installed with what the index held a week after its release (uv's
#: ``--exclude-newer``), as its constraints file would have pinned it: under today's libraries
#: Airflow 3.2.0's task runner fails (pydantic 2.14: "TITerminalStatePayload needs a
#: discriminator field"), and 3.1.0 does not import (structlog 26). Airflow's constraints
#: files are not on a package index, so the date stands in for them. 3.2.0 was uploaded
#: between 2026-04-01 and 04-08 (``uv pip compile --exclude-newer`` found it on the 8th).
RESOLVED_AS_OF = {"3.2.0": "2026-04-15"}

#: Except these, which this provider needs newer than the oldest Airflow's week had:
#: pyarrow 25 (July 2026; ``pyarrow.OSFile.fileno`` fails on 24 and older, and the compaction
#: fsyncs each Parquet file through it). They resolve as of today.
NEWER_THAN_OLDEST = ["pyarrow"]


def run(args: list[str], **kwargs) -> None:
    done = subprocess.run(args, **kwargs)
    if done.returncode != 0:
        raise SystemExit(f"airflow-versions: {' '.join(map(str, args[:4]))} ... failed")


def smoke(label: str, requirement: str, as_of: str | None = None) -> str:
    venv = CACHE / label
    python = venv / "bin" / "python"
    started = time.monotonic()
    # a new venv each run (uv's cache makes it quick): packages left from an earlier run would
    # satisfy the requirements and escape the oldest's --exclude-newer date
    shutil.rmtree(venv, ignore_errors=True)
    run([UV, "venv", "--quiet", "--python", sys.executable, str(venv)])
    # the project's wheel from the working tree (not editable: what a user's pip installs)
    today = time.strftime("%Y-%m-%d", time.gmtime(time.time() + 86400))
    dated = ["--exclude-newer", as_of] if as_of else []
    for package in NEWER_THAN_OLDEST if as_of else []:
        dated += ["--exclude-newer-package", f"{package}={today}"]
    run(
        [
            UV,
            "pip",
            "install",
            *dated,
            "--quiet",
            "--python",
            str(python),
            "--reinstall-package",
            "airflow-provider-acid",
            requirement,
            str(REPO),
        ],
    )
    version = subprocess.run(
        [str(python), "-c", "import airflow; print(airflow.__version__)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    installed = time.monotonic() - started
    print(f"[{label}] apache-airflow {version} installed in {installed:.0f} s", flush=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "ACID_"))}
    run([str(python), str(REPO / "scripts" / "_airflow_smoke.py"), label], env=env)
    print(f"[{label}] apache-airflow {version}: passed in {time.monotonic() - started:.0f} s")
    return version


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=["oldest", "newest"])
    args = parser.parse_args()
    CACHE.mkdir(parents=True, exist_ok=True)
    oldest = oldest_supported()
    wanted = {
        "oldest": (f"apache-airflow=={oldest}", RESOLVED_AS_OF.get(oldest)),
        "newest": ("apache-airflow", None),
    }
    results, failed = {}, []
    for label, (requirement, as_of) in wanted.items():
        if args.only in (None, label):
            try:  # each version runs, whatever the other gave
                results[label] = f"{smoke(label, requirement, as_of)} passed"
            except SystemExit as failure:
                results[label], failed = f"failed ({failure})", [*failed, label]
    print("airflow-versions: " + "; ".join(f"{k} {v}" for k, v in results.items()))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
