import pytest

from airflow_provider_acid.acid.names import (
    BaseDir,
    DeltaDir,
    DeltaKind,
    is_hidden,
    is_side_file,
    parse_acid_dir,
    parse_bucket_file,
    parse_original_file,
)
from airflow_provider_acid.acid.partitions import (
    Partition,
    escape_path_name,
    parse_partition_component,
    unescape_path_name,
)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("base_0000005", BaseDir("base_0000005", 5)),
        ("base_5", BaseDir("base_5", 5)),
        ("base_0000005_v0000123", BaseDir("base_0000005_v0000123", 5, 123)),
        (
            "delta_0000001_0000001_0000",
            DeltaDir("delta_0000001_0000001_0000", DeltaKind.INSERT, 1, 1, 0),
        ),
        ("delta_025_030", DeltaDir("delta_025_030", DeltaKind.INSERT, 25, 30, None)),
        ("delta_0000063_63", DeltaDir("delta_0000063_63", DeltaKind.INSERT, 63, 63, None)),
        (
            "delete_delta_0000004_0000004",
            DeltaDir("delete_delta_0000004_0000004", DeltaKind.DELETE, 4, 4, None),
        ),
        (
            "delete_delta_0000003_0000007_0002_v0000042",
            DeltaDir("delete_delta_0000003_0000007_0002_v0000042", DeltaKind.DELETE, 3, 7, 2, 42),
        ),
        (
            "delta_0000003_0000007_v0000042",
            DeltaDir("delta_0000003_0000007_v0000042", DeltaKind.INSERT, 3, 7, None, 42),
        ),
    ],
)
def test_folder_names_parse_into_value_objects(name, expected):
    assert parse_acid_dir(name) == expected


@pytest.mark.parametrize(
    "name",
    ["base_", "base_x", "delta_1", "delta_1_2_3_4", "deltas_1_2", "fld1=1", "000000_0", "base_5_v"],
)
def test_other_names_are_not_acid_folders(name):
    assert parse_acid_dir(name) is None


def test_delta_order_is_hives():
    names = [
        "delta_0000002_0000002_0001",
        "delta_0000001_0000005",
        "delta_0000002_0000002_0000",
        "delete_delta_0000002_0000002_0000",
        "delta_0000001_0000001_0000",
        "delta_0000002_0000002",
    ]
    ordered = sorted((parse_acid_dir(n) for n in names), key=lambda d: d.sort_key)
    assert [d.name for d in ordered] == [
        "delta_0000001_0000005",  # min asc, then max desc
        "delta_0000001_0000001_0000",
        "delta_0000002_0000002",  # no statement (minor compacted) sorts first
        "delete_delta_0000002_0000002_0000",  # same range and statement: by name
        "delta_0000002_0000002_0000",
        "delta_0000002_0000002_0001",
    ]


def test_bucket_and_original_file_names():
    assert parse_bucket_file("bucket_00003").bucket_id == 3
    assert parse_bucket_file("bucket_00003_2").attempt == 2
    assert parse_bucket_file("bucket_00003_flush_length") is None
    original = parse_original_file("000002_0_copy_11")
    assert (original.bucket_id, original.task, original.copy) == (2, 0, 11)
    assert parse_original_file("000001_0").copy == 0
    assert parse_original_file("part-0000.orc") is None


def test_side_and_hidden_files():
    for name in ("_orc_acid_version", "_metadata_acid", "bucket_00000_flush_length"):
        assert is_side_file(name)
    assert not is_side_file("bucket_00000")
    assert is_hidden("_SUCCESS") and is_hidden(".bucket_00000.crc")
    assert not is_hidden("bucket_00000")


def test_partition_names_decode_hive_escapes_and_the_default_partition():
    assert parse_partition_component("ts=2024-01-01 10%3A00%3A00") == ("ts", "2024-01-01 10:00:00")
    assert parse_partition_component("p=a%2Fb%3Dc%25") == ("p", "a/b=c%")
    assert parse_partition_component("p=__HIVE_DEFAULT_PARTITION__") == ("p", None)
    assert parse_partition_component("delta_1_1") is None
    part = Partition.from_components(["dt=2024-01-01", "region=eu%2Fwest"])
    assert part.as_dict() == {"dt": "2024-01-01", "region": "eu/west"}
    assert part.path == "dt=2024-01-01/region=eu%2Fwest"  # named as on storage


@pytest.mark.parametrize("value", ["a:b", "x/y", "100%", "k=v", "plain", "a#b?c*"])
def test_escaping_round_trips(value):
    assert unescape_path_name(escape_path_name(value)) == value
    assert "/" not in escape_path_name(value) and ":" not in escape_path_name(value)


@pytest.mark.parametrize(
    "expected",
    [
        BaseDir("base_0000005", 5),
        BaseDir("base_0000005_v0000123", 5, 123),
        DeltaDir("delta_0000001_0000002", DeltaKind.INSERT, 1, 2),
        DeltaDir("delete_delta_0000003_0000003_0001_v0000009", DeltaKind.DELETE, 3, 3, 1, 9),
    ],
)
def test_a_parsed_folder_is_the_object_its_init_makes(expected):
    import pickle
    from dataclasses import FrozenInstanceError, replace

    parsed = parse_acid_dir(expected.name)  # made through its slots, without __init__
    assert parsed == expected and hash(parsed) == hash(expected)
    assert repr(parsed) == repr(expected) and type(parsed) is type(expected)
    assert pickle.loads(pickle.dumps(parsed)) == expected
    assert replace(parsed, name="x") == replace(expected, name="x")
    with pytest.raises(FrozenInstanceError):
        parsed.name = "other"  # type: ignore[misc]
