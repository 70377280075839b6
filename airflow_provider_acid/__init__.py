"""Apache Airflow provider for Hive ACID tables: pruned slice manifests and Parquet snapshots."""

from __future__ import annotations

__version__ = "0.1.0"

_INTEGRATION = "Hive ACID"
_METASTORE = "Hive Metastore (ACID)"


def get_provider_info() -> dict:
    """Describe this provider to Airflow's ProvidersManager (no Airflow import needed)."""
    return {
        "package-name": "airflow-provider-acid",
        "name": "Hive ACID",
        "description": "Hive ACID tables to clean, query-ready Parquet snapshots, straight "
        "from storage: pruned slice manifests, per-bucket compaction, sensors and asset "
        "watchers for new writes, OpenLineage events from every operator.",
        "versions": [__version__],
        "integrations": [
            {
                "integration-name": _INTEGRATION,
                "external-doc-url": "https://cwiki.apache.org/confluence/display/Hive/Hive+Transactions",
                "tags": ["apache"],
            },
            {
                "integration-name": _METASTORE,
                "external-doc-url": "https://cwiki.apache.org/confluence/display/Hive/AdminManual+Metastore+3.0+Administration",
                "tags": ["apache"],
            },
        ],
        # Airflow lists modules; the classes each holds are in its docstring and the README:
        # hooks AcidHook (connection "acid"), AcidMetastoreHook ("acid_metastore"),
        # AcidHiveMetastoreHook ("hive_metastore", where the apache-hive provider is absent).
        "hooks": [
            {
                "integration-name": _INTEGRATION,
                "python-modules": ["airflow_provider_acid.hooks.acid"],
            },
            {
                "integration-name": _METASTORE,
                "python-modules": ["airflow_provider_acid.hooks.metastore"],
            },
        ],
        # AcidSliceManifestOperator, AcidPublishPruningMetricsOperator (pruning);
        # AcidPlanSnapshotOperator, AcidCompactOperator, AcidCommitSnapshotOperator (acid; each
        # with OpenLineage facets); acid_snapshot_tasks wires them.
        "operators": [
            {
                "integration-name": _INTEGRATION,
                "python-modules": [
                    "airflow_provider_acid.operators.pruning",
                    "airflow_provider_acid.operators.acid",
                    "airflow_provider_acid.operators.snapshot_tasks",
                    "airflow_provider_acid.operators.change_feed",
                ],
            }
        ],
        # AcidDeltaSensor (storage), AcidMetastoreWriteSensor (committed writes)
        "sensors": [
            {
                "integration-name": _INTEGRATION,
                "python-modules": ["airflow_provider_acid.sensors.acid"],
            },
            {
                "integration-name": _METASTORE,
                "python-modules": ["airflow_provider_acid.sensors.metastore"],
            },
        ],
        # AcidDeltaTrigger, AcidMetastoreWriteTrigger (deferred sensors); in events,
        # AcidDeltaEventTrigger and AcidMetastoreWriteEventTrigger (asset watchers)
        "triggers": [
            {
                "integration-name": _INTEGRATION,
                "python-modules": [
                    "airflow_provider_acid.triggers.acid",
                    "airflow_provider_acid.triggers.events",
                ],
            },
            {
                "integration-name": _METASTORE,
                "python-modules": ["airflow_provider_acid.triggers.metastore"],
            },
        ],
        "extra-links": ["airflow_provider_acid.operators.links.AcidPruningReportLink"],
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
                    "hdfs_namenodes": {
                        "label": "HDFS namenode HTTP endpoints",
                        "schema": {"type": ["string", "null"]},
                        "description": "hdfs:// authority to WebHDFS URLs: "
                        "nn1:8020=http://nn1:9870;prod=http://nn1:9870,http://nn2:9870 (HA)",
                    },
                    "hdfs_kerberos": {
                        "label": "HDFS with Kerberos (SPNEGO)",
                        "schema": {"type": ["boolean", "null"]},
                    },
                    "kerberos_principal": {
                        "label": "Kerberos principal (HDFS)",
                        "schema": {"type": ["string", "null"]},
                        "description": "user@REALM, logged in from the keytab; empty: KRB5CCNAME",
                    },
                    "kerberos_keytab": {
                        "label": "Kerberos keytab (HDFS)",
                        "schema": {"type": ["string", "null"]},
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
            },
            _metastore_connection("acid_metastore"),
            # the apache-hive provider's type, registered only where that provider is absent
            *([] if _apache_hive_installed() else [_metastore_connection("hive_metastore")]),
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


#: The distribution that registers the ``hive_metastore`` connection type.
_APACHE_HIVE = "apache-airflow-providers-apache-hive"


def _apache_hive_installed() -> bool:
    """Whether the apache-hive provider is installed (it owns ``hive_metastore``)."""
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        distribution(_APACHE_HIVE)
    except PackageNotFoundError:
        return False
    return True


def _metastore_connection(conn_type: str) -> dict:
    """The metastore connection type ``conn_type``: the same form, read the same way."""
    hook = "AcidMetastoreHook" if conn_type == "acid_metastore" else "AcidHiveMetastoreHook"
    return {
        "hook-class-name": f"airflow_provider_acid.hooks.metastore.{hook}",
        "hook-name": "Hive Metastore (ACID)"
        if conn_type == "acid_metastore"
        else "Hive Metastore Thrift",
        "connection-type": conn_type,
        "conn-fields": {
            "auth_mechanism": {
                "label": "Authentication",
                "schema": {
                    "type": ["string", "null"],
                    "enum": [None, "NOSASL", "PLAIN", "LDAP", "CONFIG", "GSSAPI"],
                },
                "description": "NOSASL (plain Thrift, the default), PLAIN (SASL "
                "PLAIN with the login and password; LDAP and CONFIG are PLAIN too) or "
                "GSSAPI (Kerberos)",
            },
            "kerberos_service_name": {
                "label": "Kerberos service name (GSSAPI)",
                "schema": {"type": ["string", "null"]},
                "description": "The metastore principal's service part (default hive)",
            },
            "principal": {
                "label": "Metastore principal (GSSAPI)",
                "schema": {"type": ["string", "null"]},
                "description": "hive/_HOST@REALM: _HOST is each metastore host's name",
            },
            "kerberos_principal_host": {
                "label": "Principal host (GSSAPI)",
                "schema": {"type": ["string", "null"]},
                "description": "Put for _HOST instead of each host (a load balancer)",
            },
            "kerberos_principal": {
                "label": "Client principal (GSSAPI)",
                "schema": {"type": ["string", "null"]},
                "description": "user@REALM, logged in from the keytab; empty: the "
                "ticket cache (KRB5CCNAME, as airflow kerberos keeps it)",
            },
            "kerberos_keytab": {
                "label": "Client keytab (GSSAPI)",
                "schema": {"type": ["string", "null"]},
            },
            "kerberos_ccache": {
                "label": "Ticket cache (GSSAPI)",
                "schema": {"type": ["string", "null"]},
                "description": "FILE:/path; default KRB5CCNAME",
            },
            "timeout": {
                "label": "Timeout (seconds)",
                "schema": {"type": ["integer", "null"]},
            },
        },
        "ui-field-behaviour": {
            "hidden-fields": ["schema", "extra"],
            "relabeling": {
                "host": "Metastore host(s), comma-separated",
                "login": "User (SASL PLAIN)",
                "password": "Password (SASL PLAIN)",
            },
            "placeholders": {"host": "metastore.example.com", "port": "9083"},
        },
    }
