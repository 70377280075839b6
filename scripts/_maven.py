"""What the scripts that fetch jars through Maven share (metastore.py, spark_jars.py,
iceberg_rest.py): log lines, a log's tail, a cross-process lock, and one ``mvn package`` of a
fetch pom into a folder."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return f"(no log at {path})"


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """An exclusive lock on ``path`` (created if absent), across processes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def maven() -> str | None:
    """The Maven command (``$MVN`` or ``mvn``), or None when it is not on PATH."""
    mvn = os.environ.get("MVN") or "mvn"
    return mvn if shutil.which(mvn) else None


def run_package(mvn: str, pom: Path, m2: Path, fetch_dir: Path, log_file: Path) -> tuple[int, str]:
    """``mvn package`` of ``pom`` with its own local repository ``m2``, the pom copying what it
    fetches into ``fetch_dir`` (emptied first); output to ``log_file``. Returns the exit code
    and the command as text."""
    shutil.rmtree(fetch_dir, ignore_errors=True)
    cmd = [mvn, "-B", "-ntp", "-f", str(pom), f"-Dmaven.repo.local={m2}",
           f"-Dfetch.dir={fetch_dir}", "package"]  # fmt: skip
    log_file.parent.mkdir(parents=True, exist_ok=True)
    with open(log_file, "w") as out:
        rc = subprocess.call(
            cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=REPO
        )
    return rc, " ".join(cmd)
