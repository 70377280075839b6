#!/usr/bin/env python3
"""A real Apache Hive standalone metastore (HMS 4.0.1) on 127.0.0.1 for tests and CI.

    python scripts/metastore.py start [--port N] [--home DIR] [--no-transformer]
                                      [--auth none|config --user U --password P]
                                      [--auth kerberos [--principal P --keytab FILE]]
                                      [--notifications [--event-ttl SECONDS]]
    python scripts/metastore.py status [--home DIR] [--user U --password P]
    python scripts/metastore.py stop [--home DIR]

`start` fetches the metastore and the few other jars it needs through Maven on first use
(scripts/metastore/pom.xml, into .cache/hive-metastore/ with its own Maven local repository),
creates an embedded Derby database in the home and initialises its schema with Hive's schema tool
(once per database), then runs the metastore's Java process in the background and waits until it
answers a real Thrift call (get_all_databases). Its last line of stdout is the URI,
thrift://127.0.0.1:PORT. A metastore already running from the same home is reused. Logs are in the
home (metastore.log, schematool.log; the fetch's in .cache/hive-metastore/fetch.log).

`status` exits 0 when the home's metastore runs and answers, 1 when it runs but does not answer
(or refuses --user/--password), 3 when none runs. `stop` sends SIGTERM, then SIGKILL after
--timeout seconds, and removes the state file.

`--auth config` makes the metastore check a SASL PLAIN user name and password on its binary Thrift
transport (Hive's metastore.authentication=CONFIG); give such an instance its own --home.

`--auth kerberos` turns SASL on with Kerberos (GSSAPI): hadoop.security.authentication=kerberos,
metastore.sasl.enabled, the metastore's own --principal and --keytab (by default the realm's
that scripts/kdc.py made: hive/127.0.0.1@ACID.TEST and .cache/kdc/run/hive.keytab, with that
realm's krb5.conf, or $KRB5_CONFIG, given to Java). Its home defaults to
.cache/hive-metastore/kerberos; it prints the client's exports before the URI.

`--notifications` turns the notification log on: the project's own listener
(scripts/metastore/NotificationLogListener.java, compiled with javac on first use against the
fetched jars and cached beside them; the Java file says why it is ours) is named in
metastore.transactional.event.listeners and writes CREATE_TABLE, ALTER_TABLE, DROP_TABLE,
ADD_PARTITION, OPEN_TXN, ALLOC_WRITE_ID, COMMIT_TXN and ABORT_TXN events in Hive 4.0.1's JSON.
Its home defaults to .cache/hive-metastore/notifications. The listener removes old events as
DbNotificationListener's cleaner does: those older than a day, looked for every two hours, or with
`--event-ttl SECONDS` those older than that, looked for every second (for tests of a reader whose
cursor the log has left behind; give such an instance its own --home).

`--no-transformer` turns off Hive 4's default metadata transformer, which refuses a transactional
table from a client that states no processor capabilities (the old create_table call) with
"Processor has no capabilities, cannot create an ACID table."; create_table_req with
processorCapabilities (HIVEFULLACIDWRITE, ...) works either way.

Standard library only (Python 3.10+); needs java (17) and mvn on PATH (or JAVA_HOME / MVN).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path
from xml.sax.saxutils import escape

HIVE_VERSION = "4.0.1"
REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))  # scripts/: loaded by path too
from _maven import locked, log, maven, run_package, tail  # noqa: E402
from _metastore_listener import CLASS as LISTENER_CLASS  # noqa: E402
from _metastore_listener import compile_listener  # noqa: E402
from _servers import free_port, in_use, terminate  # noqa: E402

POM = REPO / "scripts" / "metastore" / "pom.xml"
CACHE = REPO / ".cache" / "hive-metastore"
M2 = CACHE / "m2"
FETCH_LOG = CACHE / "fetch.log"
DEFAULT_HOME = CACHE / "run"
KERBEROS_HOME = CACHE / "kerberos"
NOTIFICATIONS_HOME = CACHE / "notifications"
KDC_HOME = REPO / ".cache" / "kdc" / "run"  # scripts/kdc.py's default realm
STATE = "state.json"
HOST = "127.0.0.1"
KERBEROS_PROBE = "\0gssapi"  # the probe's "user" for a Kerberos metastore
MAIN_CLASS = "org.apache.hadoop.hive.metastore.HiveMetaStore"
SCHEMA_TOOL = "org.apache.hadoop.hive.metastore.tools.schematool.MetastoreSchemaTool"
XMX = os.environ.get("METASTORE_XMX", "512m")
# Java 17 needs no --add-opens here: 4.0.1 initialises its schema, starts and serves databases,
# ACID tables, partitions and transactions without an InaccessibleObjectException. Serial GC and C1
# only keep a small test server small (about 260 MB resident) and quick to start.
JVM_FLAGS = [
    f"-Xmx{XMX}",
    "-Xss512k",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-Djava.net.preferIPv4Stack=true",
]


def fail(msg: str, logfile: Path | None = None) -> None:
    if logfile is not None:
        log(f"--- last lines of {logfile} ---\n{tail(logfile, 60)}\n---")
    log(f"metastore: {msg}")
    sys.exit(1)


# --------------------------------------------------------------------------------------------
# Fetch (Maven)


class Jars:
    """One fetch of the pom: the unpacked metastore and the extra jars, in a folder named after
    the pom's digest, so that changing the pom never pulls jars from under a running metastore."""

    def __init__(self) -> None:
        self.digest = hashlib.sha256(POM.read_bytes()).hexdigest()[:16]
        self.root = CACHE / f"jars-{self.digest}"
        self.dist = self.root / f"apache-hive-metastore-{HIVE_VERSION}-bin"
        self.extra = self.root / "extra-lib"
        self.stamp = self.root / "fetched"
        self.listener: Path | None = None  # the compiled notification-log listener, if used

    def complete(self) -> bool:
        return self.stamp.is_file()

    def classpath(self, conf: Path) -> str:
        # The metastore's own lib/ first (its jackson, guava, jetty...), then the extra jars.
        jars = [str(self.dist / "lib" / "*"), str(self.extra / "*")]
        return os.pathsep.join([str(conf), *jars, *([str(self.listener)] if self.listener else [])])

    def with_listener(self) -> Jars:
        """Compiles the notification-log listener against these jars once (cached with them)."""
        with locked(CACHE / "fetch.lock"):
            try:
                jars = os.pathsep.join([str(self.dist / "lib" / "*"), str(self.extra / "*")])
                self.listener = compile_listener(self.root, jars, CACHE / "javac.log")
            except RuntimeError as e:
                fail(f"the notification-log listener: {e}", CACHE / "javac.log")
        return self


