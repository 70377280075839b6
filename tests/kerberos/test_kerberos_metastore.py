"""A Kerberos-secured Hive Metastore (SASL GSSAPI) and a real MIT KDC, both started by the
project's scripts: tables read by name with a keytab login, and each Kerberos failure as one
line that names the principal and says what to do, with nothing written."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import fsspec
import pyarrow.dataset as ds
import pytest

from airflow_provider_acid import cli
from airflow_provider_acid.kerberos import (
    KerberosCredentialsError,
    KerberosLogin,
    KerberosUnavailableError,
)
from airflow_provider_acid.metastore import MetastoreClient
from airflow_provider_acid.metastore.connection import MetastoreAddress
from airflow_provider_acid.testing import AcidTableWriter
from airflow_provider_acid.testing.metastore_tables import (
    drop_database,
    ensure_database,
    metastore_location,
    register_table,
)

PRINCIPAL_TEMPLATE = "hive/_HOST@ACID.TEST"


def address(uri: str, login: KerberosLogin | None, **kw) -> MetastoreAddress:
    return MetastoreAddress.parse(
        uri, auth="GSSAPI", kerberos=login, server_principal=PRINCIPAL_TEMPLATE, **kw
    )


@pytest.fixture
def keytab_login(kdc) -> KerberosLogin:
    return KerberosLogin(kdc.principal, kdc.keytab)


@pytest.fixture
def sales(kerberos_metastore_uri, keytab_login, tmp_path):
    """A bucketed, partitioned ACID table in the Kerberos metastore: two inserts, a delete, an
    aborted insert (its files on storage)."""
    name = f"k_{uuid.uuid4().hex[:8]}"
    folder = tmp_path / "warehouse"
    folder.mkdir()
    client = MetastoreClient(address(kerberos_metastore_uri, keytab_login)).open()
    ensure_database(client, name, metastore_location(fsspec.filesystem("file"), str(folder)))
    writer = AcidTableWriter(
        str(folder / "sales"), [("id", "bigint"), ("name", "string")], [("dt", "string")],
        buckets=2, bucket_by="id", database=name, table_name="sales",
    )  # fmt: skip
    registered = register_table(client, writer)
    days = ("2024-01-01", "2024-01-02")
    writer.insert([{"id": i, "name": f"n{i}", "dt": days[i % 2]} for i in range(30)])
    writer.insert([{"id": i, "name": f"n{i}", "dt": days[i % 2]} for i in range(30, 50)])
    writer.delete(lambda r: r["id"] % 4 == 0)
    aborted = writer.begin()
    aborted.insert([{"id": 900 + i, "name": "aborted", "dt": days[i % 2]} for i in range(5)])
    aborted.abort()
    yield registered
    for table in client.table_names(name):
        client.drop_table(f"{name}.{table}")
    drop_database(client, name)
    client.close()


def _ids(folder: Path) -> list[int]:
    return sorted(ds.dataset(str(folder), format="parquet").to_table().column("id").to_pylist())


def _compact(uri: str, table: str, out: Path, *extra: str) -> list[str]:
    return [
        "compact", "--table", table, "--metastore", uri, "--metastore-auth", "GSSAPI",
        "--metastore-principal", PRINCIPAL_TEMPLATE, "--out", str(out), "--json", *extra,
    ]  # fmt: skip


def test_compacting_a_table_by_name_with_a_keytab_gives_its_committed_rows(
    sales, kerberos_metastore_uri, kdc, tmp_path, capsys
):
    committed = sorted(
        r["id"] for r in sales.writer.expected_rows(str(sales.read_view().write_ids)).to_pylist()
    )
    assert len(committed) == 50 - 13  # 13 of 0..49 are multiples of 4; the aborted 5 not
    out = tmp_path / "out"
    argv = _compact(
        kerberos_metastore_uri, sales.name, out,
        "--kerberos-principal", kdc.principal, "--kerberos-keytab", kdc.keytab,
    )  # fmt: skip
    assert cli.main(argv) == 0
    summary = json.loads(capsys.readouterr().out)
    assert _ids(out) == committed
    plan = json.loads((Path(summary["manifest_path"]).parent / "plan.json").read_text())
    assert plan["write_ids"] == str(sales.read_view().write_ids)  # the metastore's view


def test_a_ticket_cache_kept_by_kinit_is_used_without_a_keytab(
    sales, kerberos_metastore_uri, kdc, tmp_path, monkeypatch
):
    cache = tmp_path / "krb5cc"
    kinit = shutil.which("kinit") or "/usr/bin/kinit"
    subprocess.run(
        [kinit, "-k", "-t", kdc.keytab, "-c", f"FILE:{cache}", kdc.principal],
        check=True, capture_output=True, timeout=30,
    )  # fmt: skip
    monkeypatch.setenv("KRB5CCNAME", f"FILE:{cache}")
    monkeypatch.delenv("ACID_KERBEROS_PRINCIPAL", raising=False)
    monkeypatch.delenv("ACID_KERBEROS_KEYTAB", raising=False)
    assert cli.main(_compact(kerberos_metastore_uri, sales.name, tmp_path / "out")) == 0
    assert len(_ids(tmp_path / "out")) == 37


def test_without_a_ticket_the_error_is_one_line_and_nothing_is_written(
    sales, kerberos_metastore_uri, tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("KRB5CCNAME", f"FILE:{tmp_path / 'no-such-cache'}")
    monkeypatch.delenv("ACID_KERBEROS_PRINCIPAL", raising=False)
    monkeypatch.delenv("ACID_KERBEROS_KEYTAB", raising=False)
    out = tmp_path / "out"
    assert cli.main(_compact(kerberos_metastore_uri, sales.name, out)) == cli.EXIT_ERROR
    error = capsys.readouterr().err.strip().splitlines()
    assert "no Kerberos ticket" in error[0] and "kinit" in error[0]
    assert str(tmp_path / "no-such-cache") in error[0] and "hive/127.0.0.1@ACID.TEST" in error[0]
    assert not out.exists()
    with pytest.raises(KerberosUnavailableError) as raised:
        MetastoreClient(address(kerberos_metastore_uri, None)).open()
    assert isinstance(raised.value, ConnectionError)  # retried: a renewer may catch up


def test_an_expired_ticket_is_named_as_expired(kerberos_metastore_uri, kdc, tmp_path):
    cache = f"FILE:{tmp_path / 'short'}"
    kinit = shutil.which("kinit") or "/usr/bin/kinit"
    subprocess.run(
        [kinit, "-l", "2s", "-k", "-t", kdc.keytab, "-c", cache, kdc.principal],
        check=True, capture_output=True, timeout=30,
    )  # fmt: skip
    time.sleep(3)
    with pytest.raises(KerberosUnavailableError, match="expired") as raised:
        MetastoreClient(address(kerberos_metastore_uri, KerberosLogin(ccache=cache))).open()
    assert cache in str(raised.value) and "renew" in str(raised.value)


def test_a_keytab_without_the_principal_fails_once_and_is_not_retried(
    kerberos_metastore_uri, kdc, tmp_path
):
    wrong = KerberosLogin(kdc.principal, kdc.intruder_keytab, ccache=f"FILE:{tmp_path / 'cc'}")
    with pytest.raises(KerberosCredentialsError) as raised:
        MetastoreClient(address(kerberos_metastore_uri, wrong)).open()
    message = str(raised.value)
    assert kdc.principal in message and kdc.intruder_keytab in message and "\n" not in message
    assert raised.value.retryable is False and not isinstance(raised.value, ConnectionError)
    missing = KerberosLogin(kdc.principal, str(tmp_path / "nothing.keytab"))
    with pytest.raises(KerberosCredentialsError, match="nothing.keytab.*does not exist"):
        MetastoreClient(address(kerberos_metastore_uri, missing)).open()


def test_an_unknown_service_principal_is_named(kerberos_metastore_uri, keytab_login):
    wrong = MetastoreAddress.parse(
        kerberos_metastore_uri, auth="GSSAPI", kerberos=keytab_login,
        server_principal="metastore/_HOST@ACID.TEST",
    )  # fmt: skip
    with pytest.raises(KerberosCredentialsError, match="metastore/127.0.0.1@ACID.TEST"):
        MetastoreClient(wrong).open()


def test_the_principal_host_replaces_each_uris_host(kerberos_metastore_uri, keytab_login):
    # Through "localhost" (a load balancer's name, say) the principal must still name
    # 127.0.0.1, the host the metastore's principal is for.
    port = kerberos_metastore_uri.rsplit(":", 1)[1]
    via_alias = f"thrift://localhost:{port}"
    with pytest.raises(KerberosCredentialsError, match="hive/localhost@ACID.TEST"):
        MetastoreClient(address(via_alias, keytab_login)).open()
    pinned = address(via_alias, keytab_login, kerberos_principal_host="127.0.0.1")
    with MetastoreClient(pinned) as client:
        assert "default" in client.databases()


def test_several_uris_are_tried_in_order_with_their_own_principal(
    kerberos_metastore_uri, keytab_login
):
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        dead = free.getsockname()[1]
    both = f"thrift://127.0.0.1:{dead},{kerberos_metastore_uri}"
    with MetastoreClient(address(both, keytab_login)) as client:
        assert client.endpoint[1] == int(kerberos_metastore_uri.rsplit(":", 1)[1])


def test_an_unreachable_kdc_is_a_retried_connection_error(
    kerberos_metastore_uri, kdc, tmp_path, monkeypatch
):
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        dead = free.getsockname()[1]
    conf = Path(kdc.krb5_conf).read_text()
    port = conf.split("kdc = 127.0.0.1:", 1)[1].split()[0]
    (tmp_path / "krb5.conf").write_text(conf.replace(f"127.0.0.1:{port}", f"127.0.0.1:{dead}"))
    monkeypatch.setenv("KRB5_CONFIG", str(tmp_path / "krb5.conf"))
    login = KerberosLogin(kdc.principal, kdc.keytab, ccache=f"FILE:{tmp_path / 'cc'}")
    with pytest.raises(KerberosUnavailableError, match="KDC cannot be reached") as raised:
        MetastoreClient(address(kerberos_metastore_uri, login)).open()
    assert isinstance(raised.value, ConnectionError) and kdc.principal in str(raised.value)


def test_a_keytab_login_lives_in_its_own_cache(kdc, keytab_login):
    keytab_login.credentials()
    path = keytab_login.cache.removeprefix("FILE:")
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert path != os.environ.get("KRB5CCNAME", "").removeprefix("FILE:")


def test_clock_skew_of_a_client_an_hour_ahead_is_named_and_nothing_is_written(
    sales, kerberos_metastore_uri, kdc, tmp_path
):
    """The CLI under libfaketime (Debian's faketime), its clock an hour ahead of the KDC's.
    MIT's ``kdc_timesync`` (on by default) corrects the client's clock from the KDC's reply;
    with it off, as Heimdal and Java clients behave, the skew is an error."""
    faketime = shutil.which("faketime")
    if faketime is None:
        pytest.fail("faketime is not installed: make kdc-packages installs it", pytrace=False)
    keytab = tmp_path / "acid.keytab"  # a keytab path of its own: a private ticket cache too
    shutil.copy(kdc.keytab, keytab)
    realm_conf = Path(kdc.krb5_conf).read_text()
    no_sync = tmp_path / "krb5.conf"
    no_sync.write_text(realm_conf.replace("[libdefaults]", "[libdefaults]\n    kdc_timesync = 0"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACID_KERBEROS_")}
    out = tmp_path / "out"
    argv = [
        faketime, "-f", "+1h", str(Path(sys.executable).with_name("airflow-acid")),
        *_compact(kerberos_metastore_uri, sales.name, out, "--kerberos-principal", kdc.principal,
                  "--kerberos-keytab", str(keytab)),
    ]  # fmt: skip
    skewed = subprocess.run(
        argv, env={**env, "KRB5_CONFIG": str(no_sync)}, capture_output=True, text=True, timeout=300
    )
    assert skewed.returncode == cli.EXIT_ERROR, skewed.stderr
    error, hint = skewed.stderr.strip().splitlines()
    assert "clock skew too great between this host and the KDC" in error
    assert kdc.principal in error and "hive/127.0.0.1@ACID.TEST" in error and "NTP" in error
    assert not out.exists()
    synced = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    assert synced.returncode == 0, synced.stderr  # the library's own correction
    assert len(_ids(out)) == 37
