"""Bucket pruning by Hive's bucketing hash, on real (simulator-written) bucketed tables.

The hash is Hive's (``ObjectInspectorUtils.getBucketHashCode`` / ``getBucketNumber``,
``Murmur3.hash32``; checked in tests/acid/test_bucketing.py against Trino's
``TestHiveBucketing`` vectors and Hive 4.0.1 itself). The pruning is Trino's
(``HiveBucketing.getHiveBucketFilter``): only ``=``/``IN``/``IS NULL`` on every bucketing
column, through AND/OR, narrow the buckets; everything else keeps them all.
"""

from __future__ import annotations

import json
import random

import fsspec
import pyarrow as pa
import pyarrow.orc as orc
import pytest

from airflow_provider_acid import cli
from airflow_provider_acid.acid.bucketing import bucket_hash_code, bucket_number, bucket_of
from airflow_provider_acid.acid.hive_types import HiveType, hive_field
from airflow_provider_acid.acid.resolution import resolve_read_view
from airflow_provider_acid.acid.rows import table_columns
from airflow_provider_acid.acid.schema import table_schema
from airflow_provider_acid.acid.source import TableDefinition
from airflow_provider_acid.pruning.bucket_pruning import (
    BucketSpec,
    bucket_spec,
    possible_buckets,
)
from airflow_provider_acid.pruning.manifest import (
    build_manifest,
    compute_manifest,
    parse_predicate,
    refresh_index,
)
from airflow_provider_acid.pruning.manifest_files import (
    PruningMetrics,
    SliceManifest,
    read_manifest,
    write_manifest,
)
from airflow_provider_acid.pruning.metrics import format_record, metrics_record
from airflow_provider_acid.pruning.predicates import bind, evaluate_rows
from airflow_provider_acid.testing import AcidTableWriter

LOCAL = fsspec.filesystem("file")


def _spec(columns, types, buckets, version=2):
    return BucketSpec(tuple(columns), tuple((HiveType.parse(t),) for t in types), buckets, version)


def _bound(where, fields):
    schema = pa.schema([hive_field(n, t) for n, t in fields])
    return bind(parse_predicate(where), schema)


# -- the buckets of a predicate ----------------------------------------------------------------


def test_equality_and_in_pin_the_buckets_of_their_values():
    fields = [("id", "bigint"), ("amount", "double")]
    spec = _spec(["id"], ["bigint"], 8)
    one = bucket_of([42], ["bigint"], 8)
    assert possible_buckets(_bound("id = 42", fields), spec) == {one}
    assert possible_buckets(_bound("id = 42 AND amount > 3", fields), spec) == {one}
    many = {bucket_of([v], ["bigint"], 8) for v in (1, 2, 3)}
    assert possible_buckets(_bound("id IN (1, 2, 3)", fields), spec) == many
    assert possible_buckets(_bound("id = 1 OR id = 2 OR id = 3", fields), spec) == many
    assert possible_buckets(_bound("(id = 1 OR id = 2) AND id IN (2, 3)", fields), spec) == {
        bucket_of([2], ["bigint"], 8)
    }
    assert possible_buckets(_bound("id = 1 AND id = 2", fields), spec) == frozenset()
    assert possible_buckets(_bound("id IS NULL", fields), spec) == {0}  # NULL hashes to 0
    for free in ("id > 5", "id != 1", "id NOT IN (1, 2)", "amount = 1", "id = 1 OR amount = 2"):
        assert possible_buckets(_bound(free, fields), spec) is None, free


def test_every_bucketing_column_must_be_pinned_as_in_trinos_vectors():
    """Trino TestHiveBucketing.testBucketFilterFromDiscreteSets: (int, tinyint) in {1, 10} x
    {5, 6}, 8 buckets -> {3, 4, 5} with bucketing v1 and {0, 1, 5, 6} with v2; a query that
    leaves one column free keeps every bucket."""
    fields = [("a", "int"), ("b", "tinyint")]
    where = "a IN (1, 10) AND b IN (5, 6)"
    assert possible_buckets(_bound(where, fields), _spec("ab", ["int", "tinyint"], 8, 1)) == {
        3,
        4,
        5,
    }
    assert possible_buckets(_bound(where, fields), _spec("ab", ["int", "tinyint"], 8, 2)) == {
        0,
        1,
        5,
        6,
    }
    assert possible_buckets(_bound("a = 1", fields), _spec("ab", ["int", "tinyint"], 8)) is None