def fetch() -> tuple[Jars, float]:
    """Runs Maven once per version of the pom; returns the jars and the seconds spent."""
    jars = Jars()
    with locked(CACHE / "fetch.lock"):
        if jars.complete():
            return jars, 0.0
        mvn = maven()
        if mvn is None:
            fail("mvn (Maven) is not on PATH; install it (Debian: apt-get install maven)")
        log(
            f"metastore: fetching Hive metastore {HIVE_VERSION} and the jars it needs through "
            f"Maven (first use: about 130 MB; log: {FETCH_LOG})"
        )
        t0 = time.monotonic()
        rc, cmd = run_package(mvn, POM, M2, jars.root, FETCH_LOG)
        server_jar = jars.dist / "lib" / f"hive-standalone-metastore-server-{HIVE_VERSION}.jar"
        if rc != 0 or not server_jar.is_file():
            fail(f"Maven fetch failed (exit {rc}): {cmd}", FETCH_LOG)
        jars.stamp.write_text(f"{POM} sha256 {jars.digest}...\n")
        # Earlier fetches (an older pom) go, unless a running metastore still uses them.
        for old in CACHE.glob("jars-*"):
            if old != jars.root and not in_use(old):
                shutil.rmtree(old, ignore_errors=True)
        return jars, time.monotonic() - t0


def java_bin() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").is_file():
        return str(Path(home) / "bin" / "java")
    found = shutil.which("java")
    if not found:
        fail("java is not on PATH (set JAVA_HOME or install a JDK 17)")
    return found


# --------------------------------------------------------------------------------------------
# Configuration


