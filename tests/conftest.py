"""Suite-wide fixtures: a throwaway AIRFLOW_HOME and the Hive fixture tables (hive_fixtures)."""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

# Airflow reads its home at import time: every test session gets a throwaway one, removed
# when the session's process ends (a home given by the environment is left alone).
if "AIRFLOW_HOME" not in os.environ:
    os.environ["AIRFLOW_HOME"] = tempfile.mkdtemp(prefix="acid-airflow-home-")
    atexit.register(shutil.rmtree, os.environ["AIRFLOW_HOME"], ignore_errors=True)
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
os.environ.setdefault(
    "AIRFLOW__CORE__DAGS_FOLDER", str(Path(__file__).resolve().parents[1] / "dags")
)

from hive_fixtures import arrange_fixture_table  # noqa: E402

# A real KDC, the Kerberos metastore and HDFS, for the kerberos and hdfs tests.
from kerberos_fixtures import (  # noqa: E402, F401
    hdfs_ha,
    hdfs_kerberos,
    hdfs_plain,
    kdc,
    kerberos_metastore_uri,
)

# A real Hive Metastore for every folder: metastore_uri, metastore, metastore_db.
from metastore_fixtures import (  # noqa: E402, F401
    expiring_log_metastore_uri,
    metastore,
    metastore_db,
    metastore_uri,
    notifications_metastore_uri,
    sales,
    sasl_metastore_uri,
)


@pytest.fixture
def hive_table(tmp_path: Path) -> Callable[[str], Path]:
    """A factory: ``hive_table("nation")`` lays out that fixture table in a temp folder."""

    def make(name: str) -> Path:
        return arrange_fixture_table(name, tmp_path / "tables" / name)

    return make


@pytest.fixture(scope="session")
def airflow_db() -> Path:
    """An initialised SQLite metadata database in the session's throwaway AIRFLOW_HOME."""
    home = Path(os.environ["AIRFLOW_HOME"])
    airflow = Path(sys.executable).with_name("airflow")
    done = subprocess.run(
        [str(airflow), "db", "migrate"], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return home
