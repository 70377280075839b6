"""Slice manifests on real tables: fixture files and generated Hive ACID tables."""

from __future__ import annotations

import datetime as dt
import random

import fsspec
import pyarrow as pa
import pyarrow.orc as orc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_provider_acid.acid.resolution import resolve_read_view
from airflow_provider_acid.acid.schema import table_schema
from airflow_provider_acid.pruning.manifest import build_manifest, compute_manifest, refresh_index
from airflow_provider_acid.pruning.manifest_files import read_manifest, write_manifest
from airflow_provider_acid.pruning.predicates import PredicateError, bind, evaluate_rows
from airflow_provider_acid.testing import AcidTableWriter

LOCAL = fsspec.filesystem("file")


def test_nation_fixture_prunes_100_and_keeps_5(hive_table, tmp_path):
    table = str(hive_table("nation"))
    index = str(tmp_path / "index")
    pruned = compute_manifest(table, "n_nationkey = 100", index_uri=index, refresh=True)
    assert pruned.slices == () and pruned.metrics.skipping_ratio == 1.0
    kept = compute_manifest(table, "n_nationkey = 5", index_uri=index)
    assert kept.slice_keys == ["#0"]
    (slice_,) = kept.slices
    assert [f.role for f in slice_.files] == ["delta", "delete_delta", "delete_delta"]
    assert kept.predicate == "n_nationkey = 5"
    assert kept.metrics.files_candidate == 1 and kept.metrics.files_not_indexed == 0


def test_without_an_index_every_file_is_a_candidate(hive_table):
    manifest = compute_manifest(str(hive_table("nation")), "n_nationkey = 100")
    assert manifest.slice_keys == ["#0"]
    assert manifest.metrics.files_not_indexed == 1


@pytest.fixture
def sales(tmp_path):
    """Two partitions (one null), two buckets; id ranges known per partition and bucket."""
    writer = AcidTableWriter(
        str(tmp_path / "sales"),
        [("id", "bigint"), ("amount", "double"), ("category", "string")],
        partition_columns=[("dt", "string")],
        buckets=2,
        stripe_rows=50,
    )
    for day, base in (("2024-01-01", 0), ("2024-01-02", 1000), (None, 5000)):
        rows = [
            {"id": base + i, "amount": float(i), "category": "ab"[i % 2], "dt": day}
            for i in range(100)
        ]
        writer.insert(rows)
    writer.delete(lambda r: r["id"] == 1001)
    writer.insert([{"id": 9999, "amount": 1.0, "category": "z", "dt": "2024-01-02"}])
    return writer


def test_partition_predicates_prune_partitions_first(sales, tmp_path):
    root = sales.root
    index = str(tmp_path / "index")
    manifest = compute_manifest(root, "dt = '2024-01-02'", index_uri=index, refresh=True)
    assert manifest.metrics.partitions_total == 3 and manifest.metrics.partitions_kept == 1
    assert {s.partition for s in manifest.slices} == {"dt=2024-01-02"}
    nulls = compute_manifest(root, "dt IS NULL", index_uri=index)
    assert {s.partition_values["dt"] for s in nulls.slices} == {None}
    both = compute_manifest(root, "dt = '2024-01-01' OR id >= 9000", index_uri=index)
    assert {s.partition for s in both.slices} == {"dt=2024-01-01", "dt=2024-01-02"}
    # the later delta with id 9999 is in one bucket only: the other slices of that day go
    assert len([s for s in both.slices if s.partition == "dt=2024-01-02"]) == 1


def test_files_the_index_lacks_are_added_back(sales, tmp_path):
    index = str(tmp_path / "index")
    compute_manifest(sales.root, "id = 5", index_uri=index, refresh=True)
    sales.insert([{"id": 5, "amount": 0.0, "category": "new", "dt": "2024-01-02"}])
    stale = compute_manifest(sales.root, "id = 5", index_uri=index)
    assert stale.metrics.files_not_indexed == 1
    assert "dt=2024-01-02" in {s.partition for s in stale.slices}  # kept though not indexed
    fresh = compute_manifest(sales.root, "id = 5", index_uri=index, refresh=True)
    assert fresh.metrics.files_not_indexed == 0
    assert fresh.slice_keys == stale.slice_keys


def test_file_granularity_drops_non_candidates_but_keeps_deletes_and_originals_whole(tmp_path):
    writer = AcidTableWriter(str(tmp_path / "t"), [("id", "bigint")], buckets=1)
    writer.add_original_files([{"id": i} for i in range(10)], bucket=0, copies=1)
    writer.insert([{"id": 500}])
    writer.insert([{"id": 700}])
    writer.delete(lambda r: r["id"] == 3)
    index = str(tmp_path / "index")
    slice_level = compute_manifest(writer.root, "id = 700", index_uri=index, refresh=True)
    file_level = compute_manifest(writer.root, "id = 700", index_uri=index, granularity="file")
    roles = lambda m: sorted(f.role for f in m.slices[0].files)  # noqa: E731
    assert roles(slice_level) == ["delete_delta", "delta", "delta", "original", "original"]
    assert roles(file_level) == ["delete_delta", "delta"]
    originals = compute_manifest(writer.root, "id = 1", index_uri=index, granularity="file")
    assert roles(originals) == ["delete_delta", "original", "original"]  # both, row ids