def site_xml(
    home: Path,
    port: int,
    auth: str,
    user: str | None,
    password: str | None,
    transformer: bool,
    principal: str | None = None,
    keytab: str | None = None,
    notifications: bool = False,
    event_ttl: int | None = None,
) -> str:
    db = home / "metastore_db"
    props = {
        "javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={db};create=true",
        "javax.jdo.option.ConnectionDriverName": "org.apache.derby.jdbc.EmbeddedDriver",
        "javax.jdo.option.ConnectionUserName": "APP",
        "javax.jdo.option.ConnectionPassword": "mine",
        "metastore.warehouse.dir": (home / "warehouse").as_uri(),
        "metastore.warehouse.external.dir": (home / "warehouse-external").as_uri(),
        "metastore.thrift.bind.host": HOST,
        "metastore.thrift.port": str(port),
        "metastore.thrift.uris": f"thrift://{HOST}:{port}",
        # The schema is made by the schema tool before the first start; the server checks it.
        "metastore.schema.verification": "true",
        "datanucleus.schema.autoCreateAll": "false",
        # Transactions: nothing times our open ones out during a run (no housekeeping threads,
        # and a long timeout should they be turned on), no compactor.
        "metastore.txn.timeout": "3600s",
        "metastore.housekeeping.threads.on": "false",
        "metastore.compactor.initiator.on": "false",
        "metastore.compactor.cleaner.on": "false",
        "metastore.compactor.worker.threads": "0",
        "metastore.acidmetrics.thread.on": "false",
        "metastore.acidmetrics.ext.on": "false",
        # Standalone's key for this one is literally "metastore.metastore.event.db.notification.api
        # .auth"; the Hive name is the one people know, and MetastoreConf reads both.
        "hive.metastore.event.db.notification.api.auth": "false",
        "metastore.metastore.event.db.notification.api.auth": "false",
        # Start-up and footprint: no always-on background tasks, no metrics, few Thrift threads
        # (the default minimum is 200 threads).
        "metastore.task.threads.always": "org.apache.hadoop.hive.metastore.events.EventCleanerTask",
        "metastore.event.db.listener.timetolive": "86400s",
        "metastore.stats.autogather": "false",
        "metastore.metrics.enabled": "false",
        "metastore.server.min.threads": "8",
        "metastore.server.max.threads": "200",
        "metastore.expression.proxy": (
            "org.apache.hadoop.hive.metastore.DefaultPartitionExpressionProxy"
        ),
        "metastore.authorization.storage.checks": "false",
    }
    if auth == "config":
        props.update(
            {
                "metastore.authentication": "CONFIG",
                "metastore.authentication.config.username": user or "",
                "metastore.authentication.config.password": password or "",
                # Password authentication refuses to start with set_ugi on (its default is true).
                "metastore.execute.setugi": "false",
                "metastore.sasl.enabled": "false",
                "metastore.thrift.framed.transport.enabled": "false",
            }
        )
    elif auth == "kerberos":
        props.update(
            {
                "metastore.sasl.enabled": "true",
                "metastore.kerberos.principal": principal or "",
                "metastore.kerberos.keytab.file": keytab or "",
                "hadoop.security.authentication": "kerberos",
                "metastore.thrift.framed.transport.enabled": "false",
                # the HDFS its tables may live on (scripts/hdfs.py --kerberos, same realm)
                "dfs.namenode.kerberos.principal": os.environ.get(
                    "ACID_HDFS_PRINCIPAL", "hdfs/127.0.0.1@ACID.TEST"
                ),
            }
        )
    else:
        props["metastore.authentication"] = "NOSASL"
    if notifications:
        props["metastore.transactional.event.listeners"] = LISTENER_CLASS
        # The listener's cleaner (as DbNotificationListener's) starts at once; with --event-ttl
        # it keeps events that many seconds and looks every second (Hive's default: 2 hours).
        props["metastore.event.db.listener.clean.startup.wait.interval"] = "0s"
        if event_ttl is not None:
            props["metastore.event.db.listener.timetolive"] = f"{event_ttl}s"
            props["metastore.event.db.listener.clean.interval"] = "1s"
    if not transformer:
        # Blank (after trim) means none: HMSHandler only loads a transformer for a non-blank name.
        props["metastore.metadata.transformer.class"] = " "
    body = "\n".join(
        f"  <property><name>{escape(k)}</name><value>{escape(v)}</value></property>"
        for k, v in props.items()
    )
    return f'<?xml version="1.0"?>\n<configuration>\n{body}\n</configuration>\n'


LOG4J2 = """\
status = WARN
name = MetastoreTest
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{ISO8601} %5p [%t] %c{2}: %m%n
rootLogger.level = INFO
rootLogger.appenderRef.console.ref = console
logger.dn.name = DataNucleus
logger.dn.level = ERROR
logger.ds.name = Datastore
logger.ds.level = ERROR
logger.hadoop.name = org.apache.hadoop.util.NativeCodeLoader
logger.hadoop.level = ERROR
"""


