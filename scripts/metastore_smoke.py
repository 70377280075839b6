#!/usr/bin/env python3
"""Smoke check of a running Hive metastore (scripts/metastore.py start), with pyiceberg's bindings.

    .venv/bin/python scripts/metastore_smoke.py [thrift://127.0.0.1:PORT] [--home DIR]
        [--user U --password P [--wrong-password W]]

Creates a database and a transactional, partitioned ORC table, adds partitions, opens three
transactions, allocates their write ids on the table, heartbeats, commits one, aborts one and leaves
one open; then reads get_open_txns, builds the ValidTxnList string the way Hive's
TxnCommonUtils.createValidReadTxnList does (highWaterMark:minOpenTxn:open:aborted) and asks
get_valid_write_ids for the table with it. Prints each result and checks them; exits non-zero on a
mismatch. With --user/--password it talks SASL PLAIN (thrift_sasl + pure_sasl), and with
--wrong-password it also checks that a wrong password is refused. The URI defaults to the one in the
home's state file. The open transaction is left open on purpose (the metastore's txn timeout is an
hour and its housekeeping is off, so it stays open for the whole run).
"""

from __future__ import annotations

import argparse
import copy
import json
import socket
import sys
import time
from pathlib import Path
from urllib.parse import urlparse

from hive_metastore import ThriftHiveMetastore
from hive_metastore.ttypes import (
    AbortTxnRequest,
    AllocateTableWriteIdsRequest,
    CommitTxnRequest,
    CreateTableRequest,
    Database,
    FieldSchema,
    GetTableRequest,
    GetValidWriteIdsRequest,
    HeartbeatRequest,
    MetaException,
    NoSuchObjectException,
    OpenTxnRequest,
    Partition,
    SerDeInfo,
    StorageDescriptor,
    Table,
)
from thrift.protocol import TBinaryProtocol
from thrift.transport import TSocket, TTransport

ORC_IN = "org.apache.hadoop.hive.ql.io.orc.OrcInputFormat"
ORC_OUT = "org.apache.hadoop.hive.ql.io.orc.OrcOutputFormat"
ORC_SERDE = "org.apache.hadoop.hive.ql.io.orc.OrcSerde"
DEFAULT_HOME = Path(__file__).resolve().parent.parent / ".cache" / "hive-metastore" / "run"
LONG_MAX = (1 << 63) - 1
# What Hive's own writers state (HiveMetaStoreClient's processor capabilities for full ACID).
CAPABILITIES = [
    "HIVEFULLACIDREAD",
    "HIVEFULLACIDWRITE",
    "HIVEMANAGEDINSERTREAD",
    "HIVEMANAGEDINSERTWRITE",
    "HIVEMANAGESTATS",
    "HIVECACHEINVALIDATE",
    "CONNECTORWRITE",
]


class PureSaslClient:
    """The start/step/encode/decode face thrift_sasl expects, over pure_sasl's SASLClient."""

    def __init__(self, host: str, mechanism: str, **props):
        from puresasl.client import SASLClient

        self._client = SASLClient(host, service="hive", mechanism=mechanism, **props)
        self._error = None

    def start(self, mechanism):
        try:
            return True, self._client.mechanism, self._client.process()
        except Exception as e:  # pure_sasl raises SASLError / SASLProtocolException
            self._error = str(e)
            return False, mechanism, None

    def step(self, challenge):
        try:
            return True, self._client.process(challenge)
        except Exception as e:
            self._error = str(e)
            return False, None

    def encode(self, data):
        return True, self._client.wrap(data)

    def decode(self, data):
        return True, self._client.unwrap(data)

    def getError(self):  # noqa: N802 (thrift_sasl's name)
        return self._error


def connect(host: str, port: int, user: str | None = None, password: str | None = None):
    sock = TSocket.TSocket(host, port)
    sock.setTimeout(30_000)
    if user is None:
        transport = TTransport.TBufferedTransport(sock)
    else:
        from thrift_sasl import TSaslClientTransport

        transport = TSaslClientTransport(
            lambda: PureSaslClient(host, "PLAIN", username=user, password=password), "PLAIN", sock
        )
    transport.open()
    client = ThriftHiveMetastore.Client(TBinaryProtocol.TBinaryProtocol(transport))
    return client, transport


def valid_txn_list(open_txns) -> str:
    """Hive's TxnCommonUtils.createValidReadTxnList(resp, 0).writeToString()."""
    aborted_bits = open_txns.abortedBits or b""

    def aborted(i: int) -> bool:  # java.util.BitSet.valueOf(byte[]): little-endian bit order
        return i // 8 < len(aborted_bits) and bool(aborted_bits[i // 8] >> (i % 8) & 1)

    opened, aborts, min_open = [], [], LONG_MAX
    for i, txn in enumerate(open_txns.open_txns):
        if aborted(i):
            aborts.append(txn)
        else:
            opened.append(txn)
            min_open = min(min_open, txn)
    return (
        f"{open_txns.txn_high_water_mark}:{min_open}:"
        f"{','.join(map(str, opened))}:{','.join(map(str, aborts))}"
    )


