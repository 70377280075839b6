#!/usr/bin/env python3
"""A real HDFS (Hadoop 3.3.6's MiniDFSCluster: a NameNode and a DataNode) on 127.0.0.1.

    python scripts/hdfs.py start [--home DIR] [--kerberos [--kdc-home DIR] | --ha]
    python scripts/hdfs.py status [--home DIR] [--kerberos | --ha]
    python scripts/hdfs.py stop [--home DIR] [--kerberos | --ha]
    python scripts/hdfs.py failover [--home DIR] --ha

`start` fetches the minicluster's jars through Maven on first use (scripts/hdfs/pom.xml, into
.cache/hdfs/ with its own Maven local repository), then runs scripts/hdfs/MiniHdfs.java (Java's
single-file launcher) in the background: a freshly formatted cluster with WebHDFS on, /warehouse
(mode 777) and /restricted (mode 700, the superuser's). `--kerberos` secures it with the realm
scripts/kdc.py made: hdfs/127.0.0.1@ACID.TEST for the NameNode and DataNode, SPNEGO as
HTTP/127.0.0.1@ACID.TEST on the HTTP endpoints, block access tokens; its home defaults to
.cache/hdfs/kerberos. It prints what a client exports (the namenode mapping for
$ACID_HDFS_NAMENODES), then the filesystem's URI hdfs://127.0.0.1:PORT last. One already running
from the same home is reused. Logs: the home's hdfs.log. Standard library only.

`--ha` starts an HA pair instead (unsecured; home .cache/hdfs/ha): the nameservice ns1 with two
namenodes, the first active, and one DataNode; the mapping lists both (hdfs://ns1 last).
`failover` makes the active one the standby and the other one active, and prints which is
active now.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # scripts/: loaded by path too
from _maven import locked, log, maven, run_package, tail  # noqa: E402
from _servers import free_port  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
POM = REPO / "scripts" / "hdfs" / "pom.xml"
LAUNCHER = REPO / "scripts" / "hdfs" / "MiniHdfs.java"
CACHE = REPO / ".cache" / "hdfs"
M2 = CACHE / "m2"
FETCH_LOG = CACHE / "fetch.log"
KDC_HOME = REPO / ".cache" / "kdc" / "run"
HOST = "127.0.0.1"
STATE = "state.json"
PRINCIPAL = f"hdfs/{HOST}@ACID.TEST"
SPNEGO = f"HTTP/{HOST}@ACID.TEST"
NAMESERVICE = "ns1"
LOG4J = """log4j.rootLogger=WARN,stderr
log4j.appender.stderr=org.apache.log4j.ConsoleAppender
log4j.appender.stderr.target=System.err
log4j.appender.stderr.layout=org.apache.log4j.PatternLayout
log4j.appender.stderr.layout.ConversionPattern=%d{ISO8601} %p %c{2}: %m%n
"""


def fail(msg: str, logfile: Path | None = None) -> None:
    if logfile is not None:
        log(f"--- last lines of {logfile} ---\n{tail(logfile, 40)}\n---")
    log(f"hdfs: {msg}")
    sys.exit(1)


def fetch() -> Path:
    """The folder of the minicluster's jars (fetched through Maven once per pom version)."""
    root = CACHE / f"jars-{hashlib.sha256(POM.read_bytes()).hexdigest()[:16]}"
    with locked(CACHE / "fetch.lock"):
        if (root / "fetched").is_file():
            return root / "lib"
        mvn = maven()
        if mvn is None:
            fail("mvn (Maven) is not on PATH; install it (Debian: apt-get install maven)")
        log(f"hdfs: fetching Hadoop's minicluster jars through Maven (about 90 MB; {FETCH_LOG})")
        rc, cmd = run_package(mvn, POM, M2, root, FETCH_LOG)
        if rc != 0 or not list((root / "lib").glob("hadoop-client-minicluster-*.jar")):
            fail(f"Maven fetch failed (exit {rc}): {cmd}", FETCH_LOG)
        (root / "fetched").write_text(f"{POM}\n")
        for old in CACHE.glob("jars-*"):
            if old != root:
                shutil.rmtree(old, ignore_errors=True)
    return root / "lib"


