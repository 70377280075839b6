#!/usr/bin/env python3
"""A real MIT Kerberos KDC on 127.0.0.1 for tests and CI, its realm made in a folder.

    python scripts/kdc.py start [--home DIR] [--client-lifetime SECONDS]
    python scripts/kdc.py status [--home DIR]
    python scripts/kdc.py stop [--home DIR]

`start` creates the realm ACID.TEST in the home (default .cache/kdc/run) once: its kdc.conf, its
own krb5.conf (the one KRB5_CONFIG must name: no DNS lookups, no reverse DNS, no host name
canonicalisation, so that 127.0.0.1 stays 127.0.0.1 in service principal names), the database
(kdb5_util create) and these principals with random keys, each written to a keytab (kadmin.local
addprinc -randkey, ktadd):

    hive/127.0.0.1@ACID.TEST                         hive.keytab   (the metastore)
    hdfs/127.0.0.1@ACID.TEST, HTTP/127.0.0.1@...     hdfs.keytab   (NameNode, DataNode, SPNEGO)
    acid@ACID.TEST                                   acid.keytab   (the provider's user)
    intruder@ACID.TEST                               intruder.keytab (a user HDFS gives nothing)

The user principals' tickets live --client-lifetime seconds (120 by default: short, so that the
tests see their logins renewed); the services' 24 hours. Then it runs krb5kdc (Debian's
krb5-kdc; `make kdc` installs it when absent) in the background on a free port and waits until
it issues a ticket. It prints the variables a user exports, then `KRB5_CONFIG=...` last. A KDC
already running from the same home is reused. `stop` ends it (SIGTERM) and keeps the realm.

Standard library only; needs kdb5_util, kadmin.local, krb5kdc and kinit on PATH or in /usr/sbin.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_HOME = REPO / ".cache" / "kdc" / "run"
REALM = "ACID.TEST"
HOST = "127.0.0.1"
sys.path.insert(0, str(Path(__file__).resolve().parent))  # scripts/: loaded by path too
from _servers import free_port  # noqa: E402

STATE = "state.json"
#: principal -> keytab file (in the home)
PRINCIPALS = {
    f"hive/{HOST}": "hive.keytab",
    f"hdfs/{HOST}": "hdfs.keytab",
    f"HTTP/{HOST}": "hdfs.keytab",
    "acid": "acid.keytab",
    "intruder": "intruder.keytab",
}
USERS = ("acid", "intruder")
SERVICE_LIFETIME = "24 hours"


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def fail(msg: str) -> None:
    log(f"kdc: {msg}")
    sys.exit(1)


def tool(name: str) -> str:
    found = shutil.which(name) or next(
        (str(p) for d in ("/usr/sbin", "/usr/bin") if (p := Path(d) / name).is_file()), None
    )
    if not found:
        fail(f"{name} is not installed: run `make kdc` (Debian's krb5-kdc, krb5-admin-server, "
             "krb5-user)")  # fmt: skip
    return found  # type: ignore[return-value]


def krb5_conf(home: Path, port: int) -> str:
    return f"""[libdefaults]
    default_realm = {REALM}
    dns_lookup_kdc = false
    dns_lookup_realm = false
    dns_canonicalize_hostname = false
    rdns = false
    ignore_acceptor_hostname = true
    udp_preference_limit = 1
    forwardable = true
    default_ccache_name = FILE:{home}/ccache-default

[realms]
    {REALM} = {{
        kdc = {HOST}:{port}
        admin_server = {HOST}:{port}
    }}

[domain_realm]
    {HOST} = {REALM}
    localhost = {REALM}
"""


def kdc_conf(home: Path, port: int) -> str:
    return f"""[kdcdefaults]
    kdc_listen = {HOST}:{port}
    kdc_tcp_listen = {HOST}:{port}

[realms]
    {REALM} = {{
        database_name = {home}/principal
        key_stash_file = {home}/stash
        acl_file = {home}/kadm5.acl
        kdc_listen = {HOST}:{port}
        kdc_tcp_listen = {HOST}:{port}
        max_life = {SERVICE_LIFETIME}
        max_renewable_life = 7 days
        supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal
    }}

[logging]
    kdc = FILE:{home}/kdc.log