def write_conf(home: Path, port: int, args: argparse.Namespace) -> Path:
    conf = home / "conf"
    conf.mkdir(parents=True, exist_ok=True)
    xml = site_xml(
        home, port, args.auth, args.user, args.password, not args.no_transformer,
        args.principal, args.keytab, args.notifications, args.event_ttl,
    )  # fmt: skip
    (conf / "metastore-site.xml").write_text(xml)
    # Hadoop's UserGroupInformation reads core-site.xml, not the metastore's file.
    security = "kerberos" if args.auth == "kerberos" else "simple"
    (conf / "core-site.xml").write_text(
        '<?xml version="1.0"?>\n<configuration>\n  <property><name>hadoop.security.'
        f"authentication</name><value>{security}</value></property>\n</configuration>\n"
    )
    (conf / "metastore-log4j2.properties").write_text(LOG4J2)
    os.chmod(conf / "metastore-site.xml", 0o600)
    return conf


def java_cmd(jars: Jars, conf: Path, home: Path, main: str, *args: str) -> list[str]:
    krb5 = os.environ.get("ACID_METASTORE_KRB5_CONF")
    return [
        java_bin(),
        *JVM_FLAGS,
        *([f"-Djava.security.krb5.conf={krb5}"] if krb5 else []),
        f"-Dlog4j.configurationFile={conf / 'metastore-log4j2.properties'}",
        f"-Dderby.stream.error.file={home / 'derby.log'}",
        f"-Dmetastore.home.marker={home}",
        "-cp",
        jars.classpath(conf),
        main,
        *args,
    ]


def init_schema(jars: Jars, home: Path, conf: Path) -> float:
    """Initialises the Derby schema once per database; returns the seconds spent."""
    db = home / "metastore_db"
    marker = home / "schema.initialised"
    if marker.is_file() and db.is_dir():
        return 0.0
    shutil.rmtree(db, ignore_errors=True)  # a half-made database from an interrupted init
    logfile = home / "schematool.log"
    log(f"metastore: initialising the Derby schema with Hive's schema tool (log: {logfile})")
    t0 = time.monotonic()
    # The tool finds its SQL scripts (scripts/metastore/upgrade/derby/...) under METASTORE_HOME.
    env = dict(os.environ, METASTORE_HOME=str(jars.dist))
    cmd = java_cmd(jars, conf, home, SCHEMA_TOOL, "-dbType", "derby", "-initSchema")
    with open(logfile, "w") as out:
        rc = subprocess.call(
            cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=home, env=env
        )
    if rc != 0:
        shutil.rmtree(db, ignore_errors=True)
        fail(f"schema tool failed (exit {rc})", logfile)
    marker.write_text(f"Hive {HIVE_VERSION} schema, {time.strftime('%Y-%m-%d %H:%M:%S')}\n")
    return time.monotonic() - t0


# --------------------------------------------------------------------------------------------
# A real Thrift call with the standard library: get_all_databases over TBinaryProtocol, raw or
# inside SASL PLAIN (the Thrift SASL framing thrift_sasl speaks).


def _thrift_get_all_databases() -> bytes:
    name = b"get_all_databases"
    # strict binary message header: version|CALL, name, seqid; then an empty args struct (STOP).
    return struct.pack(">iI", -2147418111, len(name)) + name + struct.pack(">i", 1) + b"\x00"


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed by the metastore")
        buf += chunk
    return buf


def _parse_reply(data: bytes) -> list[str]:
    (version,) = struct.unpack(">I", data[:4])
    if version & 0xFFFF0000 != 0x80010000:
        raise ValueError("not a strict binary Thrift reply")
    mtype = version & 0xFF
    (nlen,) = struct.unpack(">i", data[4:8])
    pos = 8 + nlen + 4
    if mtype == 3:
        raise RuntimeError("metastore answered with a Thrift exception")
    ftype, fid = data[pos], struct.unpack(">h", data[pos + 1 : pos + 3])[0]
    if ftype != 15 or fid != 0:  # list, field 0 (success)
        raise RuntimeError(f"unexpected reply field {fid} of type {ftype}")
    pos += 3
    count = struct.unpack(">i", data[pos + 1 : pos + 5])[0]  # after the element type
    pos += 5
    names = []
    for _ in range(count):
        (slen,) = struct.unpack(">i", data[pos : pos + 4])
        names.append(data[pos + 4 : pos + 4 + slen].decode())
        pos += 4 + slen
    return names


