"""Pruning metrics reach a real StatsD listener on loopback when [metrics] statsd_on is set."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import time

SCRIPT = textwrap.dedent(
    """
    import json, sys
    from airflow_provider_acid.operators.acid import AcidPublishPruningMetricsOperator

    manifest = json.loads(sys.argv[1])
    op = AcidPublishPruningMetricsOperator(task_id="publish", manifest=manifest)
    print(json.dumps(op.execute({})))
    """
)


def test_pruning_metrics_arrive_over_statsd(tmp_path):
    listener = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    listener.bind(("127.0.0.1", 0))
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    metrics = {
        "partitions_total": 3,
        "partitions_kept": 1,
        "slices_total": 12,
        "slices_kept": 2,
        "files_total": 48,
        "files_candidate": 3,
        "files_not_indexed": 1,
        "bytes_total": 1000,
        "bytes_kept": 120,
        "skipping_ratio": 0.9375,
        "index_read_seconds": 0.01,
        "evaluate_seconds": 0.002,
        "manifest_seconds": 0.02,
    }
    manifest = {"table_uri": "s3://warehouse/sales", "metrics": metrics}
    env = {
        **os.environ,
        "AIRFLOW__METRICS__STATSD_ON": "True",
        "AIRFLOW__METRICS__STATSD_HOST": "127.0.0.1",
        "AIRFLOW__METRICS__STATSD_PORT": str(port),
        "AIRFLOW__METRICS__STATSD_PREFIX": "airflow",
    }
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, json.dumps(manifest)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1])["pruning"] == metrics
    received: list[str] = []
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            data, _ = listener.recvfrom(65535)
        except TimeoutError:
            break
        received += data.decode().splitlines()
    listener.close()
    by_name = {line.split(":", 1)[0]: line for line in received}
    assert by_name["airflow.acid.pruning.skipping_ratio"].startswith(
        "airflow.acid.pruning.skipping_ratio:0.9375|g"
    )
    assert by_name["airflow.acid.pruning.slices_kept"].startswith(
        "airflow.acid.pruning.slices_kept:2|g"
    )
    assert "airflow.acid.pruning.index_read" in by_name  # a timer, in ms
    assert by_name["airflow.acid.pruning.index_read"].endswith("|ms")