"""


def environment(home: Path) -> dict[str, str]:
    return dict(
        os.environ,
        KRB5_CONFIG=str(home / "krb5.conf"),
        KRB5_KDC_PROFILE=str(home / "kdc.conf"),
        KRB5CCNAME=f"FILE:{home}/ccache-default",
    )


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
    return b"krb5kdc" in cmdline


def run(cmd: list[str], env: dict[str, str], what: str) -> str:
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        fail(f"{what} failed (exit {done.returncode}): {done.stderr.strip() or done.stdout}")
    return done.stdout


def create_realm(home: Path, port: int, client_lifetime: int) -> None:
    """The database, principals and keytabs, once per home (the port goes in the configs)."""
    env = environment(home)
    (home / "krb5.conf").write_text(krb5_conf(home, port))
    (home / "kdc.conf").write_text(kdc_conf(home, port))
    if (home / "realm.created").is_file():
        return
    for stale in home.glob("principal*"):
        stale.unlink()
    for keytab in set(PRINCIPALS.values()):
        (home / keytab).unlink(missing_ok=True)
    (home / "kadm5.acl").write_text(f"*/admin@{REALM} *\n")
    master = os.urandom(16).hex()
    run([tool("kdb5_util"), "create", "-s", "-r", REALM, "-P", master], env, "kdb5_util create")
    kadmin = tool("kadmin.local")
    for name, keytab in PRINCIPALS.items():
        life = f"{client_lifetime} seconds" if name in USERS else SERVICE_LIFETIME
        query = f'addprinc -randkey -maxlife "{life}" -maxrenewlife "7 days" {name}@{REALM}'
        run([kadmin, "-r", REALM, "-q", query], env, f"addprinc {name}")
        run([kadmin, "-r", REALM, "-q", f"ktadd -k {home / keytab} -norandkey {name}@{REALM}"],
            env, f"ktadd {name}")  # fmt: skip
    for keytab in set(PRINCIPALS.values()):
        os.chmod(home / keytab, 0o600)
    (home / "realm.created").write_text(f"{REALM}, users' tickets {client_lifetime}s\n")


def check_ticket(home: Path) -> None:
    """kinit of the provider's user from its keytab, into a throw-away cache."""
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(environment(home), KRB5CCNAME=f"FILE:{tmp}/cc")
        done = subprocess.run(
            [tool("kinit"), "-k", "-t", str(home / "acid.keytab"), f"acid@{REALM}"],
            env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=10,
        )  # fmt: skip
    if done.returncode != 0:
        raise OSError(done.stderr.strip() or f"kinit exit {done.returncode}")


def exports(home: Path, state: dict) -> list[str]:
    return [
        f"export ACID_KERBEROS_PRINCIPAL=acid@{REALM}",
        f"export ACID_KERBEROS_KEYTAB={home / 'acid.keytab'}",
        f"# the metastore's: hive/{HOST}@{REALM} in {home / 'hive.keytab'}; HDFS's: "
        f"hdfs/{HOST}@{REALM} and HTTP/{HOST}@{REALM} in {home / 'hdfs.keytab'}",
        f"# KDC pid {state['pid']} on {HOST}:{state['port']}, log {home / 'kdc.log'}",
        f"export KRB5_CONFIG={home / 'krb5.conf'}",
    ]


def cmd_start(args: argparse.Namespace) -> int:
    home: Path = args.home
    home.mkdir(parents=True, exist_ok=True)
    state = read_state(home)
    if state and alive(state["pid"]):
        try:
            check_ticket(home)
        except (OSError, subprocess.TimeoutExpired) as exc:
            log(f"kdc: pid {state['pid']} does not issue tickets ({exc}); restarting it")
            os.kill(state["pid"], signal.SIGTERM)
        else:
            print(f"kdc already running (pid {state['pid']}), reused")
            print("\n".join(exports(home, state)), flush=True)
            return 0
    port = args.port or free_port()
    create_realm(home, port, args.client_lifetime)
    logfile = home / "krb5kdc.out"
    with open(logfile, "a") as out:
        proc = subprocess.Popen(
            [tool("krb5kdc"), "-n", "-r", REALM],
            env=environment(home), stdout=out, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
    state = {"pid": proc.pid, "port": port, "realm": REALM, "home": str(home),
             "krb5_conf": str(home / "krb5.conf")}  # fmt: skip
    (home / STATE).write_text(json.dumps(state, indent=2) + "\n")
    deadline = time.monotonic() + args.timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            (home / STATE).unlink(missing_ok=True)
            fail(f"krb5kdc exited with code {proc.returncode}; see {logfile} and {home}/kdc.log")
        try:
            check_ticket(home)
            break
        except (OSError, subprocess.TimeoutExpired) as exc:
            last = exc
            time.sleep(0.2)
    else:
        proc.terminate()
        (home / STATE).unlink(missing_ok=True)
        fail(f"the KDC did not issue a ticket on {HOST}:{port} within {args.timeout:.0f}s: {last}")
    print(f"kdc started: realm {REALM} on {HOST}:{port} (pid {proc.pid})")
    print("\n".join(exports(home, state)), flush=True)
    return 0


def cmd_stop(args: argparse.Namespace) -> int:
    state = read_state(args.home)
    if not state:
        print(f"no KDC recorded in {args.home}")
        return 0
    if alive(state["pid"]):
        os.kill(state["pid"], signal.SIGTERM)
        for _ in range(50):
            if not alive(state["pid"]):
                break
            time.sleep(0.1)
        print(f"stopped the KDC pid {state['pid']}")
    (args.home / STATE).unlink(missing_ok=True)
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    state = read_state(args.home)
    if not state or not alive(state["pid"]):
        print(f"no KDC runs from {args.home}")
        return 3
    print(f"running: pid {state['pid']} on {HOST}:{state['port']}, realm {REALM}")
    print(f"export KRB5_CONFIG={args.home / 'krb5.conf'}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["start", "stop", "status"])
    parser.add_argument(
        "--home", type=lambda p: Path(p).resolve(), default=DEFAULT_HOME,
        help=f"the realm's database, configs, keytabs and logs (default {DEFAULT_HOME})",
    )  # fmt: skip
    parser.add_argument("--port", type=int, default=0, help="port (default: a free one)")
    parser.add_argument(
        "--client-lifetime", type=int, default=120,
        help="seconds a user's ticket lives (only when the realm is first made)",
    )  # fmt: skip
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds to wait at start")
    args = parser.parse_args(argv)
    return {"start": cmd_start, "stop": cmd_stop, "status": cmd_status}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