def bits(data: bytes | None, n: int) -> list[int]:
    data = data or b""
    return [i for i in range(n) if i // 8 < len(data) and data[i // 8] >> (i % 8) & 1]


def check(ok: bool, what: str, failures: list[str]) -> None:
    print(f"  [{'ok' if ok else 'FAIL'}] {what}")
    if not ok:
        failures.append(what)


def smoke(host: str, port: int, user: str | None, password: str | None) -> list[str]:
    failures: list[str] = []
    client, transport = connect(host, port, user, password)
    try:
        t0 = time.monotonic()
        print("get_all_databases:", client.get_all_databases())
        db, tbl = "acid_smoke", f"events_{int(time.time() * 1000)}"
        try:
            client.get_database(db)
        except NoSuchObjectException:
            client.create_database(
                Database(name=db, description="metastore_smoke.py", parameters={})
            )
            print(f"create_database {db}")
        cols = [FieldSchema("id", "bigint", None), FieldSchema("payload", "string", None)]
        sd = StorageDescriptor(
            cols=cols,
            inputFormat=ORC_IN,
            outputFormat=ORC_OUT,
            compressed=False,
            numBuckets=-1,
            serdeInfo=SerDeInfo(name=None, serializationLib=ORC_SERDE, parameters={}),
            bucketCols=[],
            sortCols=[],
            parameters={},
        )
        table = Table(
            tableName=tbl,
            dbName=db,
            owner="smoke",
            sd=sd,
            partitionKeys=[FieldSchema("ds", "string", None)],
            parameters={"transactional": "true", "transactional_properties": "default"},
            tableType="MANAGED_TABLE",
        )
        # Hive 4's default metadata transformer refuses an ACID table from a client that states no
        # capabilities ("Processor has no capabilities, cannot create an ACID table."), which is
        # what the old create_table(Table) call is: create_table_req carries them.
        try:
            client.create_table(copy.deepcopy(table))
            print("create_table (no capabilities): accepted (metadata transformer off)")
            client.drop_table(db, tbl, True)
        except MetaException as e:
            print(f"create_table (no capabilities): refused as on a stock Hive 4: {e.message}")
        client.create_table_req(
            CreateTableRequest(
                table=table,
                processorCapabilities=CAPABILITIES,
                processorIdentifier="metastore_smoke",
            )
        )
        # Hive 4 has no get_table any more ("Invalid method name: 'get_table'"): get_table_req.
        got = client.get_table_req(
            GetTableRequest(
                dbName=db,
                tblName=tbl,
                processorCapabilities=CAPABILITIES,
                processorIdentifier="metastore_smoke",
            )
        ).table
        print(
            f"create_table {db}.{tbl}: type {got.tableType}, location {got.sd.location}, "
            f"params {dict(sorted(got.parameters.items()))}"
        )
        check(got.tableType == "MANAGED_TABLE", "table is MANAGED_TABLE", failures)
        check(got.parameters.get("transactional") == "true", "table is transactional", failures)
        check(
            got.sd.inputFormat == ORC_IN and got.sd.serdeInfo.serializationLib == ORC_SERDE,
            "table is ORC",
            failures,
        )

        parts = []
        for ds in ("2024-01-01", "2024-01-02"):
            psd = copy.deepcopy(got.sd)
            psd.location = f"{got.sd.location}/ds={ds}"
            parts.append(Partition(values=[ds], dbName=db, tableName=tbl, sd=psd, parameters={}))
        added = client.add_partitions(parts)
        names = client.get_partition_names(db, tbl, -1)
        print(f"add_partitions: {added} added, partitions {names}")
        check(
            added == 2 and names == ["ds=2024-01-01", "ds=2024-01-02"], "two partitions", failures
        )

        opened = client.open_txns(
            OpenTxnRequest(num_txns=3, user="smoke", hostname=socket.gethostname())
        ).txn_ids
        print(f"open_txns: {opened}")
        t_commit, t_abort, t_open = opened
        alloc = client.allocate_table_write_ids(
            AllocateTableWriteIdsRequest(dbName=db, tableName=tbl, txnIds=opened)
        )
        write_ids = {t.txnId: t.writeId for t in alloc.txnToWriteIds}
        print(f"allocate_table_write_ids: {write_ids}")
        check(sorted(write_ids.values()) == [1, 2, 3], "write ids 1, 2, 3 on a new table", failures)
        client.heartbeat(HeartbeatRequest(txnid=t_open))
        print(f"heartbeat txn {t_open}: ok")
        client.commit_txn(CommitTxnRequest(txnid=t_commit))
        client.abort_txn(AbortTxnRequest(txnid=t_abort))
        print(f"commit_txn {t_commit}, abort_txn {t_abort}, left open {t_open}")

        resp = client.get_open_txns()
        aborted_idx = bits(resp.abortedBits, len(resp.open_txns))
        print(
            f"get_open_txns: high water mark {resp.txn_high_water_mark}, min open "
            f"{resp.min_open_txn}, open_txns {resp.open_txns}, aborted "
            f"{[resp.open_txns[i] for i in aborted_idx]}"
        )
        txn_list = valid_txn_list(resp)
        print(f"validTxnList: {txn_list}")
        open_set = [t for i, t in enumerate(resp.open_txns) if i not in aborted_idx]
        aborted_set = [resp.open_txns[i] for i in aborted_idx]
        check(t_commit not in resp.open_txns, f"committed txn {t_commit} is not listed", failures)
        check(t_abort in aborted_set, f"aborted txn {t_abort} is listed as aborted", failures)
        check(t_open in open_set, f"txn {t_open} is still open", failures)
        check(resp.txn_high_water_mark >= t_open, "high water mark covers our txns", failures)

        full = f"{db}.{tbl}"
        vw = client.get_valid_write_ids(
            GetValidWriteIdsRequest(fullTableNames=[full], validTxnList=txn_list)
        )
        (tw,) = vw.tblValidWriteIds
        w_aborted = bits(tw.abortedBits, len(tw.invalidWriteIds))
        print(
            f"get_valid_write_ids {tw.fullTableName}: high water mark {tw.writeIdHighWaterMark}, "
            f"invalid {tw.invalidWriteIds}, aborted "
            f"{[tw.invalidWriteIds[i] for i in w_aborted]}, min open {tw.minOpenWriteId}"
        )
        # ValidReaderWriteIdList.writeToString: table:hwm:minOpen:open:aborted
        w_open = [w for i, w in enumerate(tw.invalidWriteIds) if i not in w_aborted]
        w_abort = [tw.invalidWriteIds[i] for i in w_aborted]
        min_open = tw.minOpenWriteId if tw.minOpenWriteId is not None else LONG_MAX
        print(
            f"validWriteIdList: {tw.fullTableName}:{tw.writeIdHighWaterMark}:{min_open}:"
            f"{','.join(map(str, w_open))}:{','.join(map(str, w_abort))}"
        )
        wc, wa, wo = write_ids[t_commit], write_ids[t_abort], write_ids[t_open]
        check(tw.writeIdHighWaterMark == 3, "write id high water mark 3", failures)
        check(wc not in tw.invalidWriteIds, f"committed write id {wc} is valid", failures)
        check(w_abort == [wa], f"write id {wa} is aborted", failures)
        check(w_open == [wo] and tw.minOpenWriteId == wo, f"write id {wo} is open", failures)
        # Notification reads are refused to a non-proxy user unless the metastore's
        # event.db.notification.api.auth is off.
        event_id = client.get_current_notificationEventId().eventId
        print(f"get_current_notificationEventId: {event_id}")
        print(f"calls took {time.monotonic() - t0:.2f}s")
    finally:
        transport.close()
    return failures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "uri", nargs="?", help="thrift://HOST:PORT (default: the home's state file)"
    )
    parser.add_argument("--home", type=Path, default=DEFAULT_HOME)
    parser.add_argument("--user")
    parser.add_argument("--password")
    parser.add_argument("--wrong-password", help="also check that this password is refused")
    args = parser.parse_args()
    uri = args.uri or json.loads((args.home / "state.json").read_text())["uri"]
    u = urlparse(uri)
    print(f"metastore {uri}" + (f" (SASL PLAIN as {args.user})" if args.user else ""))
    failures = smoke(u.hostname, u.port, args.user, args.password)
    if args.wrong_password is not None:
        try:
            client, transport = connect(u.hostname, u.port, args.user, args.wrong_password)
            try:
                client.get_all_databases()
            finally:
                transport.close()
        except Exception as e:  # the server ends the SASL handshake with BAD/ERROR
            print(f"  [ok] wrong password refused: {type(e).__name__}: {e}")
        else:
            print("  [FAIL] wrong password was accepted")
            failures.append("wrong password accepted")
    if failures:
        print(f"metastore smoke: {len(failures)} check(s) failed: {failures}")
        return 1
    print("metastore smoke: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
