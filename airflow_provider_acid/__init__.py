"""Apache Airflow provider for Hive ACID tables: pruned slice manifests and Parquet snapshots."""

from __future__ import annotations

__version__ = "0.1.0"

_INTEGRATION = "Hive ACID"


def get_provider_info() -> dict:
    """Describe this provider to Airflow's ProvidersManager (no Airflow import needed)."""
    return {
        "package-name": "airflow-provider-acid",
        "name": "Hive ACID",
        "description": "Hive ACID tables to clean, query-ready Parquet snapshots, straight "
        "from storage: pruned slice manifests, per-bucket compaction, sensors for new deltas.",
        "versions": [__version__],
        "integrations": [
            {
                "integration-name": _INTEGRATION,
                "external-doc-url": "https://cwiki.apache.org/confluence/display/Hive/Hive+Transactions",
                "tags": ["apache"],
            }
        ],
        "hooks": [
            {
                "integration-name": _INTEGRATION,
                "python-modules": ["airflow_provider_acid.hooks.acid"],
            }
        ],
        "operators": [
            {
                "integration-name": _INTEGRATION,
                "python-modules": ["airflow_provider_acid.operators.acid"],
            }
        ],
        "sensors": [
            {
                "integration-name": _INTEGRATION,
                "python-modules": ["airflow_provider_acid.sensors.acid"],
            }
        ],
        "triggers": [
            {
                "integration-name": _INTEGRATION,
                "python-modules": ["airflow_provider_acid.triggers.acid"],
            }
        ],
        "connection-types": [
            {
                "hook-class-name": "airflow_provider_acid.hooks.acid.AcidHook",
                "hook-name": "Hive ACID storage",
                "connection-type": "acid",
                "conn-fields": {
                    "uri_prefix": {
                        "label": "Storage URI prefix",
                        "schema": {"type": ["string", "null"]},
                        "description": "Where tables and snapshots live, e.g. s3://warehouse",
                    },
                    "endpoint_url": {
                        "label": "Endpoint URL",
                        "schema": {"type": ["string", "null"]},
                        "description": "S3-compatible endpoint (MinIO, ...); empty for AWS",
                    },
                    "region_name": {
                        "label": "Region",
                        "schema": {"type": ["string", "null"]},
                    },
                    "key": {
                        "label": "Access key id",
                        "schema": {"type": ["string", "null"]},
                    },
                    "secret": {
                        "label": "Secret access key",
                        "schema": {"type": ["string", "null"], "format": "password"},
                    },
                    "storage_options": {
                        "label": "Other fsspec storage options (JSON)",
                        "schema": {"type": ["string", "null"]},
                    },
                },
                "ui-field-behaviour": {
                    "hidden-fields": ["host", "schema", "port", "login", "password", "extra"],
                    "relabeling": {},
                    "placeholders": {
                        "uri_prefix": "s3://warehouse",
                        "endpoint_url": "http://127.0.0.1:9000",
                        "storage_options": '{"use_ssl": false}',
                    },
                },
            }
        ],
        "config": {
            "acid": {
                "description": "Hive ACID provider settings.",
                "options": {
                    "allowed_uri_prefixes": {
                        "description": "Comma-separated URI prefixes that runs triggered from "
                        "the UI (the on-demand DAG's Params form) may read from and write to. "
                        "Empty: UI-triggered runs may touch nothing.",
                        "version_added": "0.1.0",
                        "type": "string",
                        "example": "s3://warehouse/,/data/hive/",
                        "default": "",
                    },
                },
            }
        },
    }
