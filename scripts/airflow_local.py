"""``make airflow``: a live local Airflow 3 on 127.0.0.1 with the project's DAGs, to click around.

    python scripts/airflow_local.py start [--port N]   # foreground; Ctrl-C stops everything
    python scripts/airflow_local.py stop               # what `make airflow-stop` runs

Starts the api-server, scheduler, dag-processor and triggerer (LocalExecutor, SQLite) in
``.cache/airflow-local/`` (a new home each start), each bound to loopback, with a demo Hive ACID
table written for the example DAGs (``ACID_TABLE_URI``; snapshots go to ``ACID_OUTPUT_URI``),
then prints the URL, the user and the password and waits. Ctrl-C, SIGTERM or ``stop`` (which
signals the pid in ``.cache/airflow-local/airflow.pid``) stops every process it started.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _e2e_common import (  # noqa: E402 - the scripts folder first
    REPO,
    AirflowApi,
    Services,
    airflow_setup,
    check_loopback_only,
    install_signal_handlers,
    make_demo_table,
    migrate_database,
    start_airflow,
    wait_for_api,
    wait_for_health,
)

ROOT = REPO / ".cache" / "airflow-local"
PID_FILE = ROOT / "airflow.pid"
USER = "admin"
COMPONENTS = ["metadatabase", "scheduler", "triggerer", "dag_processor"]


def running_pid() -> int | None:
    try:
        pid = int(PID_FILE.read_text())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return None
    return pid


def start(port: int | None) -> int:
    if (pid := running_pid()) is not None:
        raise SystemExit(f"airflow: already running (pid {pid}); `make airflow-stop` stops it")
    shutil.rmtree(ROOT, ignore_errors=True)
    (ROOT / "logs").mkdir(parents=True)
    PID_FILE.write_text(str(os.getpid()))
    install_signal_handlers()
    table = make_demo_table(ROOT / "table")
    extra = {
        "ACID_TABLE_URI": table.uri,
        "ACID_OUTPUT_URI": str(ROOT / "snapshots"),
        "AIRFLOW__ACID__ALLOWED_URI_PREFIXES": f"{ROOT}/",
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
    }
    home = ROOT / "home"
    setup = airflow_setup(
        home,
        REPO / "dags",
        executor="LocalExecutor",
        sql_alchemy_conn=f"sqlite:///{home / 'airflow.db'}",
        parallelism=4,
        extra_env=extra,
    )
    if port:
        setup.api_port = port
        setup.env["AIRFLOW__API__PORT"] = str(port)
        setup.env["AIRFLOW__API__BASE_URL"] = setup.base_url
        setup.env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"] = f"{setup.base_url}/execution/"
    # the user the login page asks for (airflow_setup names its own e2e user)
    passwords = home / "simple_auth_manager_passwords.json"
    passwords.write_text(f'{{"{USER}": "{setup.password}"}}')
    setup.env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS"] = f"{USER}:admin"
    services = Services(ROOT / "logs")
    started = time.monotonic()
    try:
        migrate_database(setup, services.log_dir)
        start_airflow(services, setup)
        api = AirflowApi(setup.base_url, USER, setup.password)
        wait_for_api(api, services, timeout=240)
        wait_for_health(api, services, 240, COMPONENTS)
        check_loopback_only(services)
        print(
            f"\nAirflow is up in {time.monotonic() - started:.0f} s\n"
            f"  URL       {setup.base_url}\n"
            f"  user      {USER}\n"
            f"  password  {setup.password}\n"
            f"  DAGs      {REPO / 'dags'} (paused: unpause one, or trigger it)\n"
            f"  table     {table.uri} (snapshots to {ROOT / 'snapshots'})\n"
            f"  logs      {services.log_dir}\n"
            "Ctrl-C here, or `make airflow-stop`, stops it.",
            flush=True,
        )
        while True:
            services.check_alive()
            time.sleep(2)
    except KeyboardInterrupt:
        print("\nairflow: stopping", flush=True)
    finally:
        services.stop_all()
        PID_FILE.unlink(missing_ok=True)
        print("airflow: stopped", flush=True)
    return 0


def stop() -> int:
    pid = running_pid()
    if pid is None:
        print("airflow: not running")
        return 0
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and running_pid() == pid:
        time.sleep(0.5)
    if running_pid() == pid:
        raise SystemExit(f"airflow: pid {pid} did not stop within 60 s")
    print(f"airflow: stopped (pid {pid})")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["start", "stop"])
    parser.add_argument("--port", type=int, help="the api-server's port (default: a free one)")
    args = parser.parse_args()
    return start(args.port) if args.command == "start" else stop()


if __name__ == "__main__":
    sys.exit(main())
