import pytest

from airflow_provider_acid.acid.writeids import (
    NO_OPEN_ID,
    RangeValidity,
    ValidTxnList,
    ValidTxnWriteIdList,
    ValidWriteIdList,
    WriteIdListError,
    parse_write_id_list,
)

HIVE_WRITTEN = [
    "test_hcube_2.tbl1:3:9223372036854775807::",
    "default.t:10:7:7,9:3,5",
    "default.t:10:9223372036854775807::4",
    "null:0:9223372036854775807::",
]


@pytest.mark.parametrize("text", HIVE_WRITTEN)
def test_write_id_lists_round_trip_unchanged(text):
    assert str(ValidWriteIdList.parse(text)) == text


def test_write_id_list_fields_and_validity():
    ids = ValidWriteIdList.parse("default.t:10:7:7,9:3,5")
    assert (ids.table, ids.high_watermark, ids.min_open_write_id) == ("default.t", 10, 7)
    assert ids.open_ids == (7, 9) and ids.aborted_ids == (3, 5)
    assert [w for w in range(1, 13) if ids.is_valid(w)] == [1, 2, 4, 6, 8, 10]
    assert ids.is_aborted(3) and not ids.is_aborted(7)
    assert ids.is_valid_base(6) and not ids.is_valid_base(7)
    assert ids.range_validity(1, 2) is RangeValidity.ALL
    assert ids.range_validity(1, 3) is RangeValidity.SOME
    assert ids.range_validity(3, 3) is RangeValidity.NONE
    assert ids.range_validity(10, 12) is RangeValidity.SOME
    assert ids.range_validity(11, 12) is RangeValidity.NONE
    assert ids.invalid_ids_in(1, 6) == (3, 5)
    assert ids.invalid_ids_in(8, 12) == (9, 11, 12)  # open 9, and 11-12 above the watermark
    assert ids.is_range_aborted(5, 5) and not ids.is_range_aborted(5, 7)


def test_multi_table_form_round_trips_and_selects_a_table():
    text = "1915$db.a:3:9223372036854775807::$db.b:8:6:6:2"
    multi = ValidTxnWriteIdList.parse(text)
    assert str(multi) == text and multi.txn_id == 1915
    assert multi.for_table("DB.B").high_watermark == 8
    assert parse_write_id_list(text, table="db.a").high_watermark == 3
    with pytest.raises(WriteIdListError, match="name the table"):
        parse_write_id_list(text)
    with pytest.raises(WriteIdListError, match="db.c"):
        multi.for_table("db.c")


def test_transaction_list_round_trips_and_reads_ranges():
    text = "1915:9223372036854775807::1899,1907"
    txns = ValidTxnList.parse(text)
    assert str(txns) == text
    assert txns.is_valid(1900) and not txns.is_valid(1899) and txns.is_aborted(1907)
    assert not txns.is_valid(1916)
    ranged = ValidTxnList.parse("20:5:5:7-9")
    assert ranged.aborted_ids == (7, 8, 9) and str(ranged) == "20:5:5:7-9"
    assert not ranged.is_valid(5) and ranged.is_valid(6)


def test_absent_list_means_everything_committed():
    ids = ValidWriteIdList.all_committed()
    assert ids.min_open_write_id == NO_OPEN_ID
    assert ids.is_valid(10**12) and ids.range_validity(1, 10**9) is RangeValidity.ALL


@pytest.mark.parametrize(
    ("text", "quoted"),
    [
        ("default.t:ten:9223372036854775807::", "'ten'"),
        ("default.t:10", "db.table:highWatermark"),
        ("default.t:10:5:x:", "'x'"),
        ("default.t:10:5:4:4", "both open and aborted"),
        ("abc$db.t:1:1::", "'abc'"),
    ],
)
def test_malformed_lists_quote_the_bad_part(text, quoted):
    with pytest.raises(WriteIdListError) as err:
        parse_write_id_list(text)
    assert quoted in str(err.value)


def test_malformed_transaction_list():
    with pytest.raises(WriteIdListError, match="'9-7'"):
        ValidTxnList.parse("10:5::9-7")
