#!/usr/bin/env python3
"""A real Iceberg REST catalog on 127.0.0.1, for the Iceberg sink's tests (and by hand).

    python scripts/iceberg_rest.py fetch              # fetch the jars once; print their folder
    python scripts/iceberg_rest.py serve DIR [PORT]   # serve a catalog kept in DIR until Ctrl-C

The server is Iceberg's own REST catalog code (``RESTCatalogAdapter`` over a ``JdbcCatalog`` on
SQLite, behind ``RESTCatalogServlet``, from Iceberg's test fixtures: what the
``apache/iceberg-rest-fixture`` image serves), started by ``scripts/iceberg_rest/
RestCatalog.java``, which binds 127.0.0.1 only and keeps metadata on the local disk. `fetch`
runs Maven on first use (``scripts/iceberg_rest/pom.xml``, about 32 MB, into the git-ignored
``.cache/iceberg-rest/`` with its own Maven local repository; the jars land in a folder named
after the pom's digest). Concurrent callers wait on a lock; the log is
``.cache/iceberg-rest/fetch.log``.

From Python: ``start(folder)`` returns a running :class:`RestCatalog` (its ``uri`` and
``stop()``). Standard library only; needs mvn on PATH (or MVN) and java 17 (or JAVA).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))  # scripts/: loaded by path too
from _maven import locked, log, maven, run_package, tail  # noqa: E402

POM = REPO / "scripts" / "iceberg_rest" / "pom.xml"
LAUNCHER = REPO / "scripts" / "iceberg_rest" / "RestCatalog.java"
CACHE = REPO / ".cache" / "iceberg-rest"
M2 = CACHE / "m2"
FETCH_LOG = CACHE / "fetch.log"
EXPECTED = ("iceberg-core-", "iceberg-open-api-", "jetty-servlet-", "sqlite-jdbc-")
START_TIMEOUT = 120.0


class RestCatalogError(RuntimeError):
    """The jars could not be fetched or the server did not start (with the log's tail)."""


def jar_dir() -> Path:
    digest = hashlib.sha256(POM.read_bytes()).hexdigest()[:16]
    return CACHE / f"jars-{digest}"


def fetch() -> Path:
    """The folder holding the server's jars (fetched through Maven on first use)."""
    root = jar_dir()
    stamp = root / "fetched"
    with locked(CACHE / "fetch.lock"):
        if stamp.is_file():
            return root / "lib"
        mvn = maven()
        if mvn is None:
            raise RestCatalogError("mvn (Maven) is not on PATH; install it (apt-get install maven)")
        log(f"iceberg_rest: fetching Iceberg's REST catalog jars with Maven (log: {FETCH_LOG})")
        rc, cmd = run_package(mvn, POM, M2, root, FETCH_LOG)
        names = [j.name for j in (root / "lib").glob("*.jar")]
        missing = [p for p in EXPECTED if not any(n.startswith(p) for n in names)]
        if rc != 0 or missing:
            raise RestCatalogError(
                f"Maven fetch failed (exit {rc}, missing {missing or 'nothing'}): "
                f"{cmd}\n--- last lines of {FETCH_LOG} ---\n{tail(FETCH_LOG)}"
            )
        stamp.write_text(f"{POM} sha256 {root.name}\n")
        return root / "lib"


@dataclass
class RestCatalog:
    """A running REST catalog server (a child process)."""

    process: subprocess.Popen
    port: int
    folder: Path
    log_path: Path

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=20)


def start(folder: Path | str, port: int = 0) -> RestCatalog:
    """Start a REST catalog keeping its SQLite database and warehouse in ``folder``."""
    lib = fetch()
    folder = Path(folder).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    java = os.environ.get("JAVA") or "java"
    log_path = folder / "rest-catalog.log"
    cmd = [
        java,
        "-Xmx256m",
        "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1",
        "-Djava.net.preferIPv4Stack=true",
        "-cp",
        str(lib / "*"),
        str(LAUNCHER),
        str(port),
        f"jdbc:sqlite:{folder / 'catalog.db'}",
        (folder / "warehouse").as_uri(),
    ]
    logfile = open(log_path, "w")
    process = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=logfile, stdin=subprocess.DEVNULL, text=True
    )
    ready: list[int] = []

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            if line.startswith("ready ") and not ready:
                ready.append(int(line.split()[1]))

    threading.Thread(target=read, daemon=True).start()
    deadline = time.monotonic() + START_TIMEOUT
    while not ready and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    if not ready:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=20)
        raise RestCatalogError(
            f"the REST catalog did not start (exit {process.returncode}): {' '.join(cmd)}\n"
            f"--- last lines of {log_path} ---\n{tail(log_path)}"
        )
    return RestCatalog(process, ready[0], folder, log_path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("fetch", help="fetch the jars; print their folder")
    serve = commands.add_parser("serve", help="serve a REST catalog until Ctrl-C")
    serve.add_argument("folder", type=Path)
    serve.add_argument("port", type=int, nargs="?", default=8181)
    args = parser.parse_args(argv)
    try:
        if args.command == "fetch":
            print(fetch())
            return 0
        catalog = start(args.folder, args.port)
    except RestCatalogError as exc:
        log(f"iceberg_rest: {exc}")
        return 1
    print(f"REST catalog at {catalog.uri} (log {catalog.log_path}); Ctrl-C stops it", flush=True)
    try:
        catalog.process.wait()
    except KeyboardInterrupt:
        pass
    finally:
        catalog.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