def _read_raw_reply(sock: socket.socket) -> bytes:
    # Reads one reply to get_all_databases without knowing its length up front.
    head = _recv_exact(sock, 8)
    (nlen,) = struct.unpack(">i", head[4:8])
    data = head + _recv_exact(sock, nlen + 4)
    ftype = _recv_exact(sock, 1)
    data += ftype
    if ftype == b"\x00":
        return data
    data += _recv_exact(sock, 2)
    if ftype[0] != 15:  # an exception struct: enough to say it failed
        return data
    lh = _recv_exact(sock, 5)
    data += lh
    for _ in range(struct.unpack(">i", lh[1:5])[0]):
        sl = _recv_exact(sock, 4)
        data += sl + _recv_exact(sock, struct.unpack(">i", sl)[0])
    return data + _recv_exact(sock, 1)


def probe_gssapi(port: int, timeout: float = 5.0) -> str:
    """A SASL GSSAPI start with an empty token: a Kerberos metastore answers it with a SASL
    status (BAD or ERROR, the token being empty) and its words. Raises when it does not."""
    with socket.create_connection((HOST, port), timeout=timeout) as sock:
        mech = b"GSSAPI"
        sock.sendall(b"\x01" + struct.pack(">i", len(mech)) + mech + b"\x02" + struct.pack(">i", 0))
        status = _recv_exact(sock, 1)[0]
        payload = _recv_exact(sock, struct.unpack(">i", _recv_exact(sock, 4))[0])
        if status not in (2, 3, 4):
            raise RuntimeError(f"unexpected SASL status {status}")
        return payload.decode(errors="replace")


def probe(
    port: int, user: str | None = None, password: str | None = None, timeout: float = 5.0
) -> list[str]:
    """get_all_databases on 127.0.0.1:port; SASL PLAIN when a user is given. Raises on failure."""
    if user == KERBEROS_PROBE:
        return [f"(SASL GSSAPI answers: {probe_gssapi(port, timeout)[:60]})"]
    with socket.create_connection((HOST, port), timeout=timeout) as sock:
        if user is None:
            sock.sendall(_thrift_get_all_databases())
            return _parse_reply(_read_raw_reply(sock))
        # SASL: START(1)+"PLAIN", then OK(2)+"\0user\0password"; the server answers COMPLETE(5).
        mech = b"PLAIN"
        cred = b"\x00" + user.encode() + b"\x00" + (password or "").encode()
        sock.sendall(
            b"\x01"
            + struct.pack(">i", len(mech))
            + mech
            + b"\x02"
            + struct.pack(">i", len(cred))
            + cred
        )
        status = _recv_exact(sock, 1)[0]
        payload = _recv_exact(sock, struct.unpack(">i", _recv_exact(sock, 4))[0])
        if status != 5:
            raise PermissionError(f"SASL status {status}: {payload.decode(errors='replace')}")
        msg = _thrift_get_all_databases()
        sock.sendall(struct.pack(">i", len(msg)) + msg)
        frame = _recv_exact(sock, struct.unpack(">i", _recv_exact(sock, 4))[0])
        return _parse_reply(frame)


# --------------------------------------------------------------------------------------------
# State and processes


def read_state(home: Path) -> dict | None:
    try:
        return json.loads((home / STATE).read_text())
    except (OSError, ValueError):
        return None


