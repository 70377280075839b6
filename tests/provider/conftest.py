"""An initialised SQLite metadata database in the session's throwaway AIRFLOW_HOME."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def airflow_db() -> Path:
    home = Path(os.environ["AIRFLOW_HOME"])
    airflow = Path(sys.executable).with_name("airflow")
    done = subprocess.run(
        [str(airflow), "db", "migrate"], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return home
