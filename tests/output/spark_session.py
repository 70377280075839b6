"""A local Spark 4.0 that reads Iceberg and Delta tables: one JVM for the whole test session.

Use it from a test module of this folder with ``from spark_session import spark`` (the fixture
is then that module's; pytest still builds it once per session). The jars come from
``scripts/spark_jars.py`` (fetched through Maven into ``.cache/spark-jars/`` on first use).

The session runs ``local[1]`` with a small heap, no UI, one shuffle partition and UTC as its
time zone, listening on 127.0.0.1 only. It is configured for both formats:

* Delta: Delta's session extension and ``DeltaCatalog`` as the session catalog, so
  ``spark.read.format("delta").load(uri)``, ``option("versionAsOf", n)`` and
  ``spark.sql("SELECT ... FROM delta.`/path`")`` work;
* Iceberg: Iceberg's session extension and a Hadoop catalog named ``iceberg`` whose warehouse is
  a session temp folder; other Iceberg catalogs can be added at run time, since Spark builds a
  catalog on its first use by name, e.g. for pyiceberg's SQL catalog on SQLite::

      spark.conf.set("spark.sql.catalog.pyi", "org.apache.iceberg.spark.SparkCatalog")
      spark.conf.set("spark.sql.catalog.pyi.catalog-impl", "org.apache.iceberg.jdbc.JdbcCatalog")
      spark.conf.set("spark.sql.catalog.pyi.uri", "jdbc:sqlite:/path/catalog.db")
      spark.table("pyi.ns.table")

Nothing is skipped: if the jars cannot be fetched or Spark does not start, the fixture fails
with the cause.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "spark_jars.py"


def _spark_jars():
    spec = importlib.util.spec_from_file_location("spark_jars", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("spark_jars", module)
    spec.loader.exec_module(module)
    return module


def spark_settings(work: Path) -> dict[str, str]:
    """Every setting of the test session (the jars fetched first)."""
    spark_jars = _spark_jars()
    jars = spark_jars.fetch()
    conf = spark_jars.spark_conf(jars, iceberg_warehouse=(work / "iceberg-warehouse").as_uri())
    jvm = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xss1m -Djava.net.preferIPv4Stack=true"
    conf.update(
        {
            "spark.master": "local[1]",
            "spark.app.name": "airflow-provider-acid-tests",
            "spark.driver.memory": os.environ.get("ACID_TEST_SPARK_MEMORY", "768m"),
            "spark.driver.extraJavaOptions": jvm,
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.shuffle.partitions": "1",
            # Delta rebuilds a table's state from its log in 50 partitions by default
            "spark.databricks.delta.snapshotPartitions": "1",
            "spark.default.parallelism": "1",
            "spark.sql.session.timeZone": "UTC",
            "spark.sql.catalogImplementation": "in-memory",
            "spark.sql.warehouse.dir": (work / "spark-warehouse").as_uri(),
            "spark.local.dir": str(work / "spark-local"),
        }
    )
    return conf


_SESSION: list[object] = []  # the one session of this process, whichever module asked first


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """A local SparkSession with Iceberg and Delta configured (stopped at the session's end).

    Each test module that imports this fixture gets its own fixture definition from pytest;
    they all share one session (and one JVM), built the first time."""
    if _SESSION:
        yield _SESSION[0]
        return
    from pyspark.sql import SparkSession

    work = tmp_path_factory.mktemp("spark")
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder
    for key, value in spark_settings(work).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    _SESSION.append(session)
    try:
        yield session
    finally:
        _SESSION.clear()
        session.stop()
        # py4j logs the closing of its connections from __del__, after pytest closed streams
        logging.getLogger("py4j").setLevel(logging.WARNING)
