#!/usr/bin/env python3
"""The jars a local Spark 4.0 needs to read the Iceberg and Delta tables the sinks commit.

    python scripts/spark_jars.py fetch        # fetch once; print the jar paths, one a line
    python scripts/spark_jars.py classpath    # the same, comma-separated (for spark.jars)
    python scripts/spark_jars.py conf         # spark-submit --conf flags for both formats

`fetch` runs Maven on first use (scripts/spark/pom.xml, into the git-ignored .cache/spark-jars/
with its own Maven local repository, about 60 MB): Iceberg's Spark runtime jar, Delta's
delta-spark and delta-storage, and sqlite-jdbc (for Iceberg's JdbcCatalog over pyiceberg's SQLite
catalog). The jars land in a folder named after the pom's digest, so a changed pom fetches again
and never replaces the jars under a running JVM. Concurrent callers wait on a lock. The fetch's
log is .cache/spark-jars/fetch.log.

The versions match pyspark 4.0.x (the `readers` extra): Iceberg's runtime for Spark 4.0 (Scala
2.13) and Delta 4.0.x, the Delta line built against Spark 4.0.

Standard library only (Python 3.10+); needs mvn on PATH (or MVN) and java 17 to run Spark.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))  # scripts/: loaded by path too
from _maven import locked, log, maven, run_package, tail  # noqa: E402

POM = REPO / "scripts" / "spark" / "pom.xml"
CACHE = REPO / ".cache" / "spark-jars"
M2 = CACHE / "m2"
FETCH_LOG = CACHE / "fetch.log"
#: jar name prefixes the fetch must leave (a missing one is a failed fetch)
EXPECTED = (
    "iceberg-spark-runtime-4.0_2.13-",
    "delta-spark_2.13-",
    "delta-storage-",
    "sqlite-jdbc-",
)

#: Spark settings for both formats: the session extensions, Delta's catalog as the session
#: catalog (``delta.`path` `` and ``spark.read.format("delta")``) and an Iceberg catalog
#: (``iceberg``, a Hadoop catalog; its warehouse is given by the caller).
EXTENSIONS = (
    "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions,"
    "io.delta.sql.DeltaSparkSessionExtension"
)
SESSION_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"
ICEBERG_CATALOG = "org.apache.iceberg.spark.SparkCatalog"


class FetchError(RuntimeError):
    """Maven could not fetch the jars (the message holds the command and the log's tail)."""


def jar_dir() -> Path:
    digest = hashlib.sha256(POM.read_bytes()).hexdigest()[:16]
    return CACHE / f"jars-{digest}"


def _jars(root: Path) -> list[Path]:
    return sorted((root / "lib").glob("*.jar"))


def _missing(jars: list[Path]) -> list[str]:
    names = [j.name for j in jars]
    return [p for p in EXPECTED if not any(n.startswith(p) for n in names)]


def fetch() -> list[Path]:
    """The jars (fetched through Maven on first use of this pom), sorted by name."""
    root = jar_dir()
    stamp = root / "fetched"
    with locked(CACHE / "fetch.lock"):
        if stamp.is_file():
            return _jars(root)
        mvn = maven()
        if mvn is None:
            raise FetchError("mvn (Maven) is not on PATH; install it (apt-get install maven)")
        log(f"spark_jars: fetching Iceberg's and Delta's Spark jars with Maven (log: {FETCH_LOG})")
        t0 = time.monotonic()
        rc, cmd = run_package(mvn, POM, M2, root, FETCH_LOG)
        jars = _jars(root)
        missing = _missing(jars)
        if rc != 0 or missing:
            raise FetchError(
                f"Maven fetch failed (exit {rc}, missing {missing or 'nothing'}): "
                f"{cmd}\n--- last lines of {FETCH_LOG} ---\n{tail(FETCH_LOG)}"
            )
        stamp.write_text(f"{POM} sha256 {root.name}\n")
        log(f"spark_jars: {len(jars)} jars in {root / 'lib'} ({time.monotonic() - t0:.0f} s)")
        return jars


def spark_conf(jars: list[Path], iceberg_warehouse: str | None = None) -> dict[str, str]:
    """Spark settings that load ``jars`` and configure both formats."""
    conf = {
        "spark.jars": ",".join(str(j) for j in jars),
        "spark.sql.extensions": EXTENSIONS,
        "spark.sql.catalog.spark_catalog": SESSION_CATALOG,
        "spark.sql.catalog.iceberg": ICEBERG_CATALOG,
        "spark.sql.catalog.iceberg.type": "hadoop",
    }
    if iceberg_warehouse:
        conf["spark.sql.catalog.iceberg.warehouse"] = iceberg_warehouse
    return conf


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=("fetch", "classpath", "conf"))
    args = parser.parse_args(argv)
    try:
        jars = fetch()
    except FetchError as exc:
        log(f"spark_jars: {exc}")
        return 1
    if args.command == "fetch":
        print("\n".join(str(j) for j in jars))
    elif args.command == "classpath":
        print(",".join(str(j) for j in jars))
    else:
        print(" ".join(f"--conf {k}={v}" for k, v in spark_conf(jars).items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
