"""The docker-compose demo holds together: one image, one environment, MinIO wired right.

No Docker engine is needed: the compose file is read as YAML (merge keys resolved, ``${VAR:-x}``
taken at its default, as with an empty environment) and the Dockerfile as text. Each check
returns the problems it finds; the tests after ``test_the_checks_catch`` prove each check
fails on a broken copy.
"""

from __future__ import annotations

import copy
import json
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
COMPOSE = REPO / "docker-compose.yaml"
DOCKERFILE = REPO / "Dockerfile"

#: The official Airflow 3 CeleryExecutor topology, and what this demo adds around it.
AIRFLOW_SERVICES = {
    "airflow-apiserver",
    "airflow-scheduler",
    "airflow-dag-processor",
    "airflow-triggerer",
    "airflow-worker",
    "airflow-init",
}
OTHER_SERVICES = {"postgres", "redis", "minio", "minio-init", "metastore", "acid-demo-table"}
CONNECTION_VAR = "AIRFLOW_CONN_ACID_DEFAULT"
DAGS_FOLDER = "/opt/airflow/dags"

_VARIABLE = re.compile(r"\$\{(?P<name>\w+)(?::?-(?P<default>[^}]*))?\}|\$\$")


def interpolate(value: Any) -> Any:
    """Compose's ``${VAR}``, ``${VAR:-default}`` and ``$$`` as with no variable set."""
    if isinstance(value, str):
        return _VARIABLE.sub(lambda m: "$" if m.group(0) == "$$" else m["default"] or "", value)
    if isinstance(value, list):
        return [interpolate(v) for v in value]
    if isinstance(value, dict):
        return {k: interpolate(v) for k, v in value.items()}
    return value


def load_compose() -> dict[str, Any]:
    return interpolate(yaml.safe_load(COMPOSE.read_text()))


def as_text(command: Any) -> str:
    """A service's command or entrypoint (string or list) as one string."""
    if command is None:
        return ""
    return command if isinstance(command, str) else " ".join(str(c) for c in command)


def environment(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):  # the KEY=value form
        env = dict(item.split("=", 1) for item in env)
    return {k: "" if v is None else str(v) for k, v in env.items()}


