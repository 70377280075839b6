"""Shared machinery of ``scripts/e2e.py`` and ``scripts/e2e_distributed.py``.

Starts Airflow 3 components (and, for the distributed run, PostgreSQL and Redis) as child
processes on 127.0.0.1, each in its own process group with its log in the run's temporary
folder; talks to the api-server's REST API; waits with bounded timeouts; checks what the runs
left behind. Everything started here is stopped by :meth:`Services.stop_all`, which the scripts
call from ``finally`` and ``atexit`` (and on SIGTERM/SIGHUP/Ctrl-C).

Only the standard library is imported at module level: Airflow imports this module in task
runners through ``[core] hostname_callable`` (see :func:`e2e_hostname`).
"""

from __future__ import annotations

import atexit
import ctypes
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
SCRIPTS = REPO / "scripts"
PROBE_DAGS = REPO / "tests" / "e2e_dags"
PROBE_DAG_ID = "acid_e2e_probe"
PROBE_SENSOR_TASK = "wait_for_delete_delta"
PROBE_MAPPED_TASK = "work"
TRIGGER_CLASSPATH = "airflow_provider_acid.triggers.acid.AcidDeltaTrigger"
#: the bin folder of the interpreter running the script (.venv/bin): airflow, celery live there
BIN = Path(sys.executable).parent
E2E_USER = "e2e"

_T0 = time.monotonic()


class E2EError(Exception):
    """A check or a wait failed; the message says which and why."""


def log(message: str) -> None:
    print(f"[e2e {time.monotonic() - _T0:6.1f}s] {message}", flush=True)