def ours(pid: int, home: Path) -> bool:
    """Whether pid is alive and is the metastore JVM of this home (not a reused pid)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        try:
            os.kill(pid, 0)
        except OSError:
            return False
        return True  # no /proc: trust the pid
    return MAIN_CLASS.encode() in cmdline and f"-Dmetastore.home.marker={home}".encode() in cmdline


def wait_ready(
    proc: subprocess.Popen,
    port: int,
    user: str | None,
    password: str | None,
    timeout: float,
    logfile: Path,
) -> list[str]:
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            fail(f"the metastore exited with code {proc.returncode} while starting", logfile)
        try:
            return probe(port, user, password, timeout=5.0)
        except PermissionError:
            raise
        except (OSError, ValueError, RuntimeError, IndexError, struct.error) as e:
            last = e
        time.sleep(0.25)
    terminate(proc.pid)
    fail(f"the metastore did not answer on {HOST}:{port} within {timeout:.0f}s ({last})", logfile)
    return []


def profile(args: argparse.Namespace) -> dict:
    """What a running metastore must match to be reused (the password is not recorded)."""
    return {
        "auth": args.auth,
        "user": args.user if args.auth == "config" else None,
        "transformer": not args.no_transformer,
        **({"principal": args.principal} if args.auth == "kerberos" else {}),
        **({"notifications": True} if args.notifications else {}),
        **({"event_ttl": args.event_ttl} if args.event_ttl is not None else {}),
    }


def kerberos_defaults(args: argparse.Namespace) -> None:
    """The principal, keytab and krb5.conf of scripts/kdc.py's realm unless given."""
    if args.auth != "kerberos":
        return
    args.principal = args.principal or "hive/127.0.0.1@ACID.TEST"
    args.keytab = str(Path(args.keytab or KDC_HOME / "hive.keytab").resolve())
    krb5 = os.environ.get("KRB5_CONFIG") or str(KDC_HOME / "krb5.conf")
    if not Path(args.keytab).is_file() or not Path(krb5).is_file():
        fail(
            f"--auth kerberos: keytab {args.keytab} or krb5.conf {krb5} is missing; start the "
            "KDC first (make kdc, or python scripts/kdc.py start)"
        )
    os.environ["ACID_METASTORE_KRB5_CONF"] = krb5
    os.environ["KRB5_CONFIG"] = krb5
    args.home = own_home(args)


def kerberos_exports(args: argparse.Namespace) -> None:
    if args.auth == "kerberos":
        print(f"export KRB5_CONFIG={os.environ['KRB5_CONFIG']}")
        print(f"# metastore principal {args.principal} (keytab {args.keytab}); a client uses "
              "--metastore-auth GSSAPI --kerberos-principal P --kerberos-keytab FILE")  # fmt: skip


def cmd_start(args: argparse.Namespace) -> int:
    kerberos_defaults(args)
    args.home = own_home(args)
    home: Path = args.home
    user = args.user if args.auth == "config" else None
    if args.auth == "kerberos":
        user = KERBEROS_PROBE
    password = args.password if args.auth == "config" else None
    if args.auth == "config" and not (args.user and args.password is not None):
        fail("--auth config needs --user and --password")
    if args.event_ttl is not None and not args.notifications:
        fail("--event-ttl needs --notifications (the listener's cleaner removes the events)")
    t0 = time.monotonic()
    home.mkdir(parents=True, exist_ok=True)
    with locked(home / "start.lock"):
        state = read_state(home)
        if state and ours(state["pid"], home):
            recorded = state.get("profile") or {  # a state file from before profiles
                "auth": state.get("auth", "none"),
                "user": state.get("user"),
                "transformer": True,
            }
            if recorded != profile(args):
                fail(
                    f"a metastore with other settings ({recorded}) already runs from "
                    f"{home} (pid {state['pid']}); stop it first or use another --home"
                )
            try:
                probe(state["port"], user, password)
            except PermissionError as e:
                fail(f"the running metastore refused these credentials ({e})")
            except Exception as e:  # running but not answering: replace it
                log(f"metastore: pid {state['pid']} does not answer ({e}); restarting it")
                terminate(state["pid"])
            else:
                if args.port and args.port != state["port"]:
                    log(
                        f"metastore: reusing the one already on port {state['port']} "
                        f"(not {args.port}); stop it first to move it"
                    )
                print(
                    f"metastore already running (pid {state['pid']}), reused in "
                    f"{time.monotonic() - t0:.1f}s"
                )
                kerberos_exports(args)
                print(state["uri"], flush=True)
                return 0
        (home / STATE).unlink(missing_ok=True)

        jars, fetch_s = fetch()
        if args.notifications:
            jars.with_listener()
        port = args.port or free_port()
        conf = write_conf(home, port, args)
        (home / "warehouse").mkdir(exist_ok=True)
        (home / "warehouse-external").mkdir(exist_ok=True)
        schema_s = init_schema(jars, home, conf)

        logfile = home / "metastore.log"
        cmd = java_cmd(jars, conf, home, MAIN_CLASS)
        t_launch = time.monotonic()
        with open(logfile, "a") as out:
            out.write(f"\n===== {time.strftime('%Y-%m-%d %H:%M:%S')} start on {HOST}:{port}\n")
            out.flush()
            proc = subprocess.Popen(
                cmd,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=home,
                start_new_session=True,
            )
        uri = f"thrift://{HOST}:{port}"
        (home / STATE).write_text(
            json.dumps(
                {
                    "pid": proc.pid,
                    "port": port,
                    "uri": uri,
                    "home": str(home),
                    "auth": args.auth,
                    "user": user,
                    "profile": profile(args),
                    "hive_version": HIVE_VERSION,
                    "log": str(logfile),
                    "started_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
                },
                indent=2,
            )
            + "\n"
        )
        try:
            dbs = wait_ready(proc, port, user, password, args.timeout, logfile)
        except PermissionError as e:
            terminate(proc.pid)
            (home / STATE).unlink(missing_ok=True)
            fail(f"the new metastore refused our own credentials: {e}", logfile)
        except SystemExit:
            (home / STATE).unlink(missing_ok=True)
            raise
        total = time.monotonic() - t0
        print(
            f"metastore started in {total:.1f}s (fetch {fetch_s:.1f}s, schema {schema_s:.1f}s, "
            f"server {time.monotonic() - t_launch:.1f}s; pid {proc.pid}, databases {dbs}, "
            f"log {logfile})"
        )
        kerberos_exports(args)
        print(uri, flush=True)
        return 0


