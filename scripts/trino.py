#!/usr/bin/env python3
"""A real Trino 476 server (one node) on 127.0.0.1 over the project's Hive metastore.

    python scripts/trino.py start [--port N] [--home DIR] [--metastore URI] [--xmx 3G]
    python scripts/trino.py status [--home DIR]
    python scripts/trino.py stop [--home DIR]

`start` fetches the server through Maven on first use (scripts/trino/pom.xml: the tarball into
.cache/trino/, with its own Maven local repository; lib/ and the four plugins used are extracted,
about 450 MB), writes a configuration into the home and runs one node, a coordinator that also
schedules work on itself (node-scheduler.include-coordinator=true), bound to 127.0.0.1, with a
modest heap (--xmx, default 3G: the machine is shared). It waits until the server has started
and answers `SHOW CATALOGS`. Its last line of stdout is its URL, http://127.0.0.1:PORT. A server
already running from the same home is reused.

Catalogs, all on the same metastore and the local file system (through Trino's Hadoop file
system: a table's location is the plain file:// folder the provider reads):

* `hive`: transactional (ACID) tables, written by Trino the way the provider reads them;
* `iceberg` (iceberg.catalog.type=hive_metastore): reads the Iceberg tables the provider
  publishes to a Hive catalog in the same metastore;
* `delta_lake` (delta.register-table-procedure.enabled=true): reads the provider's Delta
  output through `CALL delta_lake.system.register_table(...)`;
* `tpch`: generated data (the benchmark's lineitem).

The metastore: without --metastore, `start` starts (or reuses) one of its own with
scripts/metastore.py, in the home .cache/hive-metastore/trino, with `--no-transformer`, and `stop`
stops it again: also after a failed start, and after a restart of a Trino that died (the state
file, written before Trino is launched, records that this home started it, and a restart keeps
that). The transformer has to be off: Trino creates a table with the metastore's old
`create_table` call, which states no processor capabilities, and Hive 4's default metadata
transformer (MetastoreDefaultTransformer) refuses a transactional table from such a client
("Processor has no capabilities, cannot create an ACID table."), so `CREATE TABLE ... WITH
(transactional = true)` fails with the transformer on. The provider's own metastore tests keep
the transformer on (their client passes capabilities), hence the second home. --metastore URI
uses a metastore someone else runs (it must have the transformer off for ACID writes).

Java: Trino 476 needs Java 24 or later: $TRINO_JAVA_HOME, else
/usr/lib/jvm/temurin-25-jdk-amd64, else any /usr/lib/jvm/* of 24+. Logs: the home's server.log;
the fetch's .cache/trino/fetch.log. Standard library only; needs mvn on PATH.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

TRINO_VERSION = "476"
REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))  # scripts/: loaded by path too
from _maven import locked, log, maven, run_package, tail  # noqa: E402
from _servers import free_port, in_use, terminate  # noqa: E402

POM = REPO / "scripts" / "trino" / "pom.xml"
CACHE = REPO / ".cache" / "trino"
M2 = CACHE / "m2"
FETCH_LOG = CACHE / "fetch.log"
DEFAULT_HOME = CACHE / "run"
METASTORE_HOME = REPO / ".cache" / "hive-metastore" / "trino"
METASTORE_SCRIPT = REPO / "scripts" / "metastore.py"
STATE = "state.json"
HOST = "127.0.0.1"
MAIN_CLASS = "io.trino.server.TrinoServer"
PLUGINS = ("hive", "iceberg", "delta-lake", "tpch")
JAVA_CANDIDATES = ("/usr/lib/jvm/temurin-25-jdk-amd64",)


def fail(msg: str, logfile: Path | None = None) -> None:
    if logfile is not None:
        log(f"--- last lines of {logfile} ---\n{tail(logfile, 60)}\n---")
    log(f"trino: {msg}")
    sys.exit(1)


# --------------------------------------------------------------------------------------------
# Fetch


def _server_root() -> Path:
    digest = hashlib.sha256(POM.read_bytes()).hexdigest()[:16]
    return CACHE / f"server-{digest}"


def _extract(tarball: Path, root: Path) -> None:
    """lib/, bin/launcher.properties and the used plugins of the tarball into root.

    The tarball stores a jar that several plugins share once and the others as hard links to
    it, sometimes to a plugin left out here. tarfile's own extraction of such a link seeks
    back in the gzip stream for its target (decompressing from the start again: an hour for
    this tarball), so this reads the stream twice, forwards only: the member list, then the
    files kept and the link targets they need (those outside the selection into a stash that
    is removed after), linking each kept hard link to its target at the end."""
    prefix = f"trino-server-{TRINO_VERSION}/"
    keep = ("lib/", "bin/launcher.properties", *(f"plugin/{p}/" for p in PLUGINS))

    def kept(name: str) -> bool:
        return name.startswith(prefix) and name[len(prefix) :].startswith(keep)

    with tarfile.open(tarball, "r|gz") as archive:
        links = {m.name: m.linkname for m in archive if m.islnk()}
    targets = {links[name] for name in links if kept(name)}
    stash = root / ".link-targets"
    with tarfile.open(tarball, "r|gz") as archive:
        for member in archive:
            if member.isfile() and (kept(member.name) or member.name in targets):
                where = root if kept(member.name) else stash
                archive.extract(member, where, filter="data")
            elif member.isdir() and kept(member.name):
                archive.extract(member, root, filter="data")
    for name, target in links.items():
        if kept(name):
            source = (root if kept(target) else stash) / target
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            os.link(source, root / name)
    shutil.rmtree(stash, ignore_errors=True)


def fetch() -> tuple[Path, float]:
    """The server's folder (trino-server-476 with lib/ and plugin/), fetched once per pom."""
    root = _server_root()
    server = root / f"trino-server-{TRINO_VERSION}"
    stamp = root / "fetched"
    with locked(CACHE / "fetch.lock"):
        if stamp.is_file():
            return server, 0.0
        mvn = maven()
        if mvn is None:
            fail("mvn (Maven) is not on PATH; install it (Debian: apt-get install maven)")
        log(
            f"trino: fetching Trino server {TRINO_VERSION} through Maven (first use: about "
            f"800 MB; log: {FETCH_LOG})"
        )
        t0 = time.monotonic()
        rc, cmd = run_package(mvn, POM, M2, root, FETCH_LOG)
        tarball = root / f"trino-server-{TRINO_VERSION}.tar.gz"
        if rc != 0 or not tarball.is_file():
            fail(f"Maven fetch failed (exit {rc}): {cmd}", FETCH_LOG)
        log(f"trino: extracting lib/ and the plugins {', '.join(PLUGINS)}")
        _extract(tarball, root)
        tarball.unlink()  # the Maven repository keeps its own copy
        if not (server / "lib" / f"io.trino_trino-main-{TRINO_VERSION}.jar").stat().st_size:
            fail(f"{server}: the extracted jars are empty")
        stamp.write_text(f"{POM} {time.strftime('%Y-%m-%d %H:%M:%S')}\n")
        for old in CACHE.glob("server-*"):
            if old != root and not in_use(old):
                shutil.rmtree(old, ignore_errors=True)
        return server, time.monotonic() - t0


