"""Keytab logins renewed before their tickets expire (the test realm's user tickets live 120 s):
a read transaction's heartbeat and the metastore trigger's polls go on across the renewal, and
connections made after the first ticket's end still authenticate. One window of about 150 s
serves both (the slowest test here; nothing else waits for a ticket to age)."""

from __future__ import annotations

import asyncio
import json
import time
import uuid

import fsspec
import gssapi
from hive_metastore.ttypes import TxnState

from airflow_provider_acid.kerberos import KerberosLogin
from airflow_provider_acid.kerberos.login import logins
from airflow_provider_acid.metastore import MetastoreClient, ReadTransaction
from airflow_provider_acid.metastore.connection import MetastoreAddress
from airflow_provider_acid.testing import AcidTableWriter
from airflow_provider_acid.testing.metastore_tables import (
    drop_database,
    ensure_database,
    metastore_location,
    register_table,
)
from airflow_provider_acid.triggers.metastore import AcidMetastoreWriteTrigger

PRINCIPAL_TEMPLATE = "hive/_HOST@ACID.TEST"
CONN_ID = "kerberos_metastore"


def _ticket_end(login: KerberosLogin) -> float:
    store = {b"ccache": login.cache.encode()}
    name = gssapi.Name(login.principal, gssapi.NameType.kerberos_principal)
    return time.time() + gssapi.Credentials(name=name, usage="initiate", store=store).lifetime


def test_a_heartbeat_and_a_metastore_trigger_survive_a_ticket_renewal(
    kdc, kerberos_metastore_uri, tmp_path, monkeypatch
):
    login = KerberosLogin(kdc.principal, kdc.keytab, ccache=f"FILE:{tmp_path / 'krb5cc'}")
    address = MetastoreAddress.parse(
        kerberos_metastore_uri, auth="GSSAPI", kerberos=login, server_principal=PRINCIPAL_TEMPLATE
    )
    host, port = address.endpoints[0]
    monkeypatch.setenv(
        f"AIRFLOW_CONN_{CONN_ID.upper()}",
        json.dumps({
            "conn_type": "hive_metastore", "host": host, "port": port,
            "extra": {"auth_mechanism": "GSSAPI", "principal": PRINCIPAL_TEMPLATE,
                      "kerberos_principal": kdc.principal, "kerberos_keytab": kdc.keytab,
                      "kerberos_ccache": login.cache},
        }),
    )  # fmt: skip
    database = f"r_{uuid.uuid4().hex[:8]}"
    with MetastoreClient(address) as client:
        first_end = _ticket_end(login)
        assert first_end - time.time() <= 121  # the realm's short user tickets
        logins_before = logins(login)
        folder = tmp_path / "warehouse"
        folder.mkdir()
        ensure_database(
            client, database, metastore_location(fsspec.filesystem("file"), str(folder))
        )
        writer = AcidTableWriter(
            str(folder / "t"), [("id", "bigint")], database=database, table_name="t"
        )
        table = register_table(client, writer)
        writer.insert([{"id": 1}])
        watermark = str(table.read_view().write_ids)

        async def scenario() -> tuple:
            trigger = AcidMetastoreWriteTrigger(
                table.name, CONN_ID, snapshot_write_ids=watermark, poll_interval=5
            )
            with ReadTransaction(address, interval=5) as txn:
                waiting = asyncio.ensure_future(trigger.run().__anext__())
                while time.time() < first_end + 15:  # past the first ticket's end
                    await asyncio.sleep(5)
                    assert not waiting.done(), waiting.result().payload
                    with MetastoreClient(address) as observer:  # a new connection each time
                        held = observer.open_transactions()[txn.txn_id]  # show_txns
                        assert held.state == TxnState.OPEN
                await asyncio.to_thread(writer.insert, [{"id": 2}])
                event = await asyncio.wait_for(waiting, timeout=60)
                return event, txn.heartbeats, txn.heartbeat_error

        event, heartbeats, heartbeat_error = asyncio.run(scenario())
        assert heartbeat_error is None and heartbeats >= 20
        assert event.payload["status"] == "success", event.payload
        assert event.payload["write_ids"] == [2]
        assert logins(login) > logins_before  # logged in again from the keytab...
        assert _ticket_end(login) > first_end + 30  # ...before the first ticket ended
        for name in client.table_names(database):
            client.drop_table(f"{database}.{name}")
        drop_database(client, database)