def test_what_cannot_be_hashed_exactly_keeps_every_bucket():
    fields = [("ts", "timestamp"), ("x", "double"), ("f", "float"), ("s", "string")]
    # timestamps in bucketing v1 depend on the writer's JVM zone
    ts = "ts = TIMESTAMP '2024-01-01 10:00:00'"
    assert possible_buckets(_bound(ts, fields), _spec(["ts"], ["timestamp"], 8, 1)) is None
    assert possible_buckets(_bound(ts, fields), _spec(["ts"], ["timestamp"], 8, 2)) is not None
    # -0.0 = 0.0, but their bits differ: both buckets are kept
    spec = _spec(["x"], ["double"], 64)
    zero = {bucket_of([0.0], ["double"], 64), bucket_of([-0.0], ["double"], 64)}
    assert len(zero) == 2 and possible_buckets(_bound("x = 0", fields), spec) == zero
    # too many combinations to enumerate
    spec = _spec(["s"], ["string"], 10_000)
    values = ", ".join(f"'v{i}'" for i in range(5000))
    assert possible_buckets(_bound(f"s IN ({values})", fields), spec) is None
    # once all buckets are possible, the answer is "all"
    spec = _spec(["s"], ["string"], 2)
    assert possible_buckets(_bound("s IN ('a', 'b', 'c', 'd', 'e')", fields), spec) is None


def test_an_unknown_string_kind_keeps_the_buckets_of_each_kind():
    """Without its Hive type an Arrow string may be string, varchar or char: in bucketing v1
    they hash differently (0- vs 1-based), so each candidate's bucket is kept."""
    schema = pa.schema([pa.field("s", pa.string())])  # no hive_type metadata
    spec = bucket_spec(None, {"columns": ["s"], "buckets": 64, "version": 1}, schema)
    expr = bind(parse_predicate("s = 'hello world'"), schema)
    expected = {bucket_of(["hello world"], [t], 64, 1) for t in ("string", "varchar(5)")}
    assert len(expected) == 2 and possible_buckets(expr, spec) == expected


def test_the_facts_come_from_the_metastore_or_the_option():
    definition = TableDefinition(
        "db.t", "thrift://h:9083", "/wh/t", (("id", "int"), ("name", "string")),
        bucket_columns=("ID",), num_buckets=4, bucketing_version=2,
    )  # fmt: skip
    spec = bucket_spec(definition)
    assert (spec.columns, spec.num_buckets, spec.version) == (("id",), 4, 2)
    assert spec.types == ((HiveType("int"),),)
    assert bucket_spec(definition, {"columns": "id", "buckets": 4, "version": 2}) == spec
    with pytest.raises(ValueError, match="contradicts"):
        bucket_spec(definition, {"columns": ["id"], "buckets": 8})
    unbucketed = TableDefinition("db.u", "thrift://h:9083", "/wh/u", (("id", "int"),))
    assert bucket_spec(unbucketed) is None and bucket_spec(None) is None
    schema = pa.schema([hive_field("id", "bigint")])
    assert bucket_spec(None, {"columns": ["id"], "buckets": 3}, schema).types == (
        (HiveType("bigint"),),
    )
    for bad in ({"columns": ["nope"], "buckets": 3}, {"columns": ["id"]}, {"col": ["id"]}):
        with pytest.raises(ValueError):
            bucket_spec(None, bad, schema)


# -- on a generated bucketed table ---------------------------------------------------------------


def _slice_rows(snapshot):
    """Per slice key: its rows (read from its data files) and the buckets of their ACID
    identities (bits 27-16 of the ``bucket`` field)."""
    truth = {}
    for s in snapshot.slices:
        tables, buckets = [], set()
        for f in s.data_files:
            events = orc.ORCFile(f.path).read()
            buckets |= {(b >> 16) & 0xFFF for b in events.column("bucket").to_pylist()}
            row = events.column("row").combine_chunks()
            tables.append(pa.table({n: row.field(n) for n in ("id", "amount")}))
        truth[s.key] = (pa.concat_tables(tables), buckets)
    return truth