def elapsed() -> float:
    return time.monotonic() - _T0


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (the kernel's pick)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def e2e_hostname() -> str:
    """``[core] hostname_callable`` for the Celery workers of the distributed run.

    Both workers run on one machine, so Airflow's default (the FQDN) would record the same
    ``hostname`` for every task instance. Each worker gets ``ACID_E2E_HOSTNAME`` (its Celery
    node name, ``w1@<hostname>``), and Airflow records that instead.
    """
    return os.environ.get("ACID_E2E_HOSTNAME") or socket.getfqdn()


def wait_until(
    what: str,
    check: Callable[[], Any],
    timeout: float,
    interval: float = 1.0,
    alive: Callable[[], None] | None = None,
) -> Any:
    """Call ``check`` until it returns something truthy (returned) or ``timeout`` seconds pass.

    ``check`` may raise :class:`E2EError` to fail at once; ``alive`` is called between tries to
    fail fast when a component died. The timeout message names ``what`` and the last detail
    ``check`` gave (a ``(False, detail)`` return value).
    """
    deadline = time.monotonic() + timeout
    detail: Any = None
    while True:
        if alive is not None:
            alive()
        result = check()
        if isinstance(result, tuple) and len(result) == 2 and result[0] is False:
            detail = result[1]
        elif result:
            return result
        if time.monotonic() >= deadline:
            suffix = f" (last seen: {detail})" if detail is not None else ""
            raise E2EError(f"timed out after {timeout:.0f}s waiting for {what}{suffix}")
        time.sleep(interval)


# ------------------------------------------------------------------------------------------
# Processes
# ------------------------------------------------------------------------------------------

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """If the script itself is killed with SIGKILL, its direct children still get SIGTERM."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except OSError:
        pass


@dataclass
class Service:
    name: str
    process: subprocess.Popen
    log_path: Path
    stop_signal: int = signal.SIGTERM
    tier: int = 1  # stop order: higher tiers first (Airflow 1, the databases it uses 0)
    expected_exit: bool = False  # set once we stop it: until then, exiting is a failure

    @property
    def pgid(self) -> int:
        return self.process.pid  # start_new_session: the child leads its own process group


@dataclass
class Services:
    """The processes this run started, stopped in reverse order of start."""

    log_dir: Path
    services: dict[str, Service] = field(default_factory=dict)
    _stopped: bool = False

    def start(
        self,
        name: str,
        argv: Sequence[str],
        env: Mapping[str, str],
        *,
        stop_signal: int = signal.SIGTERM,
        tier: int = 1,
        cwd: Path | None = None,
    ) -> Service:
        log_path = self.log_dir / f"{name}.log"
        with open(log_path, "ab") as out:
            process = subprocess.Popen(
                list(argv),
                env=dict(env),
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # own session and process group: killed as a group
                preexec_fn=_die_with_parent,
            )
        service = Service(name, process, log_path, stop_signal, tier)
        self.services[name] = service
        log(f"started {name} (pid {process.pid}), log {log_path}")
        return service

    def check_alive(self) -> None:
        """Fail at once, with the end of its log, if a service exited."""
        for service in self.services.values():
            code = service.process.poll()
            if code is not None and not service.expected_exit:
                raise E2EError(
                    f"{service.name} exited with code {code}; end of {service.log_path}:\n"
                    + tail(service.log_path, 40)
                )

    def stop(self, name: str, timeout: float = 30.0) -> None:
        self.stop_many([name], timeout)

    def stop_many(self, names: Sequence[str], timeout: float = 30.0) -> None:
        """Signal every leader first, then wait for each: they shut down side by side."""
        services = [self.services[n] for n in names if n in self.services]
        for service in services:
            service.expected_exit = True
            _signal_leader(service)
        for service in services:
            _reap_group(service, timeout)
            log(f"stopped {service.name} (exit code {service.process.returncode})")

    def stop_all(self, timeout: float = 30.0) -> None:
        """Airflow (and Celery) first, then what they use (PostgreSQL, Redis)."""
        if self._stopped:
            return
        self._stopped = True
        for tier in sorted({s.tier for s in self.services.values()}, reverse=True):
            self.stop_many([n for n, s in self.services.items() if s.tier == tier], timeout)

    def tail_all(self, lines: int = 30) -> None:
        for service in self.services.values():
            print(f"\n===== last {lines} lines of {service.log_path} =====", flush=True)
            print(tail(service.log_path, lines), flush=True)

    def pids(self) -> dict[int, str]:
        """Every live process in our process groups (pid -> service name)."""
        groups = {s.pgid: s.name for s in self.services.values() if s.process.poll() is None}
        found: dict[int, str] = {}
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            pgid = int(stat.rsplit(")", 1)[1].split()[2])
            if pgid in groups:
                found[int(entry.name)] = groups[pgid]
        return found


def _kill_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _signal_leader(service: Service) -> None:
    """The stop signal goes to the group leader only: Celery's pool children or PostgreSQL's
    backends must hear it from their parent, not all at once."""
    if service.process.poll() is None:
        try:
            service.process.send_signal(service.stop_signal)
        except ProcessLookupError:
            pass


def _reap_group(service: Service, timeout: float) -> None:
    """Wait for the leader (SIGKILL to its group after ``timeout``); then SIGKILL whatever is
    left in the group (a serve-logs helper, an orphaned task runner)."""
    try:
        service.process.wait(timeout)
    except subprocess.TimeoutExpired:
        log(f"{service.name} did not stop within {timeout:.0f}s: SIGKILL")
        _kill_group(service.pgid, signal.SIGKILL)
        service.process.wait(10)
    _kill_group(service.pgid, signal.SIGKILL)


def tail(path: Path, lines: int) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        return f"(cannot read {path}: {exc})"
    return "\n".join(text.splitlines()[-lines:])


def run_command(
    name: str,
    argv: Sequence[str],
    env: Mapping[str, str] | None,
    log_dir: Path,
    timeout: float,
) -> str:
    """Run a one-shot command to completion, its output in ``log_dir/name.log``."""
    log_path = log_dir / f"{name}.log"
    log(f"running {name}: {' '.join(argv)}")
    with open(log_path, "ab") as out:
        process = subprocess.Popen(
            list(argv),
            env=dict(env) if env is not None else None,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
        try:
            code = process.wait(timeout)
        except subprocess.TimeoutExpired:
            _kill_group(process.pid, signal.SIGKILL)
            process.wait()
            raise E2EError(
                f"{name} took more than {timeout:.0f}s; end of {log_path}:\n{tail(log_path, 40)}"
            ) from None
        finally:
            _kill_group(process.pid, signal.SIGKILL)
    if code != 0:
        raise E2EError(
            f"{name} failed with exit code {code}; end of {log_path}:\n{tail(log_path, 40)}"
        )
    return log_path.read_text(errors="replace")


def install_signal_handlers() -> None:
    """SIGTERM and SIGHUP end the script like Ctrl-C does: through ``finally``, stopping all."""

    def handler(signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGHUP, handler)


def check_loopback_only(services: Services) -> None:
    """Every listening TCP socket of our processes is bound to 127.0.0.1 or ::1.

    Reads ``/proc``: socket inodes of each process (``/proc/PID/fd``) matched against the
    LISTEN entries of ``/proc/net/tcp`` and ``tcp6``. Processes we may not inspect (another
    user's, when not root) are skipped.
    """
    inodes: dict[str, str] = {}
    for pid, name in services.pids().items():
        try:
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    inodes[target[8:-1]] = f"{name} (pid {pid})"
        except OSError:
            continue
    loopback = {"0100007F", "00000000000000000000000001000000", "0000000000000000FFFF00000100007F"}
    listening, exposed = [], []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            parts = line.split()
            address, port_hex = parts[1].split(":")
            if parts[3] != "0A" or parts[9] not in inodes:  # 0A: LISTEN
                continue
            entry = f"{inodes[parts[9]]} on port {int(port_hex, 16)}"
            listening.append(entry)
            if address not in loopback:
                exposed.append(f"{entry} bound to {address}")
    if exposed:
        raise E2EError("servers listening beyond loopback: " + "; ".join(exposed))
    log(f"{len(listening)} listening socket(s), all on loopback: " + "; ".join(sorted(listening)))


# ------------------------------------------------------------------------------------------
# Airflow
# ------------------------------------------------------------------------------------------


@dataclass
class AirflowSetup:
    """Where and how this run's Airflow lives."""

    home: Path
    dags_folder: Path
    api_port: int
    password: str
    env: dict[str, str]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"


def airflow_setup(
    home: Path,
    dags_folder: Path,
    *,
    executor: str,
    sql_alchemy_conn: str,
    parallelism: int,
    extra_env: Mapping[str, str] = (),
) -> AirflowSetup:
    """The environment every Airflow process of the run shares.

    Inherited ``AIRFLOW__*`` settings are dropped so a developer's own configuration cannot
    leak in. The JWT secret must be one value for every component: the scheduler signs the
    task runners' tokens and the api-server's execution API checks them (otherwise tasks fail
    with "Signature verification failed").
    """
    from cryptography.fernet import Fernet  # an Airflow dependency; only the script needs it

    api_port = free_port()
    password = secrets.token_urlsafe(16)
    home.mkdir(parents=True, exist_ok=True)
    # SimpleAuthManager (Airflow 3's default) reads users from [core] simple_auth_manager_users
    # and their passwords from this JSON file, generating missing ones; we write ours first.
    passwords_file = home / "simple_auth_manager_passwords.json"
    passwords_file.write_text(json.dumps({E2E_USER: password}))
    passwords_file.chmod(0o600)

    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(dags_folder),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__EXECUTOR": executor,
            "AIRFLOW__CORE__PARALLELISM": str(parallelism),
            "AIRFLOW__CORE__FERNET_KEY": Fernet.generate_key().decode(),
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",  # unpaused through the API
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{api_port}/execution/",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{E2E_USER}:admin",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords_file),
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": sql_alchemy_conn,
            "AIRFLOW__API__HOST": "127.0.0.1",
            "AIRFLOW__API__PORT": str(api_port),
            "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{api_port}",
            "AIRFLOW__API__WORKERS": "1",
            "AIRFLOW__API__SECRET_KEY": secrets.token_urlsafe(32),
            "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_urlsafe(32),
            # The scheduler's and triggerer's log servers bind every interface: components run
            # with --skip-serve-logs, and the api-server reads the task logs from local files.
            "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
            "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port()),
            # Faster pick-up than the defaults, for a test that waits on every step.
            "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "2",
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "10",
            "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "10",
            "PYTHONUNBUFFERED": "1",
        }
    )
    env.update(dict(extra_env))
    return AirflowSetup(home, dags_folder, api_port, password, env)


