"""The Delta sink on S3: a real S3 server on 127.0.0.1 (moto's server, in a process of its own:
delta-rs holds the GIL while it waits for some answers, which would stall a server thread of
this process), delta-rs given storage options derived from the output folder's s3fs options,
the table read back through the same server."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import s3fs
from deltalake import DeltaTable
from hive_fixtures import arrange_fixture_table

from airflow_provider_acid.engine.compaction import compact_table
from airflow_provider_acid.output.delta import delta_storage_options
from airflow_provider_acid.output.sinks import open_sink

NATION_3 = "default.nation:3:9223372036854775807::"
NATION_4 = "default.nation:4:9223372036854775807::"
BUCKET = "lake"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def s3_options(tmp_path_factory) -> Iterator[dict]:
    port = _free_port()
    log = tmp_path_factory.mktemp("moto") / "moto.log"
    with open(log, "w") as out:
        server = subprocess.Popen(
            [
                str(Path(sys.executable).with_name("moto_server")),
                "-H",
                "127.0.0.1",
                "-p",
                str(port),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"moto_server did not start: {log.read_text()}") from None
                time.sleep(0.2)
        options = {
            "key": "testing-access-key",
            "secret": "testing-secret-key",
            "client_kwargs": {
                "endpoint_url": f"http://127.0.0.1:{port}",
                "region_name": "us-east-1",
            },
        }
        fs = s3fs.S3FileSystem(skip_instance_cache=True, **options)
        fs.call_s3("create_bucket", Bucket=BUCKET)
        yield options
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_storage_options_for_delta_rs_come_from_the_s3fs_options():
    options = {
        "key": "k",
        "secret": "s",
        "client_kwargs": {"endpoint_url": "http://127.0.0.1:9000", "region_name": "eu-west-1"},
    }
    assert delta_storage_options(options) == {
        "AWS_ACCESS_KEY_ID": "k",
        "AWS_SECRET_ACCESS_KEY": "s",
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9000",
        "AWS_REGION": "eu-west-1",
        "AWS_ALLOW_HTTP": "true",
        "AWS_S3_ALLOW_UNSAFE_RENAME": "true",
    }
    assert delta_storage_options(None) is None


def test_nation_published_as_a_delta_table_on_s3(s3_options, tmp_path):
    table = arrange_fixture_table("nation", tmp_path / "nation")
    out = f"s3://{BUCKET}/nation-{uuid.uuid4().hex[:8]}"
    sink = open_sink("delta", out, storage_options=s3_options)
    first = compact_table(str(table), out, write_ids=NATION_3, storage_options=s3_options)
    assert sink.publish(first).details == {"uri": out, "version": 0}
    second = compact_table(str(table), out, write_ids=NATION_4, storage_options=s3_options)
    published = sink.publish(second)
    assert published.details == {"uri": out, "version": 1}
    assert not sink.publish(second).newly_published

    storage = delta_storage_options(s3_options)
    latest = DeltaTable(out, storage_options=storage).to_pyarrow_table()
    assert latest.num_rows == 23_000
    assert not {5, 19} & set(latest["n_nationkey"].to_pylist())
    assert DeltaTable(out, version=0, storage_options=storage).to_pyarrow_table().num_rows == 24_000

    fs = s3fs.S3FileSystem(skip_instance_cache=True, **s3_options)
    log = fs.cat_file(f"{out}/_delta_log/{1:020d}.json").decode().splitlines()
    entries = [json.loads(line) for line in log]
    (info,) = [e["commitInfo"] for e in entries if "commitInfo" in e]
    assert info["airflow_acid"]["snapshot_id"] == second.snapshot_id
    assert [e["add"]["path"] for e in entries if "add" in e] == [f.path for f in second.files]
    assert [e["remove"]["path"] for e in entries if "remove" in e] == [f.path for f in first.files]

    expired = sink.expire(1)
    assert expired.removed_files == tuple(f.path for f in first.files)
    assert not fs.exists(f"{out}/{first.files[0].path}")
    assert DeltaTable(out, storage_options=storage).to_pyarrow_table().num_rows == 23_000