def own_home(args: argparse.Namespace) -> Path:
    """A Kerberos or notification-log metastore has a home of its own unless one is given."""
    if args.home == DEFAULT_HOME and args.auth == "kerberos":
        return KERBEROS_HOME
    if args.home == DEFAULT_HOME and args.notifications:
        return NOTIFICATIONS_HOME
    return args.home


def cmd_stop(args: argparse.Namespace) -> int:
    home: Path = own_home(args)
    state = read_state(home)
    if not state:
        print(f"no metastore recorded in {home}")
        return 0
    pid = state["pid"]
    if ours(pid, home):
        terminate(pid, args.timeout)
        print(f"stopped the metastore pid {pid} ({state['uri']})")
    else:
        print(f"the metastore pid {pid} was not running")
    (home / STATE).unlink(missing_ok=True)
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    home: Path = own_home(args)
    state = read_state(home)
    if not state:
        print(f"no metastore recorded in {home}")
        return 3
    if not ours(state["pid"], home):
        print(f"recorded pid {state['pid']} is not running ({home / STATE} is stale)")
        return 3
    user = args.user if state.get("auth") == "config" else None
    if state.get("auth") == "kerberos":
        user = KERBEROS_PROBE
    try:
        if user is None and state.get("auth") == "config":
            socket.create_connection((HOST, state["port"]), timeout=5).close()
            answer = "accepts connections (give --user/--password to call it)"
        else:
            answer = f"answers, databases {probe(state['port'], user, args.password)}"
    except Exception as e:
        print(f"pid {state['pid']} runs but does not answer on port {state['port']}: {e}")
        return 1
    print(f"running: pid {state['pid']}, {answer}, auth {state.get('auth')}, log {state['log']}")
    print(state["uri"])
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["start", "stop", "status"])
    parser.add_argument(
        "--home",
        type=lambda p: Path(p).resolve(),
        default=DEFAULT_HOME,
        help=f"state, config, Derby db, warehouse, logs (default {DEFAULT_HOME})",
    )
    parser.add_argument("--port", type=int, default=0, help="port (default: a free one)")
    parser.add_argument("--auth", choices=["none", "config", "kerberos"], default="none")
    parser.add_argument("--principal", help="--auth kerberos: the metastore's own principal")
    parser.add_argument("--keytab", help="--auth kerberos: the keytab of --principal")
    parser.add_argument(
        "--no-transformer",
        action="store_true",
        help="no metadata transformer: the old create_table may then create ACID tables",
    )
    parser.add_argument(
        "--notifications",
        action="store_true",
        help="write the notification log (the project's listener; see the Java file)",
    )
    parser.add_argument(
        "--event-ttl",
        type=int,
        metavar="SECONDS",
        help="--notifications: remove events older than this, looking every second (default: "
        "one day, looking every two hours)",
    )
    parser.add_argument("--user")
    parser.add_argument("--password")
    parser.add_argument(
        "--timeout", type=float, default=180.0, help="seconds to wait for start-up / for a stop"
    )
    args = parser.parse_args(argv)
    return {"start": cmd_start, "stop": cmd_stop, "status": cmd_status}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