def airflow(*args: str) -> list[str]:
    return [str(BIN / "airflow"), *args]


def migrate_database(setup: AirflowSetup, log_dir: Path, timeout: float = 300) -> None:
    run_command("db-migrate", airflow("db", "migrate"), setup.env, log_dir, timeout)


def start_airflow(services: Services, setup: AirflowSetup, *, triggerer: bool = True) -> None:
    """api-server, scheduler, dag-processor and triggerer, each its own process group."""
    services.start(
        "api-server",
        airflow(
            "api-server", "--host", "127.0.0.1", "--port", str(setup.api_port), "--workers", "1"
        ),
        setup.env,
    )
    services.start("scheduler", airflow("scheduler", "--skip-serve-logs"), setup.env)
    services.start("dag-processor", airflow("dag-processor"), setup.env)
    if triggerer:
        services.start("triggerer", airflow("triggerer", "--skip-serve-logs"), setup.env)


class AirflowApi:
    """The api-server's public REST API (``/api/v2``) with a JWT from ``/auth/token``."""

    def __init__(self, base_url: str, username: str, password: str) -> None:
        import httpx  # an Airflow dependency

        self._httpx = httpx
        self.base_url = base_url
        self.username = username
        self.password = password
        self.client = httpx.Client(base_url=base_url, timeout=30.0)
        self._token: str | None = None

    def close(self) -> None:
        self.client.close()

    def login(self) -> None:
        """POST /auth/token: SimpleAuthManager's login; answers 201 with ``access_token``."""
        response = self.client.post(
            "/auth/token", json={"username": self.username, "password": self.password}
        )
        if response.status_code not in (200, 201):
            raise E2EError(f"login failed: HTTP {response.status_code} {response.text[:500]}")
        self._token = response.json()["access_token"]

    def request(self, method: str, path: str, *, allow: Iterable[int] = (), **kwargs: Any) -> Any:
        """One call; HTTP errors other than ``allow`` fail the run with the answer's body."""
        if self._token is None:
            self.login()
        extra_headers = kwargs.pop("headers", {})
        relogged = False
        for attempt in range(4):
            headers = {"Authorization": f"Bearer {self._token}", **extra_headers}
            try:
                response = self.client.request(method, path, headers=headers, **kwargs)
            except self._httpx.TransportError as exc:
                # A busy two-core machine can stall the api-server past the client timeout;
                # reads are retried, a POST never (it could trigger a second run).
                if method != "GET" or attempt == 3:
                    raise E2EError(f"{method} {path}: {type(exc).__name__}: {exc}") from None
                log(f"{method} {path}: {type(exc).__name__}; retrying")
                time.sleep(2)
                continue
            if response.status_code == 401 and not relogged:
                relogged = True
                self.login()
                continue
            break
        if response.status_code in set(allow):
            return None
        if response.status_code >= 400:
            raise E2EError(f"{method} {path}: HTTP {response.status_code} {response.text[:2000]}")
        if not response.content:
            return None
        if "json" in response.headers.get("content-type", ""):
            return response.json()
        return response.text

    def get(self, path: str, **kwargs: Any) -> Any:
        return self.request("GET", path, **kwargs)

    # -- waits --------------------------------------------------------------------------

    def reachable(self) -> bool:
        try:
            return self.client.get("/api/v2/version").status_code == 200
        except self._httpx.TransportError:
            return False

    def health(self) -> dict[str, Any]:
        return self.get("/api/v2/monitor/health")

    def import_errors(self) -> list[dict[str, Any]]:
        return self.get("/api/v2/importErrors", params={"limit": 100})["import_errors"]

    def dag(self, dag_id: str) -> dict[str, Any] | None:
        return self.get(f"/api/v2/dags/{dag_id}", allow=(404,))

    # -- runs ---------------------------------------------------------------------------

    def unpause(self, dag_id: str) -> None:
        self.request("PATCH", f"/api/v2/dags/{dag_id}", json={"is_paused": False})

    def trigger(self, dag_id: str, conf: Mapping[str, Any]) -> dict[str, Any]:
        # logical_date null: a run "now" with no data interval, as the UI's trigger form does.
        return self.request(
            "POST", f"/api/v2/dags/{dag_id}/dagRuns", json={"logical_date": None, "conf": conf}
        )

    def dag_run(self, dag_id: str, run_id: str) -> dict[str, Any]:
        return self.get(f"/api/v2/dags/{dag_id}/dagRuns/{run_id}")

    def task_instances(self, dag_id: str, run_id: str) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        while True:
            page = self.get(
                f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances",
                params={"limit": 100, "offset": len(found)},
            )
            found.extend(page["task_instances"])
            if not page["task_instances"] or len(found) >= (page.get("total_entries") or 0):
                return found

    def task_tries(
        self, dag_id: str, run_id: str, task_id: str, map_index: int = -1
    ) -> list[dict[str, Any]]:
        return self.get(
            f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/tries",
            params={"map_index": map_index},
        )["task_instances"]

    def task_log(
        self, dag_id: str, run_id: str, task_id: str, try_number: int, map_index: int = -1
    ) -> list[dict[str, Any]]:
        """The structured log entries of one try (the task runner's and the triggerer's)."""
        answer = self.get(
            f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/logs/{try_number}",
            params={"full_content": "true", "map_index": map_index},
            headers={"Accept": "application/json"},
        )
        content = answer.get("content", []) if isinstance(answer, dict) else []
        return [e if isinstance(e, dict) else {"event": str(e)} for e in content]

    def alive_triggerer_jobs(self) -> list[dict[str, Any]]:
        return self.get(
            "/api/v2/jobs", params={"job_type": "TriggererJob", "is_alive": "true", "limit": 100}
        )["jobs"]