def airflow_services(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {n: s for n, s in doc["services"].items() if n.startswith("airflow-")}


def s3_bucket(uri: str) -> str:
    parts = urlsplit(uri)
    assert parts.scheme == "s3", uri
    return parts.netloc


def connection(doc: dict[str, Any]) -> dict[str, Any]:
    return json.loads(doc["x-airflow-common"]["environment"][CONNECTION_VAR])


def minio_api_port(minio: dict[str, Any]) -> int:
    args = shlex.split(as_text(minio.get("command")))
    address = args[args.index("--address") + 1] if "--address" in args else ":9000"
    return int(address.rsplit(":", 1)[1])


def mc_bucket(doc: dict[str, Any]) -> tuple[str, str]:
    """(alias, bucket) of the ``mc mb`` in the minio-init job."""
    script = as_text(doc["services"]["minio-init"].get("command"))
    made = re.findall(r"\bmc\s+mb\s+(?:--?[\w-]+\s+)*(\w+)/([a-z0-9][a-z0-9.-]+)", script)
    assert len(made) == 1, f"expected one 'mc mb ALIAS/BUCKET' in minio-init, found {made}"
    return made[0]


def demo_job_target(doc: dict[str, Any]) -> str:
    command = doc["services"]["acid-demo-table"]["command"]
    targets = [a for a in shlex.split(as_text(command)) if a.startswith("s3://")]
    assert len(targets) == 1, command
    return targets[0]


# ---------------------------------------------------------------------------- the checks


def topology_problems(doc: dict[str, Any]) -> list[str]:
    problems = []
    services = set(doc.get("services", {}))
    for name in sorted((AIRFLOW_SERVICES | OTHER_SERVICES) - services):
        problems.append(f"service {name} is missing")
    common = doc["x-airflow-common"]["environment"]
    if common.get("AIRFLOW__CORE__EXECUTOR") != "CeleryExecutor":
        problems.append("the common environment does not use the CeleryExecutor")
    if not common.get("AIRFLOW__API_AUTH__JWT_SECRET"):
        problems.append("no shared AIRFLOW__API_AUTH__JWT_SECRET: workers' tokens would fail")
    return problems


def image_problems(doc: dict[str, Any]) -> list[str]:
    """Every Airflow service, and the job writing the demo table, runs the provider image."""
    reference = doc["x-airflow-image"]
    problems = []
    if not reference.get("build"):
        problems.append("x-airflow-image has no build section")
    build = reference.get("build") or {}
    context = REPO / (build.get("context", ".") if isinstance(build, dict) else build)
    dockerfile = build.get("dockerfile", "Dockerfile") if isinstance(build, dict) else "Dockerfile"
    if (context / dockerfile).resolve() != DOCKERFILE:
        problems.append(f"the image is not built from {DOCKERFILE.name} at the repository root")
    for name, service in {**airflow_services(doc), **_demo_job(doc)}.items():
        for key in ("image", "build"):
            if service.get(key) != reference.get(key):
                problems.append(f"{name}: {key} {service.get(key)!r} != {reference.get(key)!r}")
    return problems


def _demo_job(doc: dict[str, Any]) -> dict[str, Any]:
    return {"acid-demo-table": doc["services"].get("acid-demo-table", {})}


def environment_problems(doc: dict[str, Any]) -> list[str]:
    """Every Airflow service has the whole common environment (connection, secrets), unchanged."""
    common = environment(doc["x-airflow-common"])
    problems = []
    for name, service in airflow_services(doc).items():
        env = environment(service)
        for key, value in common.items():
            if key not in env:
                problems.append(f"{name}: {key} is missing")
            elif env[key] != value:
                problems.append(f"{name}: {key} differs from the common environment")
        if env.get("_PIP_ADDITIONAL_REQUIREMENTS"):
            problems.append(f"{name}: installs packages at start; the image must hold them")
        if name != "airflow-init" and service.get("user") != doc["x-airflow-common"]["user"]:
            problems.append(f"{name}: runs as another user than the common block's")
    return problems


def connection_problems(doc: dict[str, Any]) -> list[str]:
    """The ``acid`` connection reaches the MinIO service with MinIO's own credentials."""
    problems = []
    conn = connection(doc)
    extra = conn.get("extra") or {}
    if conn.get("conn_type") != "acid":
        problems.append(f"{CONNECTION_VAR} is of type {conn.get('conn_type')!r}, not 'acid'")
    endpoint = urlsplit(extra.get("endpoint_url", ""))
    minio = doc["services"].get(endpoint.hostname or "")
    if minio is None or "minio/minio" not in str(minio.get("image", "")):
        problems.append(f"the endpoint host {endpoint.hostname!r} is not the MinIO service")
    else:
        if endpoint.port != minio_api_port(minio):
            problems.append(f"endpoint port {endpoint.port} is not MinIO's API port")
        minio_env = environment(minio)
        if (extra.get("key"), extra.get("secret")) != (
            minio_env.get("MINIO_ROOT_USER"),
            minio_env.get("MINIO_ROOT_PASSWORD"),
        ):
            problems.append("the connection's key/secret are not MinIO's credentials")
    if not extra.get("region_name"):
        problems.append("the connection names no region")
    demo_env = environment(doc["services"]["acid-demo-table"])
    if demo_env.get("AWS_ENDPOINT_URL_S3") != extra.get("endpoint_url"):
        problems.append("the demo-table job writes to another endpoint than the connection")
    if (demo_env.get("AWS_ACCESS_KEY_ID"), demo_env.get("AWS_SECRET_ACCESS_KEY")) != (
        extra.get("key"),
        extra.get("secret"),
    ):
        problems.append("the demo-table job uses other credentials than the connection")
    return problems


def bucket_problems(doc: dict[str, Any]) -> list[str]:
    """One bucket everywhere: created by mc, uploaded to, named by the connection and config."""
    problems = []
    alias, bucket = mc_bucket(doc)
    init_script = as_text(doc["services"]["minio-init"].get("command"))
    minio_env = environment(doc["services"]["minio"])
    expected_alias = (
        f"mc alias set {alias} http://minio:{minio_api_port(doc['services']['minio'])} "
        f"{minio_env.get('MINIO_ROOT_USER')} {minio_env.get('MINIO_ROOT_PASSWORD')}"
    )
    if expected_alias not in " ".join(init_script.split()):
        problems.append(f"minio-init does not point alias {alias!r} at MinIO with its keys")
    common = environment(doc["x-airflow-common"])
    prefix = (connection(doc).get("extra") or {}).get("uri_prefix", "")
    if s3_bucket(prefix) != bucket:
        problems.append(f"the connection's uri_prefix {prefix!r} is not in bucket {bucket!r}")
    allowed = [p.strip() for p in common.get("AIRFLOW__ACID__ALLOWED_URI_PREFIXES", "").split(",")]
    if not any(allowed):
        problems.append("AIRFLOW__ACID__ALLOWED_URI_PREFIXES is empty")
    for allowed_prefix in filter(None, allowed):
        if s3_bucket(allowed_prefix) != bucket:
            problems.append(f"allowed prefix {allowed_prefix!r} is not in bucket {bucket!r}")
    target = demo_job_target(doc)
    if s3_bucket(target) != bucket:
        problems.append(f"the demo table goes to {target!r}, not to bucket {bucket!r}")
    if common.get("ACID_DEMO_TABLE_URI") != target:
        problems.append("ACID_DEMO_TABLE_URI is not where the demo-table job writes")
    if not any(target.startswith(p) for p in filter(None, allowed)):
        problems.append("the demo table is outside the allowed URI prefixes")
    waits = doc["services"]["acid-demo-table"].get("depends_on") or {}
    if (waits.get("minio-init") or {}).get("condition") != "service_completed_successfully":
        problems.append("the demo-table job does not wait for the bucket")
    return problems


def _dockerfile_instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    joined = re.sub(r"\\\n", " ", "\n".join(lines))
    out = []
    for line in joined.splitlines():
        if line.strip():
            instruction, _, args = line.strip().partition(" ")
            out.append((instruction.upper(), " ".join(args.split())))
    return out


def dockerfile_problems(text: str) -> list[str]:
    """FROM the official Airflow 3 image, COPY of this project, pip install of it with [s3]."""
    problems = []
    instructions = _dockerfile_instructions(text)
    args = {}
    for instruction, rest in instructions:
        if instruction == "ARG" and "=" in rest:
            name, _, default = rest.partition("=")
            args[name] = default
    bases = [
        re.sub(r"\$\{?(\w+)\}?", lambda m: args.get(m[1], m[0]), rest)
        for instruction, rest in instructions
        if instruction == "FROM"
    ]
    if not bases or not bases[-1].startswith("apache/airflow:3."):
        problems.append(f"the image is not FROM apache/airflow:3.x (found {bases})")
    copied: dict[str, str] = {}  # source -> destination folder
    for instruction, rest in instructions:
        if instruction == "COPY":
            parts = [p for p in shlex.split(rest) if not p.startswith("--")]
            *sources, destination = parts
            for source in sources:
                copied[source] = destination.rstrip("/")
    project = copied.get("pyproject.toml")
    if project is None:
        problems.append("pyproject.toml is not copied into the image")
    elif copied.get("airflow_provider_acid") != f"{project}/airflow_provider_acid":
        problems.append("the package folder is not copied beside pyproject.toml")
    installs = [
        shlex.split(rest)
        for instruction, rest in instructions
        if instruction == "RUN" and re.search(r"\bpip\s+install\b", rest)
    ]
    targets = [arg for words in installs for arg in words if arg.split("[", 1)[0] == project]
    if not targets:
        problems.append(f"no 'pip install {project}[s3]' of the copied project")
    elif not any(re.search(r"\[(?:[\w,-]*,)?s3(?:,[\w,-]*)?\]$", t) for t in targets):
        problems.append(f"the project is installed without its s3 extra: {targets}")
    return problems


def dags_mount_problems(doc: dict[str, Any]) -> list[str]:
    """The repository's dags/ is the DAGs folder of every Airflow service."""
    problems = []
    if not (REPO / "dags").is_dir():
        problems.append("the repository has no dags/ folder")
    for name, service in airflow_services(doc).items():
        mounts = [str(v).split(":") for v in service.get("volumes") or []]
        sources = [m[0] for m in mounts if len(m) >= 2 and m[1] == DAGS_FOLDER]
        if not sources or (REPO / sources[0]).resolve() != (REPO / "dags").resolve():
            problems.append(f"{name}: ./dags is not mounted at {DAGS_FOLDER}")
    return problems


# ---------------------------------------------------------------------------- the tests

CHECKS = {
    "topology": topology_problems,
    "image": image_problems,
    "environment": environment_problems,
    "connection": connection_problems,
    "bucket": bucket_problems,
    "dags": dags_mount_problems,
}


@pytest.mark.parametrize("check", sorted(CHECKS))
def test_the_compose_file_holds_together(check):
    assert CHECKS[check](load_compose()) == []


def test_the_dockerfile_installs_this_provider_with_s3():
    assert dockerfile_problems(DOCKERFILE.read_text()) == []


def test_the_compose_file_is_what_the_checks_read():
    """Guards the reading itself: merge keys resolved, the values as written."""
    doc = load_compose()
    services = airflow_services(doc)
    assert set(services) >= AIRFLOW_SERVICES
    assert services["airflow-triggerer"]["command"] == "triggerer"
    assert connection(doc)["extra"]["endpoint_url"] == "http://minio:9000"
    assert mc_bucket(doc) == ("demo", "warehouse")
    assert demo_job_target(doc) == "s3://warehouse/demo/table"
    assert services["airflow-worker"]["environment"]["DUMB_INIT_SETSID"] == "0"


def test_the_demo_job_runs_the_script_in_docker():
    """The job's script is the one in ./docker, mounted where the command looks for it."""
    job = load_compose()["services"]["acid-demo-table"]
    mounts = dict(str(v).split(":")[:2] for v in job["volumes"])
    inside = mounts["./docker"]
    script = shlex.split(as_text(job["command"]))[0]
    assert script.startswith(inside + "/")
    local = REPO / "docker" / script[len(inside) + 1 :]
    assert local.is_file()
    assert "python -m airflow_provider_acid.testing" in local.read_text()
    if shutil.which("bash"):
        subprocess.run(["bash", "-n", str(local)], check=True)


def _parent(doc: dict[str, Any], path: str) -> tuple[Any, Any]:
    """The container of ``path`` (keys joined by dots, list indexes as numbers) and its key."""
    *keys, last = (int(k) if k.isdigit() else k for k in path.split("."))
    node = doc
    for key in keys:
        node = node[key]
    return node, last


def _set(path: str, value: Any) -> Any:
    def mutate(doc: dict[str, Any]) -> None:
        node, key = _parent(doc, path)
        node[key] = value

    return mutate


def _delete(path: str) -> Any:
    def mutate(doc: dict[str, Any]) -> None:
        node, key = _parent(doc, path)
        del node[key]

    return mutate


def _replace_in(path: str, old: str, new: str) -> Any:
    def mutate(doc: dict[str, Any]) -> None:
        node, key = _parent(doc, path)
        assert old in node[key], (path, old)
        node[key] = node[key].replace(old, new)

    return mutate


BROKEN = {
    "worker on another image": (
        "image",
        _set("services.airflow-worker.image", "apache/airflow:3.3.2"),
    ),
    "triggerer without the build": ("image", _delete("services.airflow-triggerer.build")),
    "demo job on another image": ("image", _set("services.acid-demo-table.image", "python:3.11")),
    "triggerer without the connection": (
        "environment",
        _delete("services.airflow-triggerer.environment.AIRFLOW_CONN_ACID_DEFAULT"),
    ),
    "worker with its own jwt secret": (
        "environment",
        _set("services.airflow-worker.environment.AIRFLOW__API_AUTH__JWT_SECRET", "other"),
    ),
    "endpoint on another host": (
        "connection",
        lambda doc: _rewrite_connection(doc, endpoint_url="http://minio-other:9000"),
    ),
    "endpoint on the console port": (
        "connection",
        lambda doc: _rewrite_connection(doc, endpoint_url="http://minio:9001"),
    ),
    "connection with other keys": ("connection", lambda doc: _rewrite_connection(doc, key="x")),
    "mc makes another bucket": (
        "bucket",
        _replace_in("services.minio-init.command.0", "demo/warehouse", "demo/lake"),
    ),
    "prefix in another bucket": (
        "bucket",
        lambda doc: _rewrite_connection(doc, uri_prefix="s3://lake"),
    ),
    "allowed prefixes elsewhere": (
        "bucket",
        _set("x-airflow-common.environment.AIRFLOW__ACID__ALLOWED_URI_PREFIXES", "s3://lake/"),
    ),
    "demo table uploaded elsewhere": (
        "bucket",
        _set("services.acid-demo-table.command", ["/opt/acid-docker/x.sh", "s3://lake/t"]),
    ),
    "scheduler without the dags": ("dags", _set("services.airflow-scheduler.volumes", [])),
    "dag-processor reading other dags": (
        "dags",
        _set("services.airflow-dag-processor.volumes", ["./other:/opt/airflow/dags"]),
    ),
    "no triggerer": ("topology", _delete("services.airflow-triggerer")),
}


def _rewrite_connection(doc: dict[str, Any], **extra: str) -> None:
    conn = connection(doc)
    conn["extra"].update(extra)
    for env in [doc["x-airflow-common"]["environment"]] + [
        s["environment"] for s in airflow_services(doc).values()
    ]:
        env[CONNECTION_VAR] = json.dumps(conn)


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_the_checks_catch(case):
    check, mutate = BROKEN[case]
    doc = copy.deepcopy(load_compose())
    mutate(doc)
    assert CHECKS[check](doc), f"{check} check missed: {case}"


@pytest.mark.parametrize(
    ("case", "edit"),
    [
        ("another base image", lambda t: t.replace("apache/airflow:3.", "python:3.")),
        ("no pip install of the project", lambda t: t.replace('"/opt/provider[s3]"', "s3fs")),
        ("installed without s3", lambda t: t.replace("/opt/provider[s3]", "/opt/provider")),
        ("project not copied", lambda t: t.replace("pyproject.toml README.md", "README.md")),
    ],
)
def test_the_dockerfile_check_catches(case, edit):
    text = DOCKERFILE.read_text()
    broken = edit(text)
    assert broken != text, case
    assert dockerfile_problems(broken), case
