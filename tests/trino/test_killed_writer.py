"""A writer killed with its server: Trino's JVM gets SIGKILL in the middle of a large INSERT
into a transactional table, once that INSERT's delta folder holds ORC data on storage (a
partial file without a footer). Its transaction stays open in the metastore (the project's
metastore times transactions out after an hour; aborted would do as well). After the restart
(the session's server, on the same port: the later tests use it), Trino writes again above the
killed write; the provider reading the table by name, compaction and manifest, and the CLI,
give exactly Trino's SELECT, and the killed write's folder is left out as not visible; the
change feed warns that the open write is left out.

The restart costs the suite one server start (about 40 s on a quiet machine, 75-90 s under
load); a second Trino for this test would cost the same start and another 3 GB heap.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

from trino_helpers import REPO, Schema, Trino, assert_same_rows

from airflow_provider_acid.acid.writeids import parse_write_id_list
from airflow_provider_acid.cli import main
from airflow_provider_acid.engine.manifest_compaction import compact_manifest
from airflow_provider_acid.metastore import MetastoreClient, ReadTransaction, open_table
from airflow_provider_acid.pruning.manifest import compute_manifest

#: Trino buffers a whole stripe before its first write to the file: small stripes put data on
#: storage within seconds of the INSERT's start.
SMALL_STRIPES = {
    "hive.orc_optimized_writer_min_stripe_size": "1MB",
    "hive.orc_optimized_writer_max_stripe_size": "2MB",
    "hive.orc_optimized_writer_max_stripe_rows": 50_000,
}
CLI = [sys.executable, "-m", "airflow_provider_acid.cli"]


def _killed_write(trino: Trino, table: str, folder: Path) -> tuple[threading.Thread, list]:
    """Starts ``INSERT INTO table SELECT ... lineitem`` (6M rows) in a thread; returns it and
    the list its error lands in."""
    errors: list = []

    def write() -> None:
        try:
            trino.sql(
                f"INSERT INTO {table} SELECT orderkey, comment FROM tpch.sf1.lineitem",
                **SMALL_STRIPES,
            )
        except Exception as e:  # noqa: BLE001 - the server dies under it
            errors.append(e)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    return writer, errors


def _wait_for_data(folder: Path, errors: list, timeout: float = 180.0) -> Path:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not errors:
        written = [p for p in folder.glob("delta_0000003_0000003_*/bucket_*") if p.stat().st_size]
        if written:
            return written[0]
        time.sleep(0.2)
    listed = sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))
    raise AssertionError(
        f"the INSERT wrote no data into {folder}/delta_0000003_* ({errors or timeout}): {listed}"
    )


def test_a_killed_writer_leaves_nothing_visible(
    trino, schema: Schema, trino_process, tmp_path, capsys
):
    t = schema.create("killed", "orderkey bigint, comment varchar")
    trino.sql(f"INSERT INTO {t} VALUES (1, 'kept'), (2, 'deleted')")  # write 1
    trino.sql(f"DELETE FROM {t} WHERE orderkey = 2")  # write 2
    folder = schema.folder / "killed"
    writer, errors = _killed_write(trino, t, folder)  # write 3
    partial = _wait_for_data(folder, errors)
    t0 = time.monotonic()
    trino_process.kill()
    writer.join(timeout=60)
    assert errors, "the INSERT finished before the server was killed"
    started_metastore = trino_process.state()["started_metastore"]
    restart_s = trino_process.restart()
    # the restart keeps the record of who started the metastore (`stop` stops it)
    assert trino_process.state()["started_metastore"] == started_metastore
    print(f"killed and restarted in {time.monotonic() - t0:.1f}s (start {restart_s:.1f}s)")

    trino.sql(f"INSERT INTO {t} VALUES (4, 'after the restart')")  # write 4
    assert partial.is_file() and partial.stat().st_size > 0  # the killed write's data stays
    with ReadTransaction(trino.metastore_uri) as txn, MetastoreClient(trino.metastore_uri) as c:
        listed = open_table(c, schema.hive_name("killed"), current_txn=txn.txn_id).write_ids
    ids = parse_write_id_list(listed)
    assert ids.high_watermark == 4
    assert 3 in ids.open_ids or 3 in ids.aborted_ids, ids

    expected = 2
    table = schema.read_by_name("killed", tmp_path / "compact")
    assert assert_same_rows(trino, f"SELECT * FROM {t}", table) == expected
    with MetastoreClient(trino.metastore_uri) as client:
        manifest = compute_manifest(open_table(client, schema.hive_name("killed")), "orderkey > 0")
        compact_manifest(manifest, str(tmp_path / "manifest"))
    table = schema.read_output(tmp_path / "manifest")
    assert assert_same_rows(trino, f"SELECT * FROM {t} WHERE orderkey > 0", table) == expected

    # the CLI: inspect names the killed write's folder as left out, compact reads two rows
    by_name = ["--metastore", trino.metastore_uri, "--table", schema.hive_name("killed")]
    inspected = _cli("inspect", *by_name, "--json")
    excluded = {Path(e["path"]).name: e for e in _excluded(inspected)}
    killed = partial.parent.name
    assert killed in excluded, inspected
    assert excluded[killed]["reason"] in ("not_visible", "aborted"), excluded[killed]
    compacted = _cli("compact", *by_name, "--out", str(tmp_path / "cli"), "--json")
    assert compacted["manifest"]["totals"]["rows_written"] == expected, compacted
    assert compacted["manifest"]["source"]["warnings"] == [], compacted
    table = schema.read_output(tmp_path / "cli")
    assert assert_same_rows(trino, f"SELECT * FROM {t}", table) == expected
    # the change feed warns that the open write is left out, and holds the others' events
    # (in this process: a `changes` process aborts now and then at its exit, after its output)
    capsys.readouterr()  # what the test printed so far
    assert main(["changes", *by_name, "--from-write-id", "0", "--out", str(tmp_path / "feed"),
                 "--json"]) == 0  # fmt: skip
    feed = json.loads(capsys.readouterr().out)
    assert feed["to_write_id"] == 4
    assert any("writes [3] are open" in w for w in feed["warnings"]), feed["warnings"]
    assert feed["counts"] == {
        "insert": 3, "delete": 1, "update_preimage": 0, "update_postimage": 0,
    }  # fmt: skip


def _cli(*args: str) -> dict:
    done = subprocess.run(
        [*CLI, *args], cwd=REPO, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, f"airflow-acid {args[0]}: {done.stdout}{done.stderr}"
    return json.loads(done.stdout)


def _excluded(inspected: dict) -> list[dict]:
    return [e for part in inspected["partitions"] for e in part["excluded"]]
