"""What the scripts that run a server in the background share (metastore.py, trino.py, kdc.py,
s3.py, hdfs.py): a free port on 127.0.0.1, whether a process still uses a folder, and stopping a
server's process group."""

from __future__ import annotations

import os
import signal
import socket
import time
from pathlib import Path

HOST = "127.0.0.1"


def in_use(folder: Path) -> bool:
    """Whether a running process names ``folder`` on its command line (its jars, its home)."""
    needle = str(folder).encode()
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if needle in cmdline.read_bytes():
                return True
        except OSError:
            pass
    return False


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def terminate(pid: int, timeout: float = 20.0) -> None:
    """SIGTERM to the process group of ``pid`` (a server started in its own session), SIGKILL
    after ``timeout`` seconds; returns once it is gone."""
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pid, sig)  # started in its own session: its group is its pid
        except ProcessLookupError:
            return
        except PermissionError:
            os.kill(pid, sig)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
                if done:
                    return
            except ChildProcessError:
                pass
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.1)
