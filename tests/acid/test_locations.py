import os

import pytest

from airflow_provider_acid.acid.locations import LocationNotAllowedError, check_location


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