def wait_for_api(api: AirflowApi, services: Services, timeout: float) -> None:
    wait_until("the api-server to answer", api.reachable, timeout, 1.0, services.check_alive)
    api.login()
    log(f"api-server up at {api.base_url}, logged in as {api.username}")


def wait_for_health(
    api: AirflowApi, services: Services, timeout: float, components: Sequence[str]
) -> None:
    """GET /api/v2/monitor/health until every named component reports ``healthy``.

    The scheduler, triggerer and dag-processor are healthy once their job row's heartbeat is
    recent, i.e. after they started their main loop, not when their process started.
    """

    def check() -> Any:
        health = api.health()
        states = {c: (health.get(c) or {}).get("status") for c in components}
        if all(s == "healthy" for s in states.values()):
            return True
        return False, states

    wait_until("healthy " + ", ".join(components), check, timeout, 2.0, services.check_alive)
    log("healthy: " + ", ".join(components))


def check_dags_folder(dags_folder: Path, dag_id: str) -> None:
    """Fail before starting anything when the DAG cannot be there: no folder, no Python file,
    or no file that names the DAG id (``dag_id="..."`` or a ``@dag`` function's name)."""
    if not dags_folder.is_dir():
        raise E2EError(f"dags folder {dags_folder} does not exist")
    files = sorted(dags_folder.rglob("*.py"))
    if not files:
        raise E2EError(f"dags folder {dags_folder} holds no .py file (looking for {dag_id})")
    if not any(dag_id in f.read_text(errors="replace") for f in files):
        raise E2EError(f"no file in {dags_folder} names the DAG {dag_id}")


