"""`make e2e-distributed`: the e2e run on CeleryExecutor, two workers, Redis and PostgreSQL.

    .venv/bin/python scripts/e2e_distributed.py [--probe] [--dag-id ID] [--mapped-task TASK] ...

Installs ``postgresql`` and ``redis-server`` from Debian's packages if they are missing, then
starts, all on 127.0.0.1 and in a temporary folder: its own PostgreSQL cluster (the metadata
database and Celery's result backend), its own Redis (the broker), the Airflow api-server,
scheduler, dag-processor and triggerer, and two Celery workers ``w1@<host>`` and ``w2@<host>``.

1. Run 1, both workers: triggers the DAG as ``make e2e`` does (same conf, same proof that the
   sensor went through the triggerer), then shows from the task instances' ``hostname`` field
   (``GET .../taskInstances``) that instances of the mapped task ran on both workers.
2. Run 2, one worker: stops ``w2``, triggers the DAG again into another output folder, and
   shows that every mapped instance ran on ``w1``.
3. The two outputs hold the same data (:func:`_e2e_common.compare_outputs`), and run 1's
   output passes the same check as ``make e2e``'s.

Each worker records its Celery node name as the task instances' hostname (both run on one
machine, where Airflow's default, the FQDN, would be the same for both): see
``_e2e_common.e2e_hostname``.
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import signal
import socket
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

from _e2e_common import (
    PROBE_MAPPED_TASK,
    SCRIPTS,
    AirflowApi,
    AirflowSetup,
    E2EError,
    Services,
    airflow,
    airflow_setup,
    check_dags_folder,
    check_loopback_only,
    compare_outputs,
    free_port,
    log,
    migrate_database,
    prove_deferred,
    run_command,
    run_dag,
    run_script,
    start_airflow,
    wait_for_api,
    wait_for_dag,
    wait_for_health,
    wait_until,
)
from e2e import (
    add_run_arguments,
    check_outputs,
    conf_for_another_run,
    nudge_table,
    prepare_table_and_conf,
    resolve_run_arguments,
)

WORKER_NAMES = ("w1", "w2")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="scripts/e2e_distributed.py",
        description=__doc__,
        formatter_class=argparse.RawTextHelpFormatter,
    )
    add_run_arguments(parser)
    parser.add_argument(
        "--mapped-task",
        help="task id of the mapped task that must run on both workers (default: the run's "
        f"only mapped task; {PROBE_MAPPED_TASK} with --probe)",
    )
    parser.add_argument("--concurrency", type=int, default=2, help="task slots per worker")
    parser.add_argument(
        "--no-single-worker-run",
        action="store_true",
        help="skip run 2 (one worker) and the comparison of the two outputs",
    )
    args = resolve_run_arguments(parser.parse_args(argv))
    if args.probe and args.mapped_task is None:
        args.mapped_task = PROBE_MAPPED_TASK
    return args


# ------------------------------------------------------------------------------------------
# Debian packages, PostgreSQL, Redis
# ------------------------------------------------------------------------------------------


def postgres_bindir() -> Path | None:
    """Debian keeps the server binaries (initdb, postgres) off PATH, per major version."""
    found = glob.glob("/usr/lib/postgresql/*/bin/initdb")
    if found:
        return Path(max(found, key=lambda p: int(Path(p).parts[4]))).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def ensure_debian_packages(log_dir: Path) -> None:
    """apt-get install postgresql / redis-server when their binaries are missing.

    Debian's maintainer scripts start a freshly installed service (the default cluster on
    5432, redis on 6379) unless /usr/sbin/policy-rc.d says no; the script starts its own
    instances, so it puts a "no" there for the install if none exists, and takes it away after.
    """
    missing = []
    if postgres_bindir() is None:
        missing.append("postgresql")
    if shutil.which("redis-server") is None:
        missing.append("redis-server")
    if not missing:
        return
    sudo = [] if os.geteuid() == 0 else ["sudo", "-n"]
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    policy = Path("/usr/sbin/policy-rc.d")
    own_policy = os.geteuid() == 0 and not policy.exists()
    if own_policy:
        policy.write_text(
            "#!/bin/sh\n# written by scripts/e2e_distributed.py for one install\nexit 101\n"
        )
        policy.chmod(0o755)
    try:
        run_command("apt-get-update", [*sudo, "apt-get", "update"], env, log_dir, 600)
        run_command(
            "apt-get-install",
            [*sudo, "apt-get", "install", "-y", "--no-install-recommends", *missing],
            env,
            log_dir,
            600,
        )
    finally:
        if own_policy:
            policy.unlink(missing_ok=True)
    if postgres_bindir() is None or shutil.which("redis-server") is None:
        raise E2EError(f"installed {missing} but the binaries are still missing")
    log(f"installed from Debian: {', '.join(missing)}")


def as_postgres_user() -> list[str]:
    """PostgreSQL refuses to run as root: as root, drop to the ``postgres`` user.

    ``setpriv`` (util-linux) execs the server in place, so the process we started is the
    postmaster itself and our stop signal reaches it directly (``runuser`` would stay between).
    """
    if os.geteuid() != 0:
        return []
    return ["setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups", "--"]


def start_postgres(services: Services, workdir: Path) -> int:
    """A throwaway cluster: trust auth on 127.0.0.1 only, no fsync; the database ``airflow``."""
    bindir = postgres_bindir()
    assert bindir is not None
    root = workdir / "postgres"
    root.mkdir()
    if os.geteuid() == 0:
        import pwd

        user = pwd.getpwnam("postgres")
        workdir.chmod(0o711)  # the postgres user may cross the work folder, not list it
        os.chown(root, user.pw_uid, user.pw_gid)
    data = root / "data"
    run_command(
        "initdb",
        as_postgres_user()
        + [str(bindir / "initdb"), "-D", str(data), "-U", "airflow", "--auth=trust"]
        + ["-E", "UTF8", "--no-sync"],
        None,
        services.log_dir,
        180,
    )
    port = free_port()
    settings = {
        "listen_addresses": "127.0.0.1",
        "port": str(port),
        "unix_socket_directories": str(root),
        "max_connections": "200",
        "fsync": "off",
        "synchronous_commit": "off",
        "full_page_writes": "off",
    }
    argv = [str(bindir / "postgres"), "-D", str(data)]
    for name, value in settings.items():
        argv += ["-c", f"{name}={value}"]
    # SIGINT is PostgreSQL's "fast" shutdown (SIGTERM waits for clients to disconnect).
    services.start(
        "postgres", as_postgres_user() + argv, os.environ, stop_signal=signal.SIGINT, tier=0
    )
    pg_isready = [str(bindir / "pg_isready"), "-h", "127.0.0.1", "-p", str(port), "-q"]
    wait_until(
        "PostgreSQL to accept connections",
        lambda: subprocess_ok(pg_isready),
        60,
        0.5,
        services.check_alive,
    )
    createdb = [str(bindir / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "airflow"]
    run_command("createdb", [*createdb, "airflow"], None, services.log_dir, 60)
    log(f"PostgreSQL on 127.0.0.1:{port}, database airflow")
    return port


def start_redis(services: Services, workdir: Path) -> int:
    folder = workdir / "redis"
    folder.mkdir()
    port = free_port()
    argv = ["redis-server", "--bind", "127.0.0.1", "--port", str(port), "--save", ""]
    argv += ["--appendonly", "no", "--dir", str(folder), "--daemonize", "no"]
    services.start("redis", argv, os.environ, tier=0)
    wait_until("Redis to answer PING", lambda: redis_ping(port), 30, 0.5, services.check_alive)
    log(f"Redis on 127.0.0.1:{port}")
    return port


def redis_ping(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(64).startswith(b"+PONG")
    except OSError:
        return False


def subprocess_ok(argv: list[str]) -> bool:
    return (
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0
    )


# ------------------------------------------------------------------------------------------
# Celery workers
# ------------------------------------------------------------------------------------------


def worker_node(name: str) -> str:
    return f"{name}@{socket.gethostname()}"


def start_workers(services: Services, setup: AirflowSetup, concurrency: int) -> list[str]:
    """``airflow celery worker`` per name, each its own process group and node name.

    ``[core] hostname_callable`` points at ``_e2e_common.e2e_hostname`` (``scripts/`` is put on
    the workers' PYTHONPATH), which returns ``ACID_E2E_HOSTNAME``: the task instances each
    worker runs are recorded with that worker's node name as ``hostname``.
    """
    nodes = []
    for name in WORKER_NAMES:
        node = worker_node(name)
        python_path = os.pathsep.join(filter(None, [str(SCRIPTS), setup.env.get("PYTHONPATH")]))
        env = dict(
            setup.env,
            ACID_E2E_HOSTNAME=node,
            AIRFLOW__CORE__HOSTNAME_CALLABLE="_e2e_common.e2e_hostname",
            PYTHONPATH=python_path,
        )
        argv = airflow("celery", "worker", "--celery-hostname", node)
        argv += ["--concurrency", str(concurrency), "--skip-serve-logs"]
        argv += ["--without-mingle", "--without-gossip"]
        services.start(f"worker-{name}", argv, env)
        nodes.append(node)
    return nodes


def wait_for_workers(services: Services, nodes: list[str], timeout: float) -> None:
    """Celery logs "<node> ready." once the worker consumes from the broker."""

    def ready() -> object:
        waiting = [
            node
            for node in nodes
            if f"{node} ready."
            not in services.services[f"worker-{node.split('@')[0]}"].log_path.read_text(
                errors="replace"
            )
        ]
        return True if not waiting else (False, f"not ready: {waiting}")

    wait_until("the Celery workers to be ready", ready, timeout, 1.0, services.check_alive)
    log("Celery workers ready: " + ", ".join(nodes))


# ------------------------------------------------------------------------------------------
# The checks
# ------------------------------------------------------------------------------------------


def mapped_task_hosts(
    api: AirflowApi, dag_id: str, run_id: str, task_id: str | None
) -> tuple[str, dict[str, list[int]]]:
    """Which worker ran which instance of the mapped task, from Airflow's records.

    ``GET /api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances``: each mapped instance
    (``map_index`` >= 0) with its ``state`` and ``hostname``. With ``task_id`` None, the run
    must have exactly one mapped task.
    """
    instances = [t for t in api.task_instances(dag_id, run_id) if t["map_index"] >= 0]
    mapped_ids = sorted({t["task_id"] for t in instances})
    if task_id is None:
        if len(mapped_ids) != 1:
            raise E2EError(f"run {run_id}: mapped tasks {mapped_ids}; name one with --mapped-task")
        task_id = mapped_ids[0]
    instances = [t for t in instances if t["task_id"] == task_id]
    if not instances:
        raise E2EError(f"run {run_id} has no mapped instance of {task_id} (mapped: {mapped_ids})")
    not_done = [
        f"{task_id}[{t['map_index']}]={t['state']}" for t in instances if t["state"] != "success"
    ]
    if not_done:
        raise E2EError(f"mapped instances not successful: {not_done}")
    hosts: dict[str, list[int]] = defaultdict(list)
    for ti in sorted(instances, key=lambda t: t["map_index"]):
        hosts[ti.get("hostname") or "?"].append(ti["map_index"])
    return task_id, dict(hosts)


def check_mapped_spread(
    api: AirflowApi, dag_id: str, run_id: str, task_id: str | None, expected_hosts: list[str]
) -> str:
    """Every mapped instance ran on one of ``expected_hosts``, and each of them ran some."""
    task_id, hosts = mapped_task_hosts(api, dag_id, run_id, task_id)
    for host, indexes in sorted(hosts.items()):
        log(f"  {task_id}: map indexes {indexes} ran on {host}")
    strangers = sorted(set(hosts) - set(expected_hosts))
    if strangers:
        raise E2EError(f"{task_id} instances ran on {strangers}, expected only {expected_hosts}")
    idle = sorted(set(expected_hosts) - set(hosts))
    if idle:
        raise E2EError(f"no instance of {task_id} ran on {idle} (ran on {sorted(hosts)})")
    log(
        f"proved: the {sum(map(len, hosts.values()))} instances of {task_id} ran on "
        f"{' and '.join(sorted(hosts))}"
    )
    return task_id


# ------------------------------------------------------------------------------------------
# The scenario
# ------------------------------------------------------------------------------------------


def run_distributed(args: argparse.Namespace, workdir: Path, services: Services) -> None:
    check_dags_folder(args.dags_folder, args.dag_id)
    ensure_debian_packages(services.log_dir)
    table, conf = prepare_table_and_conf(args, workdir, "snapshot_two_workers")
    pg_port = start_postgres(services, workdir)
    redis_port = start_redis(services, workdir)
    database = f"postgresql+psycopg2://airflow@127.0.0.1:{pg_port}/airflow"
    setup = airflow_setup(
        workdir / "airflow",
        args.dags_folder,
        executor="CeleryExecutor",
        sql_alchemy_conn=database,
        parallelism=8,
        extra_env={
            "AIRFLOW__CELERY__BROKER_URL": f"redis://127.0.0.1:{redis_port}/0",
            # The driver named: SQLAlchemy 2.1's default for postgresql:// is psycopg (3).
            "AIRFLOW__CELERY__RESULT_BACKEND": f"db+{database}",
            "AIRFLOW__ACID__ALLOWED_URI_PREFIXES": f"{workdir}/",
        },
    )
    migrate_database(setup, services.log_dir)
    start_airflow(services, setup)
    nodes = start_workers(services, setup, args.concurrency)
    api = AirflowApi(setup.base_url, "e2e", setup.password)
    try:
        wait_for_api(api, services, timeout=240)
        wait_for_health(
            api, services, 240, ["metadatabase", "scheduler", "triggerer", "dag_processor"]
        )
        wait_for_workers(services, nodes, timeout=180)
        check_loopback_only(services)
        wait_for_dag(api, services, args.dag_id, timeout=180)
        api.unpause(args.dag_id)

        log(f"run 1: {len(nodes)} workers")
        run1 = run_dag(
            api,
            services,
            args.dag_id,
            conf,
            timeout=args.timeout,
            on_deferred=nudge_table(table, services, not args.no_nudge),
        )
        prove_deferred(api, run1, args.deferred_task)
        mapped = check_mapped_spread(api, args.dag_id, run1.run_id, args.mapped_task, nodes)
        check_outputs(args, run1, table)
        if args.no_single_worker_run:
            return

        log(f"run 2: one worker ({nodes[0]})")
        services.stop(f"worker-{WORKER_NAMES[1]}")
        conf2 = conf_for_another_run(conf, table, str(workdir / "output" / "snapshot_one_worker"))
        run2 = run_dag(
            api,
            services,
            args.dag_id,
            conf2,
            timeout=args.timeout,
            on_deferred=nudge_table(table, services, not args.no_nudge),
        )
        check_mapped_spread(api, args.dag_id, run2.run_id, mapped, nodes[:1])
        compare_outputs(conf["output_uri"], conf2["output_uri"])
    finally:
        api.close()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    return run_script(
        "make e2e-distributed",
        args.keep,
        lambda workdir, services: run_distributed(args, workdir, services),
    )


if __name__ == "__main__":
    sys.exit(main())
