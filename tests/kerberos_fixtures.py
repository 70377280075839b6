"""A real MIT KDC, a Kerberos-secured Hive Metastore and HDFS (unsecured, with Kerberos, and an
HA pair of namenodes), each started once per session by the project's scripts (scripts/kdc.py,
scripts/metastore.py --auth kerberos, scripts/hdfs.py [--kerberos | --ha]) and stopped at the
end if this session started it. Nothing is skipped: a server that cannot start fails its
fixture with the script's output.

The realm is ACID.TEST on 127.0.0.1; the provider's user ``acid@ACID.TEST`` has tickets that
live two minutes (scripts/kdc.py --client-lifetime), so renewals happen within a test.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
START_TIMEOUT = 1200  # the first start fetches jars through Maven
REALM = "ACID.TEST"


@dataclass(frozen=True)
class Realm:
    """The test realm: its krb5.conf and the keytabs scripts/kdc.py made."""

    home: Path
    krb5_conf: str
    principal: str = f"acid@{REALM}"

    @property
    def keytab(self) -> str:
        return str(self.home / "acid.keytab")

    @property
    def intruder_keytab(self) -> str:
        return str(self.home / "intruder.keytab")


@dataclass(frozen=True)
class Hdfs:
    """A running HDFS: its ``hdfs://`` URI and the namenode mapping for it."""

    uri: str
    namenodes: str
    kerberos: bool

    def folder(self) -> str:
        """A fresh folder below /warehouse (mode 777)."""
        return f"{self.uri}/warehouse/t_{uuid.uuid4().hex[:8]}"


def _run(script: str, *args: str, timeout: float = START_TIMEOUT) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(REPO / "scripts" / script), *args],
        cwd=REPO, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def _started(script: str, *args: str) -> subprocess.CompletedProcess:
    t0 = time.monotonic()
    done = _run(script, "start", *args)
    if done.returncode != 0 or not done.stdout.strip():
        pytest.fail(
            f"scripts/{script} start {' '.join(args)} failed (exit {done.returncode}) after "
            f"{time.monotonic() - t0:.0f}s\n--- stdout ---\n{done.stdout}\n--- stderr ---\n"
            f"{done.stderr}",
            pytrace=False,
        )
    return done


def _exports(stdout: str) -> dict[str, str]:
    return dict(
        line[len("export ") :].split("=", 1)
        for line in stdout.splitlines()
        if line.startswith("export ")
    )


@pytest.fixture(scope="session")
def kdc() -> Iterator[Realm]:
    """The realm's KDC; KRB5_CONFIG points at its krb5.conf for the whole session."""
    done = _started("kdc.py")
    conf = _exports(done.stdout)["KRB5_CONFIG"]
    os.environ["KRB5_CONFIG"] = conf
    yield Realm(Path(conf).parent, conf)
    if "already running" not in done.stdout:
        _run("kdc.py", "stop", timeout=60)


@pytest.fixture(scope="session")
def kerberos_metastore_uri(kdc: Realm) -> Iterator[str]:
    """``thrift://127.0.0.1:PORT`` of a metastore with SASL GSSAPI (hive/127.0.0.1@ACID.TEST)."""
    done = _started("metastore.py", "--auth", "kerberos")
    yield done.stdout.strip().splitlines()[-1]
    if "already running" not in done.stdout:
        _run("metastore.py", "stop", "--auth", "kerberos", timeout=120)


def _hdfs(*args: str) -> Iterator[Hdfs]:
    done = _started("hdfs.py", *args)
    uri = done.stdout.strip().splitlines()[-1]
    yield Hdfs(uri, _exports(done.stdout)["ACID_HDFS_NAMENODES"], "--kerberos" in args)
    if "already running" not in done.stdout:
        _run("hdfs.py", "stop", *args, timeout=120)


@pytest.fixture(scope="session")
def hdfs_kerberos(kdc: Realm) -> Iterator[Hdfs]:
    """An HDFS secured with Kerberos (SPNEGO on WebHDFS) in the test realm."""
    yield from _hdfs("--kerberos")


@pytest.fixture(scope="session")
def hdfs_plain() -> Iterator[Hdfs]:
    """An unsecured HDFS (simple authentication: the user name is trusted)."""
    yield from _hdfs()


@pytest.fixture(scope="session")
def hdfs_ha() -> Iterator[Hdfs]:
    """An unsecured HA pair of namenodes, the nameservice ns1 (hdfs://ns1); either one may be
    the active one (``failover_hdfs`` swaps them)."""
    yield from _hdfs("--ha")


def failover_hdfs() -> str:
    """Make the HA pair's active namenode the standby and the other one active."""
    done = _run("hdfs.py", "failover", "--ha", timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout.strip()
