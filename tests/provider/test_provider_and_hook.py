"""The provider as Airflow sees it, and the hook's connection handling."""

from __future__ import annotations

import json

from airflow_provider_acid import get_provider_info
from airflow_provider_acid.hooks.acid import AcidHook, storage_options_from_extra


def test_airflow_discovers_the_provider_its_hook_and_connection_form():
    from airflow.providers_manager import ProvidersManager

    manager = ProvidersManager()
    assert "airflow-provider-acid" in manager.providers
    hook = manager.hooks["acid"]
    assert hook is not None and hook.hook_class_name.endswith("AcidHook")
    widgets = manager.connection_form_widgets
    assert widgets["extra__acid__secret"].is_sensitive
    assert not widgets["extra__acid__endpoint_url"].is_sensitive
    assert "acid" in manager.field_behaviours


def test_provider_info_names_existing_modules_and_the_config_section():
    import importlib

    info = get_provider_info()
    for kind in ("hooks", "operators", "sensors", "triggers"):
        for entry in info[kind]:
            for module in entry["python-modules"]:
                importlib.import_module(module)
    options = info["config"]["acid"]["options"]
    assert options["allowed_uri_prefixes"]["default"] == ""


def test_hook_builds_storage_options_from_the_connection(monkeypatch):
    extra = {
        "uri_prefix": "s3://warehouse",
        "endpoint_url": "http://127.0.0.1:9000",
        "key": "AKIA",
        "secret": "very-secret",
        "storage_options": '{"use_ssl": false}',
    }
    monkeypatch.setenv("AIRFLOW_CONN_ACID_TEST", json.dumps({"conn_type": "acid", "extra": extra}))
    hook = AcidHook("acid_test")
    assert hook.storage_options == {
        "key": "AKIA",
        "secret": "very-secret",
        "client_kwargs": {"endpoint_url": "http://127.0.0.1:9000"},
        "use_ssl": False,
    }
    assert hook.resolve_uri("sales/table") == "s3://warehouse/sales/table"
    assert hook.resolve_uri("s3://other/t") == "s3://other/t"
    assert "very-secret" not in repr(hook)


def test_the_storage_options_extra_adds_to_the_client_and_config_the_others_built():
    extra = {
        "endpoint_url": "http://127.0.0.1:9000",
        "max_attempts": "7",
        "read_timeout": "30",
        "storage_options": json.dumps(
            {
                "config_kwargs": {"s3": {"payload_signing_enabled": False}, "read_timeout": 5},
                "client_kwargs": {"verify": False},
                "use_ssl": False,
            }
        ),
    }
    assert storage_options_from_extra(extra) == {
        "client_kwargs": {"endpoint_url": "http://127.0.0.1:9000", "verify": False},
        "config_kwargs": {
            "retries": {"total_max_attempts": 7},
            "read_timeout": 5,  # the storage_options extra's, given last
            "s3": {"payload_signing_enabled": False},
        },
        "use_ssl": False,
    }


def test_storage_options_json_must_be_an_object():
    import pytest

    with pytest.raises(ValueError, match="storage_options"):
        storage_options_from_extra({"storage_options": "{not json"})


def test_no_connection_means_fsspec_defaults(tmp_path):
    hook = AcidHook()
    fs, path = hook.get_filesystem(str(tmp_path))
    assert hook.storage_options == {} and path == str(tmp_path)


def test_the_acid_metastore_connection_works_against_the_real_metastore(monkeypatch, metastore_uri):
    """The provider's own type, ``acid_metastore``: host(s), port and the extra
    ``auth_mechanism``, a form in the UI, and the UI's Test button calls the metastore."""
    import pytest
    from airflow.providers_manager import ProvidersManager

    from airflow_provider_acid.hooks.metastore import AcidMetastoreHook
    from airflow_provider_acid.metastore.connection import MetastoreAddress

    manager = ProvidersManager()
    assert manager.hooks["acid_metastore"].hook_class_name.endswith(".AcidMetastoreHook")
    assert "acid_metastore" in manager.field_behaviours
    assert "extra__acid_metastore__auth_mechanism" in manager.connection_form_widgets

    host, port = metastore_uri.removeprefix("thrift://").rsplit(":", 1)
    conn = {"conn_type": "acid_metastore", "host": f"nowhere.invalid,{host}", "port": int(port)}
    monkeypatch.setenv("AIRFLOW_CONN_METASTORE_DEFAULT", json.dumps(conn))
    hook = AcidMetastoreHook()
    assert hook.uri == f"thrift://nowhere.invalid:{port},{metastore_uri}"  # tried in order
    assert hook.address.auth == "NONE"
    ok, message = hook.test_connection()
    assert ok and message.startswith(hook.uri), message

    plain = {**conn, "login": "u", "password": "p-secret", "extra": {"auth_mechanism": "PLAIN"}}
    monkeypatch.setenv("AIRFLOW_CONN_METASTORE_PLAIN", json.dumps(plain))
    address = AcidMetastoreHook("metastore_plain").address
    assert (address.auth, address.user, address.password) == ("PLAIN", "u", "p-secret")
    assert "p-secret" not in repr(address) + address.uri

    extra = {
        "auth_mechanism": "GSSAPI",
        "principal": "hive/_HOST@R",
        "kerberos_principal": "a@R",
        "kerberos_keytab": "/k/a.keytab",
        "kerberos_principal_host": "lb.example.com",
    }
    monkeypatch.setenv("AIRFLOW_CONN_METASTORE_KRB", json.dumps({**conn, "extra": extra}))
    address = AcidMetastoreHook("metastore_krb").address
    assert address.auth == "GSSAPI" and address.server_principal == "hive/_HOST@R"
    assert (address.kerberos.principal, address.kerberos.keytab) == ("a@R", "/k/a.keytab")
    assert address.kerberos_principal_host == "lb.example.com"
    # the provider's own type carries the Kerberos fields (hive_metastore is apache-hive's here)
    assert "extra__acid_metastore__kerberos_keytab" in manager.connection_form_widgets
    with pytest.raises(ValueError, match="not supported"):
        _ = MetastoreAddress.parse(metastore_uri, auth="DIGEST-MD5")
