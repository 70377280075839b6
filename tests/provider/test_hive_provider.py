"""Beside the official apache-hive provider (installed by the ``test`` extra, its newest release).

Both providers load in one Airflow with no "already registered" message: this provider's
metastore type is ``acid_metastore``, and ``hive_metastore`` stays the apache-hive provider's.
Both connection types work against the real metastore: ours through its hook (the UI's Test
button), the apache-hive one through that provider's ``HiveMetastoreHook``, and a
``hive_metastore`` connection also serves this provider's operators. Where the apache-hive
provider is absent, this provider registers ``hive_metastore`` itself, so connections made for
earlier releases keep their form and Test button.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from importlib.metadata import version
from pathlib import Path

AIRFLOW = str(Path(sys.executable).with_name("airflow"))
HIVE = "apache-airflow-providers-apache-hive"


def fresh_env(home: Path) -> dict[str, str]:
    return {**os.environ, "AIRFLOW_HOME": str(home), "AIRFLOW__CORE__LOAD_EXAMPLES": "False"}


def providers_json(home: Path, what: str) -> list[dict]:
    """``airflow providers WHAT -o json`` in a fresh home, with no "already registered"."""
    done = subprocess.run(
        [AIRFLOW, "providers", what, "-o", "json"],
        env=fresh_env(home),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "already registered" not in done.stdout + done.stderr
    return json.loads(done.stdout)


def test_both_providers_load_with_no_already_registered_message(tmp_path):
    listed = {p["package_name"]: p["version"] for p in providers_json(tmp_path, "list")}
    assert listed[HIVE] == version(HIVE)
    assert listed["airflow-provider-acid"] == version("airflow-provider-acid")
    by_type = {h["connection_type"]: h for h in providers_json(tmp_path, "hooks")}
    assert by_type["acid_metastore"]["package_name"] == "airflow-provider-acid"
    assert by_type["hive_metastore"]["package_name"] == HIVE
    assert by_type["hive_metastore"]["class"].endswith(".HiveMetastoreHook")


def test_the_apache_hive_connection_type_works_against_the_real_metastore(
    monkeypatch, metastore_uri, metastore_db
):
    """A ``hive_metastore`` connection: the apache-hive provider's own hook lists the
    databases and sees the table, and this provider's hook reads the same connection."""
    from airflow.providers.apache.hive.hooks.hive import HiveMetastoreHook

    from airflow_provider_acid.hooks.metastore import AcidMetastoreHook

    host, port = metastore_uri.removeprefix("thrift://").rsplit(":", 1)
    conn = {"conn_type": "hive_metastore", "host": host, "port": int(port)}
    monkeypatch.setenv("AIRFLOW_CONN_HIVE_METASTORE_TEST", json.dumps(conn))

    theirs = HiveMetastoreHook(metastore_conn_id="hive_metastore_test")
    assert metastore_db.name in theirs.get_databases("*")

    ours = AcidMetastoreHook("hive_metastore_test")
    assert ours.uri == metastore_uri
    ok, message = ours.test_connection()
    assert ok and message.startswith(metastore_uri), message
    with ours.get_conn() as client:
        assert metastore_db.name in client.databases()


#: Run in a subprocess: the apache-hive provider hidden (its distribution, so its entry point,
#: and its modules), as on a machine where it is not installed.
WITHOUT_APACHE_HIVE = textwrap.dedent(
    """
    import importlib.metadata, importlib_metadata, json, logging, sys

    HIVE = "apache-airflow-providers-apache-hive"

    def hiding(distributions):
        def without(**kwargs):
            for dist in distributions(**kwargs):
                if (dist.metadata["name"] or "").lower() != HIVE:
                    yield dist
        return without

    def missing(lookup):
        def find(name):
            if name.lower().replace("_", "-") == HIVE:
                raise importlib.metadata.PackageNotFoundError(name)
            return lookup(name)
        return find

    for module in (importlib.metadata, importlib_metadata):
        module.distributions = hiding(module.distributions)
        module.distribution = missing(module.distribution)

    class Blocker:
        def find_spec(self, name, path=None, target=None):
            if name.startswith("airflow.providers.apache.hive"):
                raise ImportError(f"{name} is blocked (no apache-hive provider here)")
            return None

    sys.meta_path.insert(0, Blocker())
    seen = []
    handler = logging.Handler()
    handler.emit = lambda record: seen.append(record.getMessage())
    logging.getLogger().addHandler(handler)

    from airflow.providers_manager import ProvidersManager

    manager = ProvidersManager()
    hooks = {t: manager.hooks[t] for t in ("acid_metastore", "hive_metastore")}
    print(json.dumps({
        "providers": sorted(manager.providers),
        "hooks": {t: [h.package_name, h.hook_class_name] for t, h in hooks.items()},
        "widgets": sorted(k for k in manager.connection_form_widgets if "metastore" in k),
        "already": [m for m in seen if "already registered" in m],
    }))
    """
)


def test_without_the_apache_hive_provider_hive_metastore_stays_registered(
    tmp_path, monkeypatch, metastore_uri
):
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_APACHE_HIVE],
        env=fresh_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert HIVE not in seen["providers"] and "airflow-provider-acid" in seen["providers"]
    assert seen["hooks"]["acid_metastore"] == [
        "airflow-provider-acid",
        "airflow_provider_acid.hooks.metastore.AcidMetastoreHook",
    ]
    assert seen["hooks"]["hive_metastore"] == [
        "airflow-provider-acid",
        "airflow_provider_acid.hooks.metastore.AcidHiveMetastoreHook",
    ]
    assert "extra__hive_metastore__auth_mechanism" in seen["widgets"]
    assert seen["already"] == []

    # and that hook's Test button reaches the real metastore
    from airflow_provider_acid.hooks.metastore import AcidHiveMetastoreHook

    host, port = metastore_uri.removeprefix("thrift://").rsplit(":", 1)
    conn = {"conn_type": "hive_metastore", "host": host, "port": int(port)}
    monkeypatch.setenv("AIRFLOW_CONN_METASTORE_DEFAULT", json.dumps(conn))
    ok, message = AcidHiveMetastoreHook().test_connection()
    assert ok and message.startswith(metastore_uri), message