def _java_major(java: Path) -> int:
    try:
        out = subprocess.run(
            [str(java), "-version"], capture_output=True, text=True, timeout=60
        ).stderr
    except (OSError, subprocess.TimeoutExpired):
        return 0
    found = re.search(r'version "(\d+)', out)
    return int(found.group(1)) if found else 0


def java_bin() -> str:
    """A java of version 24 or later (Trino 476's minimum)."""
    homes = [os.environ.get("TRINO_JAVA_HOME"), *JAVA_CANDIDATES]
    homes += sorted(str(p) for p in Path("/usr/lib/jvm").glob("*") if p.is_dir())
    for home in homes:
        if home and (Path(home) / "bin" / "java").is_file():
            java = Path(home) / "bin" / "java"
            if _java_major(java) >= 24:
                return str(java)
    fail("no Java 24+ found (set TRINO_JAVA_HOME; Trino 476 does not run on Java 17)")
    return ""


# --------------------------------------------------------------------------------------------
# Configuration


def _props(values: dict[str, str]) -> str:
    return "".join(f"{k}={v}\n" for k, v in values.items())


def write_conf(home: Path, server: Path, port: int, metastore_uri: str) -> Path:
    etc = home / "etc"
    catalogs = etc / "catalog"
    catalogs.mkdir(parents=True, exist_ok=True)
    # Trino's legacy Hadoop file system, whose file:// is the plain local folder. The native
    # local file system (fs.native-local.enabled) names its files local:///..., and a DELETE on
    # a table located at file:/... then fails ("file 'local:///t/delta_1_1_0000/bucket_00000'
    # does not start with directory 'file:/t'"); a local:// location is one fsspec cannot open.
    local_fs = {"fs.hadoop.enabled": "true"}
    metastore = {"hive.metastore.uri": metastore_uri}
    (etc / "config.properties").write_text(
        _props(
            {
                "node.environment": "test",
                "node.id": str(uuid.uuid5(uuid.NAMESPACE_URL, str(home))),
                "node.bind-ip": HOST,
                "node.internal-address": HOST,
                "coordinator": "true",
                "node-scheduler.include-coordinator": "true",
                "http-server.http.port": str(port),
                "discovery.uri": f"http://{HOST}:{port}",
                "plugin.dir": str(server / "plugin"),
                "catalog.config-dir": str(catalogs),
                "query.max-memory": "1500MB",
                "query.max-memory-per-node": "1500MB",
                # a small test node: few threads, no spilling, no history kept
                "task.concurrency": "2",
                "task.max-worker-threads": "4",
                "query.max-history": "20",
                "log.path": str(home / "var" / "log" / "server.log"),
            }
        )
    )
    (etc / "log.properties").write_text("io.trino=INFO\n")
    (catalogs / "hive.properties").write_text(
        _props(
            {
                "connector.name": "hive",
                **metastore,
                **local_fs,
                # no file-listing cache, no metastore cache: the tests change tables
                "hive.metastore-cache-ttl": "0s",
                "hive.file-status-cache-expire-time": "0s",
                # timestamp(6) columns, the provider's unit (Trino's default is milliseconds)
                "hive.timestamp-precision": "MICROSECONDS",
            }
        )
    )
    (catalogs / "iceberg.properties").write_text(
        _props(
            {
                "connector.name": "iceberg",
                "iceberg.catalog.type": "hive_metastore",
                **metastore,
                **local_fs,
            }
        )  # fmt: skip
    )
    (catalogs / "delta_lake.properties").write_text(
        _props(
            {
                "connector.name": "delta_lake",
                **metastore,
                **local_fs,
                "delta.register-table-procedure.enabled": "true",
                "delta.metastore.store-table-metadata": "false",
            }
        )
    )
    (catalogs / "tpch.properties").write_text(_props({"connector.name": "tpch"}))
    return etc


