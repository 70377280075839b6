"""The project's notification-log listener (scripts/metastore/NotificationLogListener.java),
compiled once against the fetched metastore jars and cached beside them.

Why the project has its own listener, and what it writes, is said at the top of the Java file.
``scripts/metastore.py start --notifications`` puts the compiled classes on the metastore's
classpath and names the class in ``metastore.transactional.event.listeners``.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

SOURCE = Path(__file__).resolve().parent / "metastore" / "NotificationLogListener.java"
CLASS = "acidtest.NotificationLogListener"


def javac_bin() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "javac").is_file():
        return str(Path(home) / "bin" / "javac")
    return shutil.which("javac")


def compile_listener(jars_root: Path, classpath: str, log_file: Path) -> Path:
    """The folder of the compiled listener under ``jars_root`` (named after the source's
    digest), compiled here with ``javac --release 17`` against ``classpath`` unless it is
    there already. Raises RuntimeError (with javac's output in ``log_file``) on failure.
    Call it under the fetch lock."""
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:16]
    out = jars_root / f"listener-{digest}"
    stamp = out / "compiled"
    if stamp.is_file():
        return out
    javac = javac_bin()
    if javac is None:
        raise RuntimeError("javac is not on PATH (set JAVA_HOME to a JDK 17)")
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    cmd = [javac, "--release", "17", "-nowarn", "-cp", classpath, "-d", str(out), str(SOURCE)]
    with open(log_file, "w") as log:
        rc = subprocess.call(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    if rc != 0:
        shutil.rmtree(out, ignore_errors=True)
        raise RuntimeError(f"javac failed (exit {rc}): {' '.join(cmd)}")
    stamp.write_text(f"{SOURCE.name} sha256 {digest}...\n")
    return out