def read_state(home: Path) -> dict | None:
    try:
        return json.loads((home / STATE).read_text())
    except (OSError, ValueError):
        return None


def alive(pid: int, home: Path) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"MiniHdfs.java" in cmdline and str(home).encode() in cmdline


def answers(state: dict) -> bool:
    """The NameNode's HTTP endpoint answers (401 counts: SPNEGO asks for a login)."""
    url = f"http://{HOST}:{state['http_port']}/webhdfs/v1/?op=GETFILESTATUS&user.name=probe"
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return answer.status == 200
    except urllib.error.HTTPError as exc:
        return exc.code in (401, 403)
    except OSError:
        return False


def home_of(args: argparse.Namespace) -> Path:
    if args.home:
        return args.home
    return CACHE / ("kerberos" if args.kerberos else "ha" if args.ha else "run")


def exports(state: dict) -> list[str]:
    if state.get("ha"):
        both = ",".join(f"http://{HOST}:{state[k]}" for k in ("http_port", "standby_http_port"))
        return [f"export ACID_HDFS_NAMENODES={NAMESERVICE}={both}",
                f"# namenodes nn1 {HOST}:{state['rpc_port']} (active at start) and nn2 "
                f"{HOST}:{state['standby_rpc_port']}; pid {state['pid']}, log {state['log']}",
                f"hdfs://{NAMESERVICE}"]  # fmt: skip
    lines = [f"export ACID_HDFS_NAMENODES={HOST}:{state['rpc_port']}=http://{HOST}:"
             f"{state['http_port']}"]  # fmt: skip
    if state.get("kerberos"):
        lines += [
            "export ACID_HDFS_KERBEROS=1",
            f"export KRB5_CONFIG={state['krb5_conf']}",
            f"# NameNode/DataNode {PRINCIPAL}, SPNEGO {SPNEGO}",
        ]
    lines.append(f"# pid {state['pid']}, log {state['log']}")
    lines.append(f"hdfs://{HOST}:{state['rpc_port']}")
    return lines


def cmd_start(args: argparse.Namespace) -> int:
    home = home_of(args)
    home.mkdir(parents=True, exist_ok=True)
    with locked(home / "start.lock"):
        state = read_state(home)
        if state and alive(state["pid"], home) and answers(state):
            if bool(state.get("kerberos")) != bool(args.kerberos) or bool(state.get("ha")) != bool(
                args.ha
            ):
                fail(f"another kind of HDFS runs from {home}; stop it")
            print(f"hdfs already running (pid {state['pid']}), reused")
            print("\n".join(exports(state)), flush=True)
            return 0
        if state and alive(state["pid"], home):
            os.killpg(state["pid"], signal.SIGTERM)
        lib = fetch()
        shutil.rmtree(home / "data", ignore_errors=True)
        (home / "log4j.properties").write_text(LOG4J)
        rpc, http = args.port or free_port(), free_port()
        java = [shutil.which("java") or "java", "-Xmx512m", "-Xss512k", "-XX:+UseSerialGC",
                "-XX:TieredStopAtLevel=1", "-Djava.net.preferIPv4Stack=true",
                "--add-opens", "java.base/java.lang=ALL-UNNAMED",
                f"-Dlog4j.configuration=file:{home / 'log4j.properties'}"]  # fmt: skip
        extra: list[str] = []
        krb5 = None
        if args.kerberos:
            kdc_home = args.kdc_home or KDC_HOME
            krb5 = os.environ.get("KRB5_CONFIG") or str(kdc_home / "krb5.conf")
            keytab = kdc_home / "hdfs.keytab"
            if not keytab.is_file() or not Path(krb5).is_file():
                fail(f"--kerberos: {keytab} or {krb5} is missing; start the KDC first (make kdc)")
            java.append(f"-Djava.security.krb5.conf={krb5}")
            extra = [PRINCIPAL, str(keytab), SPNEGO]
        logfile = home / "hdfs.log"
        out = home / "ready.txt"
        out.unlink(missing_ok=True)
        ports = [str(rpc), str(http)]
        if args.ha:
            ports = ["ha", *ports, str(free_port()), str(free_port())]
        cmd = [*java, "-cp", str(lib / "*"), str(LAUNCHER), str(home), *ports, *extra]
        with open(logfile, "a") as err, open(out, "w") as ready:
            err.write(f"\n===== {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(cmd)}\n")
            err.flush()
            proc = subprocess.Popen(cmd, stdout=ready, stderr=err, stdin=subprocess.DEVNULL,
                                    start_new_session=True)  # fmt: skip
        deadline = time.monotonic() + args.timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                fail(f"the minicluster exited with code {proc.returncode} while starting", logfile)
            words = out.read_text().split()
            if words[:1] == ["ready"]:
                break
            time.sleep(0.3)
        else:
            os.killpg(proc.pid, signal.SIGKILL)
            fail(f"the minicluster did not start within {args.timeout:.0f}s", logfile)
        state = {"pid": proc.pid, "rpc_port": int(words[1]), "http_port": int(words[2]),
                 "datanode_http_port": int(words[3]), "kerberos": bool(args.kerberos),
                 "krb5_conf": krb5, "home": str(home), "log": str(logfile)}  # fmt: skip
        if args.ha:
            state.update(ha=True, standby_rpc_port=int(words[4]), standby_http_port=int(words[5]))
        (home / STATE).write_text(json.dumps(state, indent=2) + "\n")
        print(f"hdfs started (pid {proc.pid}, WebHDFS http://{HOST}:{state['http_port']})")
        print("\n".join(exports(state)), flush=True)
        return 0