@pytest.fixture
def bucketed(tmp_path):
    writer = AcidTableWriter(
        str(tmp_path / "t"), [("id", "bigint"), ("amount", "double")], buckets=8, bucket_by="id"
    )
    writer.insert([{"id": i, "amount": float(i)} for i in range(200)])
    writer.insert([{"id": i, "amount": -1.0} for i in range(0, 200, 7)])
    return writer


def test_id_equals_v_keeps_exactly_the_bucket_the_simulator_wrote_v_to(bucketed, tmp_path):
    snapshot = resolve_read_view(bucketed.root)
    truth = _slice_rows(snapshot)
    assert len(truth) == 8
    for key, (_, buckets) in truth.items():  # each slice holds one bucket's rows
        assert buckets == {int(key.rsplit("#", 1)[1])}
    for v in (0, 1, 77, 199):
        manifest = compute_manifest(
            bucketed.root, f"id = {v}", bucketing={"columns": ["id"], "buckets": 8}
        )
        holding = [k for k, (rows, _) in truth.items() if v in rows.column("id").to_pylist()]
        assert holding == [f"#{bucket_of([v], ['bigint'], 8)}"]
        assert manifest.slice_keys == holding
        assert manifest.metrics.slices_pruned_by_bucket == 7
        assert manifest.metrics.slices_total == 8 and manifest.metrics.slices_kept == 1
    # without the facts nothing is pruned by bucket
    plain = compute_manifest(bucketed.root, "id = 1")
    assert len(plain.slices) == 8 and plain.metrics.slices_pruned_by_bucket == 0


def test_bucket_pruning_composes_with_the_statistics(bucketed, tmp_path):
    """A slice is kept only if both keep it: the bucket rule drops the other buckets before
    the index is read; the statistics then drop the bucket whose values cannot match."""
    snapshot = resolve_read_view(bucketed.root)
    index = str(tmp_path / "index")
    names = table_columns(snapshot, LOCAL).names  # as compute_manifest keys the index
    refresh_index(snapshot, LOCAL, index, table_columns=names)
    option = {"columns": ["id"], "buckets": 8, "version": 2}
    both = compute_manifest(bucketed.root, "id = 5 AND amount > 1000", index_uri=index,
                            bucketing=option)  # fmt: skip
    assert both.slices == () and both.metrics.slices_pruned_by_bucket == 7
    assert both.metrics.files_candidate == 0
    assert both.metrics.files_total == len([f for s in snapshot.slices for f in s.data_files])
    only_stats = compute_manifest(bucketed.root, "id = 5 AND amount > 1000", index_uri=index)
    assert only_stats.slices == () and only_stats.metrics.slices_pruned_by_bucket == 0
    kept = compute_manifest(bucketed.root, "id IN (5, 6) AND amount >= 5", index_uri=index,
                            bucketing=option)  # fmt: skip
    assert set(kept.slice_keys) == {f"#{bucket_of([v], ['bigint'], 8)}" for v in (5, 6)}


def test_a_bucket_beyond_the_declared_count_turns_bucket_pruning_off(bucketed):
    """Files of bucket 7 cannot come from a 4-bucket layout (the count was altered): every
    bucket may then hold any value, so nothing is pruned by bucket."""
    manifest = compute_manifest(bucketed.root, "id = 1", bucketing={"columns": "id", "buckets": 4})
    assert len(manifest.slices) == 8 and manifest.metrics.slices_pruned_by_bucket == 0