def test_bad_predicates_name_the_column(sales):
    with pytest.raises(PredicateError, match="nope"):
        compute_manifest(sales.root, "nope = 1")
    with pytest.raises(ValueError, match="granularity"):
        compute_manifest(sales.root, "id = 1", granularity="row")


def test_the_index_may_not_live_inside_the_table(sales):
    with pytest.raises(ValueError, match="inside the Hive table"):
        compute_manifest(sales.root, "id = 1", index_uri=sales.root + "/_idx", refresh=True)


@pytest.mark.parametrize("suffix", ["json", "jsonl", "parquet"])
def test_manifest_round_trips_in_each_form(sales, tmp_path, suffix):
    manifest = compute_manifest(
        sales.root, "amount > 50", index_uri=str(tmp_path / "i"), refresh=True
    )
    path = write_manifest(manifest, str(tmp_path / f"out/manifest.{suffix}"))
    again = read_manifest(path)
    assert again.to_dict() == manifest.to_dict()
    assert again.slices and again.metrics.slices_kept == len(again.slices)


# -- differential: a slice with a row matching the predicate is never dropped ----------------

PREDICATES = st.one_of(
    st.builds(lambda v: f"id = {v}", st.integers(-5, 130)),
    st.builds(lambda v: f"id >= {v}", st.integers(-5, 130)),
    st.builds(lambda v: f"amount < {v}", st.floats(-1, 130, allow_nan=False)),
    st.builds(lambda v: f"category = '{v}'", st.sampled_from(["a", "b", "c", "x"])),
    st.builds(lambda v: f"category LIKE '{v}%'", st.sampled_from(["a", "c", "x1"])),
    st.builds(lambda d: f"day = DATE '{d}'", st.sampled_from(["2024-01-01", "2024-01-03"])),
    st.just("category IS NULL"),
    st.builds(lambda a, b: f"id BETWEEN {a} AND {b}", st.integers(0, 120), st.integers(0, 120)),
)


@pytest.fixture(scope="module")
def random_table(tmp_path_factory):
    root = tmp_path_factory.mktemp("diff")
    rng = random.Random(7)
    writer = AcidTableWriter(
        str(root / "t"),
        [("id", "bigint"), ("amount", "double"), ("category", "string")],
        partition_columns=[("day", "date")],
        buckets=3,
    )
    for _ in range(6):
        rows = [
            {
                "id": rng.randint(0, 120),
                "amount": rng.uniform(0, 120),
                "category": rng.choice(["a", "b", "x1", None]),
                "day": dt.date(2024, 1, rng.randint(1, 2)),
            }
            for _ in range(rng.randint(1, 12))
        ]
        writer.insert(rows)
    writer.delete(lambda r: r["id"] % 7 == 0)
    snapshot = resolve_read_view(writer.root)
    schema = table_schema(snapshot, LOCAL, partition_types={"day": "date"})
    index = str(root / "index")
    refresh_index(snapshot, LOCAL, index)
    truth = {}
    for s in snapshot.slices:
        values = s.partition.as_dict()
        rows = []
        for f in s.data_files:
            data = orc.ORCFile(f.path).read().column("row").combine_chunks().flatten()
            t = pa.table({"id": data[0], "amount": data[1], "category": data[2]})
            day = pa.array([dt.date.fromisoformat(values["day"])] * t.num_rows, pa.date32())
            rows.append(t.append_column("day", day))
        truth[s.key] = pa.concat_tables(rows)
    return snapshot, schema, index, truth


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(where=PREDICATES, granularity=st.sampled_from(["slice", "file"]))
def test_no_slice_with_a_matching_row_is_dropped(random_table, where, granularity):
    from airflow_provider_acid.pruning.manifest import parse_predicate

    snapshot, schema, index, truth = random_table
    expr = bind(parse_predicate(where), schema)
    manifest = build_manifest(snapshot, expr, schema, index, granularity=granularity)
    kept = set(manifest.slice_keys)
    for key, rows in truth.items():
        if evaluate_rows(
            expr, rows.cast(pa.schema([schema.field(n) for n in rows.column_names]))
        ).true_count:
            assert key in kept, (where, key)


def test_the_differential_table_does_prune(random_table):
    snapshot, schema, index, _ = random_table
    from airflow_provider_acid.pruning.manifest import parse_predicate

    expr = bind(parse_predicate("id > 500"), schema)
    manifest = build_manifest(snapshot, expr, schema, index)
    assert manifest.slices == () and manifest.metrics.slices_total == len(snapshot.slices) > 3


def test_a_manifest_is_never_written_inside_the_table(sales, tmp_path):
    manifest = compute_manifest(sales.root, "id = 1", index_uri=str(tmp_path / "i"), refresh=True)
    with pytest.raises(ValueError, match="manifest location .* is inside the Hive table"):
        write_manifest(manifest, sales.root + "/_manifests/run.json")
    assert not fsspec.filesystem("file").exists(sales.root + "/_manifests")
