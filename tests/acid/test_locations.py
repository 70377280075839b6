import os

import pytest

from airflow_provider_acid.acid.locations import (
    LocationNotAllowedError,
    OutputInsideTableError,
    check_location,
    check_outside_table,
    is_within,
)


def test_inside_allowed_prefixes(tmp_path):
    allowed = f"s3://warehouse/, {tmp_path}/data"
    assert check_location("s3://warehouse/sales", allowed) == "s3://warehouse/sales"
    (tmp_path / "data" / "t").mkdir(parents=True)
    assert check_location(str(tmp_path / "data" / "t"), allowed)
    assert check_location(f"file://{tmp_path}/data/t", allowed)


@pytest.mark.parametrize(
    ("uri", "message"),
    [
        ("s3://warehouse-other/x", "outside the allowed prefixes"),
        ("s3://warehouse/../secrets/x", "'..' is not allowed"),
        ("gs://warehouse/x", "outside the allowed prefixes"),
        ("relative/path", "relative path"),
        ("", "empty"),
    ],
)
def test_refused_with_the_argument_named(uri, message):
    with pytest.raises(LocationNotAllowedError, match=message) as err:
        check_location(uri, "s3://warehouse/", what="table_uri")
    assert "table_uri" in str(err.value)


def test_dotdot_and_symlinks_out_of_a_local_prefix_are_refused(tmp_path):
    allowed = tmp_path / "allowed"
    outside = tmp_path / "outside"
    allowed.mkdir()
    outside.mkdir()
    os.symlink(outside, allowed / "link")
    with pytest.raises(LocationNotAllowedError, match="outside"):
        check_location(str(allowed / "link"), str(allowed))
    with pytest.raises(LocationNotAllowedError, match="outside"):
        check_location(str(allowed / ".." / "outside"), str(allowed))


def test_nothing_is_allowed_without_configuration():
    with pytest.raises(LocationNotAllowedError, match="no allowed URI prefixes"):
        check_location("s3://warehouse/x", "")


# -- outputs never go into the Hive table ----------------------------------------------------


@pytest.mark.parametrize(
    ("uri", "inside"),
    [
        ("s3://warehouse/sales", True),
        ("s3://warehouse/sales/", True),
        ("s3://warehouse/sales/snapshots", True),
        ("s3://warehouse/sales/x/../y", True),
        ("s3://warehouse/sales_snapshots", False),  # a sibling sharing a name prefix
        ("s3://warehouse", False),
        ("gs://warehouse/sales/snapshots", False),
        ("memory://warehouse/sales/x", False),
    ],
)
def test_is_within_compares_normalised_paths_of_one_scheme(uri, inside):
    assert is_within(uri, "s3://warehouse/sales") is inside


def test_a_local_symbolic_link_into_the_table_is_inside(tmp_path):
    (tmp_path / "table" / "dt=1").mkdir(parents=True)
    os.symlink(tmp_path / "table" / "dt=1", tmp_path / "link")
    with pytest.raises(OutputInsideTableError, match="output_uri .* is inside the Hive table"):
        check_outside_table(str(tmp_path / "link" / "out"), f"file://{tmp_path}/table")
    assert check_outside_table(str(tmp_path / "out"), str(tmp_path / "table"))


def test_compaction_refuses_an_output_inside_the_table_and_writes_nothing(tmp_path):
    from airflow_provider_acid.engine.compaction import compact_table
    from airflow_provider_acid.testing import generate_demo_table

    table = tmp_path / "t"
    generate_demo_table(str(table), rows_per_bucket=20, partitions=1, buckets=1)
    before = sorted(p.relative_to(table) for p in table.rglob("*"))
    for out in (table, table / "snap", table / "dt=2024-01-01"):
        with pytest.raises(OutputInsideTableError, match="output location"):
            compact_table(str(table), str(out))
    assert sorted(p.relative_to(table) for p in table.rglob("*")) == before
    compact_table(str(table), str(tmp_path / "t_snapshots"))  # a sibling is fine


def test_the_on_demand_request_refuses_an_output_inside_the_table(hive_table):
    from airflow_provider_acid.engine.request import SnapshotRequestError, validate_snapshot_request

    table = str(hive_table("nation"))
    with pytest.raises(SnapshotRequestError, match="output_uri .* is inside the Hive table"):
        validate_snapshot_request(
            table_uri=table,
            output_uri=table + "/out",
            predicate="",
            valid_write_ids="",
            allowed_prefixes=table,
        )