def java_cmd(server: Path, etc: Path, home: Path, xmx: str) -> list[str]:
    return [
        java_bin(),
        "-server",
        f"-Xmx{xmx}",
        "-XX:+UseG1GC",
        "-XX:+ExplicitGCInvokesConcurrent",
        "-XX:+ExitOnOutOfMemoryError",
        "-XX:-OmitStackTraceInFastThrow",
        "-XX:ReservedCodeCacheSize=256M",
        "-XX:PerMethodRecompilationCutoff=10000",
        "-XX:PerBytecodeRecompilationCutoff=10000",
        "-Djdk.attach.allowAttachSelf=true",
        "-Djdk.nio.maxCachedBufferSize=2000000",
        "-XX:+EnableDynamicAgentLoading",
        "-Dfile.encoding=UTF-8",
        "-Djava.net.preferIPv4Stack=true",
        f"-Dconfig={etc / 'config.properties'}",
        f"-Dlog.levels-file={etc / 'log.properties'}",
        f"-Dtrino.home.marker={home}",
        "-cp",
        str(server / "lib" / "*"),
        MAIN_CLASS,
    ]


# --------------------------------------------------------------------------------------------
# The server's HTTP API (standard library)


def _get_json(url: str, timeout: float = 5.0) -> dict:
    with urllib.request.urlopen(url, timeout=timeout) as reply:  # noqa: S310 (127.0.0.1)
        return json.loads(reply.read())


