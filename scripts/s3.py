"""A real S3-compatible server on 127.0.0.1: S3Proxy with its filesystem backend.

    python scripts/s3.py start [--home DIR] [--port N]   # last line printed: http://127.0.0.1:N
    python scripts/s3.py stop  [--home DIR]
    python scripts/s3.py status [--home DIR]

S3Proxy (``org.gaul:s3proxy``, its ``jar-with-dependencies``) is fetched through Maven into
``.cache/s3proxy/`` on first use. It serves the folders of ``HOME/data`` as buckets and the
files below them as objects (the ``filesystem-nio2`` backend), so a benchmark can lay a million
objects straight into a bucket's folder instead of putting them one by one. Bucket
``warehouse`` exists from the start. It answers AWS signature v2 and v4 for the key
``testing-access-key`` / ``testing-secret-key`` (the test suite's), takes ranged GETs,
multipart uploads and conditional PUTs (``If-None-Match: *`` is refused with ``412
PreconditionFailed`` on an existing key).

``start`` reuses a server already running from the same home (it says "already running");
``stop`` stops it. ``make s3`` and ``make s3-stop`` call these with the default home
(``.cache/s3proxy/run``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _maven import REPO, locked, log, maven, tail  # noqa: E402
from _servers import free_port  # noqa: E402

VERSION = "4.1.0"
ARTIFACT = f"org.gaul:s3proxy:{VERSION}:jar:jar-with-dependencies"
CACHE = REPO / ".cache" / "s3proxy"
JAR = CACHE / f"s3proxy-{VERSION}-jar-with-dependencies.jar"
DEFAULT_HOME = CACHE / "run"
STATE = "state.json"
BUCKET = "warehouse"
ACCESS_KEY = "testing-access-key"
SECRET_KEY = "testing-secret-key"
#: Java 17 or newer (S3Proxy 4 is built for 17); the first found is used.
JAVAS = (
    "/usr/lib/jvm/temurin-25-jdk-amd64/bin/java",
    "/usr/lib/jvm/java-17-openjdk-amd64/bin/java",
)


def fetch() -> Path:
    """The S3Proxy jar, fetched through Maven into ``.cache/s3proxy/`` unless already there."""
    with locked(CACHE / ".fetch.lock"):
        if JAR.exists():
            return JAR
        mvn = maven()
        if mvn is None:
            raise SystemExit("s3: Maven (mvn) is not on PATH; it fetches S3Proxy")
        started = time.monotonic()
        log(f"s3: fetching {ARTIFACT} through Maven into {CACHE}")
        out = CACHE / "fetch.log"
        cmd = [mvn, "-B", "-ntp", f"-Dmaven.repo.local={CACHE / 'm2'}", "dependency:copy",
               f"-Dartifact={ARTIFACT}", f"-DoutputDirectory={CACHE}"]  # fmt: skip
        with open(out, "w") as handle:
            rc = subprocess.call(cmd, stdout=handle, stderr=subprocess.STDOUT, cwd=REPO)
        if rc != 0 or not JAR.exists():
            raise SystemExit(f"s3: {' '.join(cmd)} failed (exit {rc}):\n{tail(out)}")
        log(f"s3: fetched in {time.monotonic() - started:.0f} s")
        return JAR


def java_bin() -> str:
    for candidate in (os.environ.get("S3PROXY_JAVA"), *JAVAS):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which("java")
    if found is None:
        raise SystemExit("s3: no Java 17+ found (set S3PROXY_JAVA)")
    return found


def answers(endpoint: str, timeout: float = 2.0) -> bool:
    """Whether an S3 server answers at ``endpoint`` (any HTTP status counts)."""
    try:
        urllib.request.urlopen(f"{endpoint}/", timeout=timeout).close()
    except urllib.error.HTTPError:
        return True  # 403 for an unsigned request: it is there
    except OSError:
        return False
    return True


def read_state(home: Path) -> dict | None:
    try:
        return json.loads((home / STATE).read_text())
    except (OSError, ValueError):
        return None


def alive(pid: int) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"s3proxy" in cmdline


def write_conf(home: Path, port: int) -> Path:
    data = home / "data"
    (data / BUCKET).mkdir(parents=True, exist_ok=True)
    conf = home / "s3proxy.conf"
    conf.write_text(
        "\n".join(
            [
                f"s3proxy.endpoint=http://127.0.0.1:{port}",
                "s3proxy.authorization=aws-v2-or-v4",
                f"s3proxy.identity={ACCESS_KEY}",
                f"s3proxy.credential={SECRET_KEY}",
                "jclouds.provider=filesystem-nio2",
                f"jclouds.identity={ACCESS_KEY}",
                f"jclouds.credential={SECRET_KEY}",
                f"jclouds.filesystem.basedir={data}",
                "",
            ]
        )
    )
    return conf


def cmd_start(args: argparse.Namespace) -> int:
    home = Path(args.home).resolve()
    home.mkdir(parents=True, exist_ok=True)
    with locked(home / ".start.lock"):
        state = read_state(home)
        if state and alive(state["pid"]) and answers(state["endpoint"]):
            print(f"s3proxy already running (pid {state['pid']}), reused; data {home / 'data'}")
            print(state["endpoint"])
            return 0
        jar = fetch()
        port = args.port or free_port()
        conf = write_conf(home, port)
        log_file = home / "s3proxy.log"
        endpoint = f"http://127.0.0.1:{port}"
        with open(log_file, "w") as out:
            process = subprocess.Popen(
                [java_bin(), f"-Xmx{args.heap}", "-jar", str(jar), "--properties", str(conf)],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        deadline = time.monotonic() + args.timeout
        while not answers(endpoint, timeout=1.0):
            if process.poll() is not None or time.monotonic() > deadline:
                terminate(process.pid)
                raise SystemExit(f"s3: S3Proxy did not start on {endpoint}:\n{tail(log_file)}")
            time.sleep(0.2)
        state = {"pid": process.pid, "endpoint": endpoint, "data": str(home / "data")}
        (home / STATE).write_text(json.dumps(state))
        print(f"s3proxy {VERSION} started (pid {process.pid}); data {home / 'data'}")
        print(endpoint)
    return 0


def terminate(pid: int, timeout: float = 15.0) -> None:
    """SIGTERM the server's process group, then SIGKILL what is left after ``timeout``."""
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done = pid if not alive(pid) else 0
            if done:
                return
            time.sleep(0.1)


def cmd_stop(args: argparse.Namespace) -> int:
    home = Path(args.home).resolve()
    state = read_state(home)
    if state is None:
        print(f"no s3proxy state in {home}")
        return 0
    if alive(state["pid"]):
        terminate(state["pid"])
        print(f"stopped s3proxy pid {state['pid']} ({state['endpoint']})")
    else:
        print(f"s3proxy pid {state['pid']} was not running")
    (home / STATE).unlink(missing_ok=True)
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    state = read_state(Path(args.home).resolve())
    if state and alive(state["pid"]) and answers(state["endpoint"]):
        print(f"running: pid {state['pid']}, {state['endpoint']}, data {state['data']}")
        return 0
    print("not running")
    return 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("start", "stop", "status"):
        command = sub.add_parser(name)
        command.add_argument("--home", default=str(DEFAULT_HOME))
        if name == "start":
            command.add_argument("--port", type=int, default=0, help="0: a free port")
            command.add_argument("--heap", default="512m", help="the JVM's -Xmx")
            command.add_argument("--timeout", type=float, default=120.0)
    args = parser.parse_args(argv)
    return {"start": cmd_start, "stop": cmd_stop, "status": cmd_status}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