def wait_for_dag(api: AirflowApi, services: Services, dag_id: str, timeout: float) -> None:
    """The dag-processor has parsed and serialised the DAG; a file that fails to import fails
    the wait at once, with Airflow's stack trace."""

    def check() -> Any:
        if api.dag(dag_id) is not None:
            return True
        errors = api.import_errors()
        if errors:
            text = "\n".join(f"{e['filename']}:\n{e['stack_trace']}" for e in errors)
            raise E2EError(f"DAG {dag_id} not loaded; import errors:\n{text}")
        found = [d["dag_id"] for d in api.get("/api/v2/dags", params={"limit": 100})["dags"]]
        return False, f"DAGs parsed so far: {found}"

    wait_until(f"DAG {dag_id} to be parsed", check, timeout, 2.0, services.check_alive)
    log(f"DAG {dag_id} parsed")


# ------------------------------------------------------------------------------------------
# A run, watched
# ------------------------------------------------------------------------------------------


def ti_key(ti: Mapping[str, Any]) -> str:
    index = ti.get("map_index", -1)
    return ti["task_id"] if index is None or index < 0 else f"{ti['task_id']}[{index}]"


@dataclass
class Deferral:
    """A task instance seen ``deferred`` with its trigger held by a live triggerer job."""

    task: str
    trigger_id: int
    classpath: str
    triggerer_id: int
    triggerer_hostname: str
    ti: dict[str, Any]  # the task instance as the API showed it, deferred


@dataclass
class WatchedRun:
    dag_id: str
    run_id: str
    conf: dict[str, Any]
    state: str
    seconds: float
    states_seen: dict[str, list[str]]
    deferrals: list[Deferral]
    task_instances: list[dict[str, Any]]


def run_dag(
    api: AirflowApi,
    services: Services,
    dag_id: str,
    conf: Mapping[str, Any],
    *,
    timeout: float,
    on_deferred: Callable[[Deferral], None] | None = None,
    poll: float = 1.0,
) -> WatchedRun:
    """Trigger a run and follow it to its end, recording each task instance's states.

    ``on_deferred`` is called once, the first time a task instance is seen ``deferred`` with
    its trigger assigned to a live triggerer (``trigger.triggerer_id``, a TriggererJob of
    ``/api/v2/jobs``). Fails when the run fails, with the failed task instances' logs.
    """
    started = time.monotonic()
    run = api.trigger(dag_id, conf)
    run_id = run["dag_run_id"]
    log(f"triggered {dag_id} run {run_id} with conf {json.dumps(conf)}")
    states_seen: dict[str, list[str]] = {}
    deferrals: list[Deferral] = []
    deferred_keys: set[str] = set()
    triggerers: dict[int, dict[str, Any]] = {}

    def record(tis: list[dict[str, Any]]) -> None:
        for ti in tis:
            key, state = ti_key(ti), ti.get("state") or "none"
            seen = states_seen.setdefault(key, [])
            if not seen or seen[-1] != state:
                seen.append(state)
                log(f"  {key}: {state}" + (f" on {ti['hostname']}" if ti.get("hostname") else ""))
            trigger = ti.get("trigger")
            if state != "deferred" or not trigger or key in deferred_keys:
                continue
            triggerer_id = trigger.get("triggerer_id")
            if triggerer_id is None:
                continue  # created, not yet picked up by a triggerer
            if triggerer_id not in triggerers:
                triggerers.update({j["id"]: j for j in api.alive_triggerer_jobs()})
            job = triggerers.get(triggerer_id)
            if job is None:
                continue
            deferral = Deferral(
                key, trigger["id"], trigger["classpath"], triggerer_id, job["hostname"], ti
            )
            deferred_keys.add(key)
            deferrals.append(deferral)
            log(
                f"  {key} deferred: trigger {deferral.trigger_id} ({deferral.classpath}) "
                f"held by triggerer job {triggerer_id} on {deferral.triggerer_hostname}"
            )
            if on_deferred is not None and len(deferrals) == 1:
                on_deferred(deferral)

    def finished() -> Any:
        tis = api.task_instances(dag_id, run_id)
        record(tis)
        state = api.dag_run(dag_id, run_id)["state"]
        if state in ("success", "failed"):
            return state, tis
        return False, f"run {state}; " + ", ".join(f"{k}={v[-1]}" for k, v in states_seen.items())

    state, tis = wait_until(
        f"run {run_id} of {dag_id} to finish", finished, timeout, poll, services.check_alive
    )
    watched = WatchedRun(
        dag_id, run_id, dict(conf), state, time.monotonic() - started, states_seen, deferrals, tis
    )
    log(f"run {run_id}: {state} in {watched.seconds:.1f}s")
    if state != "success":
        raise E2EError(
            f"run {run_id} of {dag_id} ended {state}:\n" + failed_tasks_report(api, watched)
        )
    return watched