def query(url: str, sql: str, timeout: float = 120.0) -> list[list]:
    """Runs ``sql`` through Trino's REST protocol; returns the rows, raises on a query error."""
    request = urllib.request.Request(
        f"{url}/v1/statement", data=sql.encode(), headers={"X-Trino-User": "acid"}
    )
    deadline = time.monotonic() + timeout
    rows: list[list] = []
    with urllib.request.urlopen(request, timeout=timeout) as reply:  # noqa: S310
        body = json.loads(reply.read())
    while True:
        if "error" in body:
            raise RuntimeError(body["error"].get("message", body["error"]))
        rows.extend(body.get("data") or [])
        next_uri = body.get("nextUri")
        if not next_uri:
            return rows
        if time.monotonic() > deadline:
            raise TimeoutError(f"query did not finish within {timeout:.0f}s: {sql}")
        body = _get_json(next_uri, timeout=timeout)


def wait_ready(proc: subprocess.Popen, url: str, timeout: float, logfile: Path) -> list[str]:
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            fail(f"Trino exited with code {proc.returncode} while starting", logfile)
        try:
            if not _get_json(f"{url}/v1/info").get("starting", True):
                # "Started" comes before the node manager counts this node as active: until
                # then, a query with a distributed stage fails with "nodes is empty" (an INSERT)
                # or "No nodes available to run query", while SHOW CATALOGS, which runs on the
                # coordinator alone, already answers. Ready is when the node manager lists
                # this node as active and a scan runs on it.
                active = "SELECT count(*) FROM system.runtime.nodes WHERE state = 'active'"
                if query(url, active)[0][0] >= 1:
                    query(url, "SELECT count(*) FROM tpch.tiny.nation")
                    return sorted(r[0] for r in query(url, "SHOW CATALOGS"))
        except (OSError, ValueError, RuntimeError) as e:
            last = e
        time.sleep(0.5)
    terminate(proc.pid)
    fail(f"Trino did not answer on {url} within {timeout:.0f}s ({last})", logfile)
    return []


# --------------------------------------------------------------------------------------------
# State and processes


def read_state(home: Path) -> dict | None:
    try:
        return json.loads((home / STATE).read_text())
    except (OSError, ValueError):
        return None


def ours(pid: int, home: Path) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return MAIN_CLASS.encode() in cmdline and f"-Dtrino.home.marker={home}".encode() in cmdline


def _metastore(command: str, timeout: float) -> subprocess.CompletedProcess:
    args = [sys.executable, str(METASTORE_SCRIPT), command, "--home", str(METASTORE_HOME)]
    if command == "start":
        args.append("--no-transformer")
    return subprocess.run(
        args, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
    )


def own_metastore(timeout: float) -> tuple[str, bool]:
    """The URI of this script's metastore (transformer off), and whether it was started now."""
    done = _metastore("start", timeout)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines or not lines[-1].startswith("thrift://"):
        fail(f"scripts/metastore.py start failed:\n{done.stdout}{done.stderr}")
    return lines[-1], not any("already running" in line for line in lines)


def _write_state(home: Path, state: dict) -> None:
    (home / STATE).write_text(json.dumps(state, indent=2) + "\n")