def cmd_stop(args: argparse.Namespace) -> int:
    home = home_of(args)
    state = read_state(home)
    if not state:
        print(f"no HDFS recorded in {home}")
        return 0
    if alive(state["pid"], home):
        os.killpg(state["pid"], signal.SIGTERM)
        for _ in range(100):
            if not alive(state["pid"], home):
                break
            time.sleep(0.1)
        else:
            os.killpg(state["pid"], signal.SIGKILL)
        print(f"stopped the HDFS pid {state['pid']}")
    (home / STATE).unlink(missing_ok=True)
    return 0


def cmd_failover(args: argparse.Namespace) -> int:
    home = home_of(args)
    state = read_state(home)
    if not state or not state.get("ha") or not alive(state["pid"], home):
        fail(f"no HA pair runs from {home}: start one with --ha")
    done = home / "failover.done"
    done.unlink(missing_ok=True)
    (home / "failover.request").write_text("failover\n")
    deadline = time.monotonic() + args.timeout
    while not done.is_file() or not done.read_text().strip():
        if time.monotonic() > deadline:
            fail(f"no failover within {args.timeout:.0f}s", Path(state["log"]))
        time.sleep(0.2)
    print(f"failed over: namenode {done.read_text().split()[1]} is active")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    home = home_of(args)
    state = read_state(home)
    if not state or not alive(state["pid"], home):
        print(f"no HDFS runs from {home}")
        return 3
    if not answers(state):
        print(f"pid {state['pid']} runs but WebHDFS does not answer")
        return 1
    print("\n".join(exports(state)))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["start", "stop", "status", "failover"])
    parser.add_argument("--home", type=lambda p: Path(p).resolve(), help="state, data, logs")
    parser.add_argument("--kerberos", action="store_true", help="secure it (SPNEGO, same KDC)")
    parser.add_argument("--kdc-home", type=lambda p: Path(p).resolve(), help="scripts/kdc.py's")
    parser.add_argument("--ha", action="store_true", help="an HA pair of namenodes (ns1)")
    parser.add_argument("--port", type=int, default=0, help="NameNode RPC port (default free)")
    parser.add_argument("--timeout", type=float, default=240.0, help="seconds to wait at start")
    args = parser.parse_args(argv)
    if args.ha and args.kerberos:
        parser.error("--ha runs unsecured: give --ha or --kerberos, not both")
    commands = {"start": cmd_start, "stop": cmd_stop, "status": cmd_status,
                "failover": cmd_failover}  # fmt: skip
    return commands[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