def failed_tasks_report(api: AirflowApi, run: WatchedRun, lines: int = 40) -> str:
    report = []
    for ti in run.task_instances:
        if ti.get("state") in ("success", "skipped"):
            continue
        report.append(f"--- {ti_key(ti)}: {ti.get('state')} (try {ti.get('try_number')})")
        if ti.get("try_number"):
            try:
                entries = api.task_log(
                    run.dag_id, run.run_id, ti["task_id"], ti["try_number"], ti["map_index"]
                )
                report.extend(format_log_entry(e) for e in entries[-lines:])
            except E2EError as exc:
                report.append(f"(no log: {exc})")
    return "\n".join(report) or "(no failed task instance found)"


def format_log_entry(entry: Mapping[str, Any]) -> str:
    """One structured log entry as a line; a task's exception (``error_detail``: type, message
    and innermost frames) on the lines after it."""
    parts = [str(entry.get(k, "")) for k in ("timestamp", "level", "logger") if entry.get(k)]
    text = " ".join(parts + [str(entry.get("event", ""))])
    for error in entry.get("error_detail") or []:
        if not isinstance(error, Mapping):
            continue
        text += f"\n    {error.get('exc_type')}: {error.get('exc_value')}"
        for frame in (error.get("frames") or [])[-4:]:
            text += f"\n      at {frame.get('filename')}:{frame.get('lineno')} {frame.get('name')}"
    return text


def prove_deferred(
    api: AirflowApi,
    run: WatchedRun,
    task_id: str | None,
    classpath: str = TRIGGER_CLASSPATH,
) -> Deferral:
    """The sensor went through the real triggerer, from Airflow's own records.

    1. While the run went on, ``GET .../taskInstances`` showed the task instance in state
       ``deferred`` with ``trigger.classpath`` our trigger and ``trigger.triggerer_id`` a live
       ``TriggererJob`` of ``GET /api/v2/jobs`` (recorded by :func:`run_dag`);
    2. it ended ``success``;
    3. its log (``GET .../logs/{try}``, which merges the triggerer's log of the task with the
       worker's) holds the lines our trigger logged while it waited in the triggerer.
    """
    candidates = [d for d in run.deferrals if task_id is None or d.task == task_id]
    if not candidates:
        raise E2EError(
            f"no task instance of run {run.run_id} was seen deferred on a triggerer "
            f"(states seen: {run.states_seen})"
        )
    deferral = candidates[0]
    if deferral.classpath != classpath:
        raise E2EError(f"{deferral.task} deferred to {deferral.classpath}, not {classpath}")
    ti = next(t for t in run.task_instances if ti_key(t) == deferral.task)
    if ti["state"] != "success":
        raise E2EError(f"{deferral.task} ended {ti['state']}")
    entries = api.task_log(run.dag_id, run.run_id, ti["task_id"], ti["try_number"], ti["map_index"])
    # The triggerer writes what happens to a trigger into the task's log (a side file
    # "attempt=N.log.trigger.<triggerer job id>.log" that the log endpoint merges in).
    fired = [e for e in entries if str(e.get("event", "")).startswith("Trigger fired event")]
    own = [e for e in entries if str(e.get("logger", "")).startswith("airflow_provider_acid")]
    if not fired:
        raise E2EError(
            f"the log of {deferral.task} shows no 'Trigger fired event' from the triggerer; "
            "its end:\n" + "\n".join(format_log_entry(e) for e in entries[-40:])
        )
    log(
        f"proved: {deferral.task} was deferred to {deferral.classpath}, held by triggerer job "
        f"{deferral.triggerer_id} on {deferral.triggerer_hostname} "
        f"(states {' -> '.join(run.states_seen[deferral.task])}); its log has the triggerer's "
        f"'Trigger fired event' and {len(own)} line(s) logged by the trigger itself"
    )
    return deferral


