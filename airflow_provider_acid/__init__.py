"""Apache Airflow provider for Hive ACID tables: pruned slice manifests and Parquet snapshots."""

from __future__ import annotations

__version__ = "0.1.0"


def get_provider_info() -> dict:
    """Describe this provider to Airflow's ProvidersManager."""
    return {
        "package-name": "airflow-provider-acid",
        "name": "Hive ACID",
        "description": "Hive ACID tables to clean Parquet snapshots, straight from storage.",
        "versions": [__version__],
    }