def _differential_table(root, rng, buckets, version):
    """A table bucketed by (id, tag): v2 through the simulator's own bucketing; v1 by placing
    each row into the original file of the bucket Hive's v1 hash gives it."""
    columns = [("id", "int"), ("tag", "string"), ("amount", "double")]
    rows = [
        {"id": rng.randint(-50, 50), "tag": rng.choice(["a", "b", "é", "", None]),
         "amount": rng.uniform(0, 10)}
        for _ in range(rng.randint(20, 120))
    ]  # fmt: skip
    if version == 2:
        writer = AcidTableWriter(root, columns, buckets=buckets, bucket_by=["id", "tag"])
        for start in range(0, len(rows), 25):
            writer.insert(rows[start : start + 25])
    else:
        writer = AcidTableWriter(root, columns, buckets=buckets)
        by_bucket: dict[int, list] = {}
        for r in rows:
            b = bucket_number(bucket_hash_code([r["id"], r["tag"]], ["int", "string"], 1), buckets)
            by_bucket.setdefault(b, []).append(r)
        for b, part in sorted(by_bucket.items()):
            writer.add_original_files(part, bucket=b)
    writer.delete(lambda r: r["amount"] > 9)
    return writer, rows


def _random_predicate(rng, rows):
    def value():
        return rng.choice(rows)["id"] if rng.random() < 0.7 else rng.randint(-60, 60)

    def tag():
        t = rng.choice(rows)["tag"] if rng.random() < 0.7 else rng.choice(["a", "zz"])
        return "tag IS NULL" if t is None else f"tag = '{t}'"

    forms = [
        lambda: f"id = {value()} AND {tag()}",
        lambda: f"id IN ({value()}, {value()}, {value()}) AND {tag()}",
        lambda: f"(id = {value()} AND {tag()}) OR (id = {value()} AND {tag()})",
        lambda: f"id = {value()} AND {tag()} AND amount > {rng.uniform(0, 10):.3f}",
        lambda: f"id = {value()}",
        lambda: f"id > {value()} AND {tag()}",
    ]
    return rng.choice(forms)()


@pytest.mark.parametrize("version", [1, 2])
def test_no_matching_row_is_ever_in_a_pruned_slice(tmp_path, version):
    """Differential: random tables (bucket counts 1..16), random predicates; every slice
    holding a row the predicate matches (evaluated row by row on the files' rows) is kept,
    and the bucket rule does prune."""
    rng = random.Random(1000 + version)
    pruned_any = 0
    for table in range(12):
        buckets = rng.randint(1, 16)
        writer, rows = _differential_table(str(tmp_path / f"t{table}"), rng, buckets, version)
        snapshot = resolve_read_view(writer.root)
        schema = table_schema(snapshot, LOCAL)
        truth = {}
        for s in snapshot.slices:
            parts = []
            for f in s.data_files:
                data = orc.ORCFile(f.path).read()
                if "row" in data.column_names:
                    data = pa.Table.from_struct_array(data.column("row").combine_chunks())
                parts.append(data.select(["id", "tag", "amount"]).cast(schema))
            truth[s.key] = pa.concat_tables(parts)
        option = {"columns": ["id", "tag"], "buckets": buckets, "version": version}
        for _ in range(25):
            where = _random_predicate(rng, rows)
            expr = bind(parse_predicate(where), schema)
            manifest = build_manifest(snapshot, expr, schema, bucketing=option)
            kept = set(manifest.slice_keys)
            pruned_any += manifest.metrics.slices_pruned_by_bucket
            assert manifest.metrics.slices_kept + manifest.metrics.slices_pruned_by_bucket == len(
                snapshot.slices
            )
            for key, data in truth.items():
                if evaluate_rows(expr, data).true_count:
                    assert key in kept, (version, buckets, where, key)
    assert pruned_any > 100


# -- metrics, manifests, CLI, by name ------------------------------------------------------------


def test_the_metric_is_in_the_manifest_and_the_published_record(bucketed, tmp_path):
    manifest = compute_manifest(
        bucketed.root, "id = 3", bucketing={"columns": ["id"], "buckets": 8}
    )
    for suffix in (".json", ".jsonl", ".parquet"):
        back = read_manifest(write_manifest(manifest, str(tmp_path / f"m{suffix}")))
        assert back.metrics.slices_pruned_by_bucket == 7
    record = metrics_record(bucketed.root, manifest.header())
    assert record["pruning"]["slices_pruned_by_bucket"] == 7
    assert "7 ruled out by bucket" in format_record(record)
    old = {k: v for k, v in manifest.metrics.to_dict().items() if k != "slices_pruned_by_bucket"}
    assert PruningMetrics.from_dict(old).slices_pruned_by_bucket == 0  # manifests from before
    data = manifest.to_dict()
    data["metrics"] = old
    assert SliceManifest.from_dict(data).metrics.slices_pruned_by_bucket == 0