def wait_for_defer_exit_event(services: Services, deferral: Deferral, timeout: float) -> bool:
    """Wait until the scheduler has taken in the executor's event for the deferring attempt.

    Airflow 3.3 bug (apache/airflow#71580, #72716): the worker that ran a task up to its
    ``defer()`` exits cleanly and the executor reports ``success`` for that try. If the trigger
    fires and the resumed attempt is already ``running`` before the scheduler drains that
    stale event, the scheduler sees "finished with state success, but the task instance's
    state attribute is running" and fails the task. A trigger that fires within seconds of
    deferring (ours, once we write the delta) hits it on a busy two-core machine; so the
    script writes the delta only after the scheduler logged "Received executor event" for
    that try. Returns False if it did not see it within ``timeout`` (the caller goes on).
    """
    ti = deferral.ti
    key = (
        f"TaskInstanceKey(dag_id='{ti['dag_id']}', task_id='{ti['task_id']}', "
        f"run_id='{ti['dag_run_id']}', try_number={ti['try_number']}, "
        f"map_index={ti['map_index']})"
    )
    scheduler_log = services.services["scheduler"].log_path

    def drained() -> bool:
        return any(
            "Received executor event" in line and key in line
            for line in scheduler_log.read_text(errors="replace").splitlines()
        )

    try:
        wait_until(
            "the scheduler to take in the deferring attempt's executor event",
            drained,
            timeout,
            0.5,
            services.check_alive,
        )
        return True
    except E2EError as exc:
        log(f"  {exc}; going on")
        return False


def mapped_hostnames(run: WatchedRun, task_id: str) -> dict[int, str]:
    """map_index -> ``hostname`` Airflow recorded for each instance of a mapped task."""
    found = {
        ti["map_index"]: ti.get("hostname") or ""
        for ti in run.task_instances
        if ti["task_id"] == task_id and ti["map_index"] >= 0
    }
    if not found:
        raise E2EError(f"run {run.run_id} has no mapped instance of {task_id}")
    return dict(sorted(found.items()))


# ------------------------------------------------------------------------------------------
# Tables and outputs
# ------------------------------------------------------------------------------------------


@dataclass
class DemoTable:
    """A demo Hive ACID table written by this process, so it can add writes later."""

    uri: str
    writer: Any  # airflow_provider_acid.testing.AcidTableWriter
    valid_write_ids: str
    high_watermark: int  # of valid_write_ids, the snapshot the runs read

    @property
    def latest_write_id(self) -> int:
        """The newest write on storage (above high_watermark once the script added writes)."""
        return self.writer.write_id_snapshot().high_watermark

    def add_delete_delta(self) -> str:
        """One more Hive write: delete a few rows (a ``delete_delta_W_W_0000`` folder)."""
        targets = self.writer.sample_identities(0.01, seed=7)
        self.writer.delete(targets)
        return self.writer.valid_write_ids()

    def expected_rows(self) -> Any:
        return self.writer.expected_rows(self.valid_write_ids)


def make_demo_table(folder: Path, rows_per_bucket: int = 2_000) -> DemoTable:
    """The demo table of ``python -m airflow_provider_acid.testing``, smaller: 2 partitions of
    4 buckets (8 bucket slices), a base, insert deltas, a delete and an update."""
    from airflow_provider_acid.testing import generate_demo_table

    uri = str(folder)
    writer = generate_demo_table(uri, rows_per_bucket=rows_per_bucket)
    valid = writer.valid_write_ids()
    return DemoTable(uri, writer, valid, writer.write_id_snapshot().high_watermark)


def _files(uri: str) -> tuple[Any, str, list[str]]:
    import fsspec

    fs, root = fsspec.core.url_to_fs(uri)
    root = root.rstrip("/")
    if not fs.exists(root):
        raise E2EError(f"output {uri} does not exist")
    return fs, root, sorted(p[len(root) + 1 :] for p in fs.find(root))


def _is_hidden(relative: str) -> bool:
    return any(part.startswith(("_", ".")) for part in relative.split("/"))