def cmd_start(args: argparse.Namespace) -> int:
    home: Path = args.home
    t0 = time.monotonic()
    home.mkdir(parents=True, exist_ok=True)
    with locked(home / "start.lock"):
        state = read_state(home)
        if state and ours(state["pid"], home):
            try:
                query(state["url"], "SELECT 1")
            except Exception as e:  # running but not answering: replace it
                log(f"trino: pid {state['pid']} does not answer ({e}); restarting it")
                terminate(state["pid"])
            else:
                print(f"trino already running (pid {state['pid']}), reused")
                print(state["url"], flush=True)
                return 0
        # A metastore an earlier start of this home started (and whose Trino failed, was
        # killed or stopped answering) stays this home's to stop, though it is reused now.
        inherited = bool(state and state.get("own_metastore") and state.get("started_metastore"))
        (home / STATE).unlink(missing_ok=True)

        server, fetch_s = fetch()
        started_metastore = False
        if args.metastore:
            metastore_uri = args.metastore
        else:
            metastore_uri, started_metastore = own_metastore(args.timeout)
            started_metastore = started_metastore or inherited
        # Recorded before anything else can fail: `stop` after a failed start then stops the
        # metastore this start started (and a Trino still starting).
        state = {
            "pid": 0,
            "metastore": metastore_uri,
            "own_metastore": not args.metastore,
            "started_metastore": started_metastore,
            "trino_version": TRINO_VERSION,
        }
        _write_state(home, state)
        port = args.port or free_port()
        etc = write_conf(home, server, port, metastore_uri)
        logfile = home / "server.log"
        url = f"http://{HOST}:{port}"
        t_launch = time.monotonic()
        with open(logfile, "a") as out:
            out.write(f"\n===== {time.strftime('%Y-%m-%d %H:%M:%S')} start on {url}\n")
            out.flush()
            proc = subprocess.Popen(
                java_cmd(server, etc, home, args.xmx),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=home,
                start_new_session=True,
            )
        state.update(
            pid=proc.pid,
            port=port,
            url=url,
            log=str(logfile),
            started_at=time.strftime("%Y-%m-%dT%H:%M:%S"),
        )
        _write_state(home, state)
        catalogs = wait_ready(proc, url, args.timeout, logfile)  # a failure keeps the state
        print(
            f"trino started in {time.monotonic() - t0:.1f}s (fetch {fetch_s:.1f}s, server "
            f"{time.monotonic() - t_launch:.1f}s; pid {proc.pid}, catalogs {catalogs}, "
            f"metastore {metastore_uri}, log {logfile})"
        )
        print(url, flush=True)
        return 0


def cmd_stop(args: argparse.Namespace) -> int:
    home: Path = args.home
    state = read_state(home)
    if not state:
        print(f"no trino recorded in {home}")
        return 0
    if state["pid"] and ours(state["pid"], home):
        terminate(state["pid"], args.timeout)
        print(f"stopped trino pid {state['pid']} ({state['url']})")
    elif state["pid"]:
        print(f"the trino pid {state['pid']} was not running")
    else:
        print("no trino was launched (its start failed before)")
    (home / STATE).unlink(missing_ok=True)
    if state.get("own_metastore") and state.get("started_metastore"):
        done = _metastore("stop", args.timeout)
        print(done.stdout.strip())
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    state = read_state(args.home)
    if not state:
        print(f"no trino recorded in {args.home}")
        return 3
    if not state["pid"]:
        print(f"no trino was launched: its last start failed ({args.home / STATE})")
        return 3
    if not ours(state["pid"], args.home):
        print(f"recorded pid {state['pid']} is not running ({args.home / STATE} is stale)")
        return 3
    try:
        catalogs = sorted(r[0] for r in query(state["url"], "SHOW CATALOGS"))
    except Exception as e:
        print(f"pid {state['pid']} runs but does not answer on {state['url']}: {e}")
        return 1
    print(f"running: pid {state['pid']}, catalogs {catalogs}, log {state['log']}")
    print(state["url"])
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["start", "stop", "status"])
    parser.add_argument(
        "--home",
        type=lambda p: Path(p).resolve(),
        default=DEFAULT_HOME,
        help=f"state, config, data, logs (default {DEFAULT_HOME})",
    )
    parser.add_argument("--port", type=int, default=0, help="port (default: a free one)")
    parser.add_argument("--metastore", help="thrift:// URI (default: start one, see above)")
    parser.add_argument("--xmx", default=os.environ.get("TRINO_XMX", "3G"), help="heap size")
    parser.add_argument(
        "--timeout", type=float, default=600.0, help="seconds to wait for start-up / a stop"
    )
    args = parser.parse_args(argv)
    return {"start": cmd_start, "stop": cmd_stop, "status": cmd_status}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