def test_the_cli_takes_the_bucketing_of_a_table_read_storage_only(bucketed, tmp_path, capsys):
    args = ["manifest", bucketed.root, "--where", "id = 9", "--bucketed-by", "id",
            "--buckets", "8", "--bucketing-version", "2", "--json"]  # fmt: skip
    assert cli.main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["slice_keys"] == [f"#{bucket_of([9], ['bigint'], 8)}"]
    assert out["metrics"]["slices_pruned_by_bucket"] == 7
    assert cli.main(args[:-1]) == 0
    assert "7 slice(s) ruled out by Hive's bucketing hash" in capsys.readouterr().out
    assert cli.main(["manifest", bucketed.root, "--where", "id = 9", "--buckets", "8"]) != 0
    assert "--bucketed-by and --buckets go together" in capsys.readouterr().err


def test_by_name_the_metastores_bucketing_prunes(metastore_db):
    """Read by name, the bucketing comes from the metastore (bucketCols, numBuckets and the
    bucketing_version table parameter), with no option."""
    from airflow_provider_acid.metastore import open_table

    writer = metastore_db.writer("b", [("id", "bigint"), ("name", "string")], buckets=4,
                                 bucket_by="id")  # fmt: skip
    registered = metastore_db.register(writer)
    writer.insert([{"id": i, "name": f"n{i}"} for i in range(64)])
    source = open_table(metastore_db.client, registered.name)
    assert source.definition.bucket_columns == ("id",) and source.definition.num_buckets == 4
    assert source.definition.bucketing_version == 2
    manifest = compute_manifest(source, "id = 10")
    assert manifest.slice_keys == [f"#{bucket_of([10], ['bigint'], 4)}"]
    assert manifest.metrics.slices_pruned_by_bucket == 3


STATSD_SCRIPT = """
import json, sys
from airflow_provider_acid.operators.acid import AcidPublishPruningMetricsOperator

op = AcidPublishPruningMetricsOperator(task_id="publish", manifest=json.loads(sys.argv[1]))
print(json.dumps(op.execute({})))
"""


def _statsd_lines(metrics: dict) -> dict[str, str]:
    """The StatsD lines the metrics operator sends (a real listener on loopback)."""
    import os
    import socket
    import subprocess
    import sys
    import time

    listener = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    listener.bind(("127.0.0.1", 0))
    listener.settimeout(0.5)
    env = {
        **os.environ,
        "AIRFLOW__METRICS__STATSD_ON": "True",
        "AIRFLOW__METRICS__STATSD_HOST": "127.0.0.1",
        "AIRFLOW__METRICS__STATSD_PORT": str(listener.getsockname()[1]),
        "AIRFLOW__METRICS__STATSD_PREFIX": "airflow",
    }
    manifest = {"table_uri": "/wh/t", "metrics": metrics}
    done = subprocess.run(
        [sys.executable, "-c", STATSD_SCRIPT, json.dumps(manifest)],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    received: list[str] = []
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            data, _ = listener.recvfrom(65535)
        except TimeoutError:
            break
        received += data.decode().splitlines()
    listener.close()
    return {line.split(":", 1)[0]: line for line in received}


def test_the_metric_is_published_over_statsd(bucketed):
    manifest = compute_manifest(
        bucketed.root, "id = 3", bucketing={"columns": ["id"], "buckets": 8}
    )
    metrics = manifest.metrics.to_dict()
    lines = _statsd_lines(metrics)
    name = "airflow.acid.pruning.slices_pruned_by_bucket"
    assert lines[name].startswith(f"{name}:7|g")
    old = {k: v for k, v in metrics.items() if k != "slices_pruned_by_bucket"}
    assert _statsd_lines(old)[name].startswith(f"{name}:0|g")  # a record from before: 0