def read_snapshot_rows(uri: str) -> Any:
    """The rows of a committed snapshot: the Parquet files outside ``_*`` and ``.*`` paths
    (what commit.py promises for a fresh output folder), with ``k=v`` folder values added
    as columns when the files lack them; sorted by every column."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    fs, root, files = _files(uri)
    tables = []
    for relative in files:
        if _is_hidden(relative) or not relative.endswith(".parquet"):
            continue
        table = pq.read_table(f"{root}/{relative}", filesystem=fs)
        for part in relative.split("/")[:-1]:
            key, _, value = part.partition("=")
            if value and key not in table.column_names:
                table = table.append_column(key, pa.array([value] * table.num_rows))
        tables.append(table)
    if not tables:
        raise E2EError(f"output {uri} holds no Parquet data file")
    rows = pa.concat_tables(tables, promote_options="default")
    return rows.sort_by([(name, "ascending") for name in rows.column_names])


def compare_tables(label: str, actual: Any, expected: Any) -> None:
    """Same columns (by name) and the same rows once both are sorted by those columns."""
    import pyarrow as pa

    names = sorted(expected.column_names)
    missing = [n for n in names if n not in actual.column_names]
    if missing:
        raise E2EError(f"{label}: columns {missing} missing (has {actual.column_names})")
    actual = actual.select(names)
    expected = expected.select(names)
    try:
        actual = actual.cast(expected.schema)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise E2EError(
            f"{label}: types differ: {actual.schema} vs {expected.schema}: {exc}"
        ) from None
    order = [(n, "ascending") for n in names]
    actual, expected = actual.sort_by(order), expected.sort_by(order)
    if actual.num_rows != expected.num_rows:
        raise E2EError(f"{label}: {actual.num_rows} rows, expected {expected.num_rows}")
    if not actual.equals(expected):
        for i in range(actual.num_rows):
            a, e = actual.slice(i, 1).to_pylist(), expected.slice(i, 1).to_pylist()
            if a != e:
                raise E2EError(f"{label}: first difference at sorted row {i}: {a} vs {e}")
        raise E2EError(f"{label}: tables differ")
    log(f"{label}: {actual.num_rows} rows, identical")


def check_snapshot_rows(output_uri: str, expected: Any) -> None:
    """The committed snapshot holds exactly the rows a correct Hive reader returns."""
    compare_tables(
        f"snapshot {output_uri} vs the table's expected rows",
        read_snapshot_rows(output_uri),
        expected,
    )


def compare_outputs(uri_a: str, uri_b: str) -> None:
    """Two runs' outputs hold the same data: the same rows in their Parquet data files, and
    the same bytes in every other visible file (``_*``/``.*`` paths, e.g. manifests with
    timestamps and run ids, are left out)."""
    fs_a, root_a, files_a = _files(uri_a)
    fs_b, root_b, files_b = _files(uri_b)
    parquet_a = [f for f in files_a if f.endswith(".parquet") and not _is_hidden(f)]
    parquet_b = [f for f in files_b if f.endswith(".parquet") and not _is_hidden(f)]
    if parquet_a or parquet_b:
        compare_tables(f"{uri_a} vs {uri_b}", read_snapshot_rows(uri_a), read_snapshot_rows(uri_b))
        if parquet_a == parquet_b:
            log(f"the same {len(parquet_a)} data file name(s) in both outputs")
        else:
            log(f"data file names differ ({len(parquet_a)} vs {len(parquet_b)} files)")
    other_a = [f for f in files_a if not f.endswith(".parquet") and not _is_hidden(f)]
    other_b = [f for f in files_b if not f.endswith(".parquet") and not _is_hidden(f)]
    if other_a != other_b:
        raise E2EError(f"outputs hold different files: {other_a} vs {other_b}")
    for relative in other_a:
        if fs_a.cat_file(f"{root_a}/{relative}") != fs_b.cat_file(f"{root_b}/{relative}"):
            raise E2EError(f"{relative} differs between {uri_a} and {uri_b}")
    if not (parquet_a or other_a):
        raise E2EError(f"{uri_a} holds no visible file to compare")
    others = f", {len(other_a)} other file(s) byte-equal" if other_a else ""
    log(f"outputs identical: {uri_a} and {uri_b}{others}")


# ------------------------------------------------------------------------------------------
# Scripts' shared command line and lifecycle
# ------------------------------------------------------------------------------------------


def make_workdir(keep: bool) -> Path:
    workdir = Path(tempfile.mkdtemp(prefix="acid-e2e-"))
    log(f"work folder {workdir}" + (" (kept)" if keep else " (removed after a success)"))
    return workdir


def finish(services: Services, workdir: Path, *, ok: bool, keep: bool) -> None:
    """Stop everything; on failure print the ends of the logs and keep the work folder."""
    if not ok:
        services.tail_all()
    services.stop_all()
    if ok and not keep:
        shutil.rmtree(workdir, ignore_errors=True)
    else:
        log(f"work folder kept: {workdir} (logs in {services.log_dir})")


def register_cleanup(services: Services) -> None:
    install_signal_handlers()
    atexit.register(services.stop_all)


def run_script(title: str, keep: bool, body: Callable[[Path, Services], None]) -> int:
    """A script's life: a work folder, ``body(workdir, services)``, and cleanup in every case.

    Returns the exit code: 0 only if ``body`` returned. Prints the ends of the logs and keeps
    the work folder when it did not.
    """
    workdir = make_workdir(keep)
    services = Services(workdir / "logs")
    services.log_dir.mkdir(parents=True)
    register_cleanup(services)
    ok = False
    try:
        body(workdir, services)
        ok = True
    except E2EError as exc:
        log(f"FAILED: {exc}")
    except Exception:  # a bug in the script or an unexpected answer: the same cleanup
        log("FAILED with an unexpected error:\n" + traceback.format_exc())
    except KeyboardInterrupt as exc:
        log(f"interrupted ({exc or 'Ctrl-C'})")
    finally:
        finish(services, workdir, ok=ok, keep=keep)
    log(f"{'PASSED' if ok else 'FAILED'}: {title} took {elapsed():.1f}s")
    return 0 if ok else 1


def parse_conf(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    if text.startswith("@"):
        text = Path(text[1:]).read_text()
    value = json.loads(text)
    if not isinstance(value, dict):
        raise E2EError("--conf must be a JSON object")
    return value
