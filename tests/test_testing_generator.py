"""Tests of the Hive 3 ACID table generator (``airflow_provider_acid.testing``).

The files the generator writes are read back with ``pyarrow.orc`` (not with the generator), and
the expected snapshot is recomputed here by a deliberately naive reader that applies the ACID
events by hand, so the checks do not depend on the simulator's own bookkeeping.
"""

from __future__ import annotations

import datetime as dt
import io
import re
import shutil
import struct
import uuid
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any

import fsspec
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.orc as po
import pyorc
import pytest

from airflow_provider_acid.acid.hive_types import HiveType
from airflow_provider_acid.testing import AcidTableWriter, generate_demo_table
from airflow_provider_acid.testing.acid_format import (
    ACID_COLUMN_NAMES,
    RowIdentity,
    decode_bucket,
    encode_bucket_v1,
)
from airflow_provider_acid.testing.acid_layout import (
    HIVE_DEFAULT_PARTITION,
    base_dir_name,
    bucket_file_name,
    delete_delta_dir_name,
    delta_dir_name,
    escape_path_name,
    original_file_name,
    partition_dir_name,
)
from airflow_provider_acid.testing.bucketing import hive_bucket_hash, hive_bucket_ids, murmur3_32
from airflow_provider_acid.testing.orc_footer import append_user_metadata
from airflow_provider_acid.testing.orc_types import (
    hive_type_of_arrow,
    orc_arrow_type,
    orc_type,
    parse_hive_type,
    struct_type,
)
from airflow_provider_acid.testing.orc_writer import write_acid_file
from airflow_provider_acid.testing.write_history import WriteIdSnapshot, WriteState

FIXTURES = Path("/work/shared/fixtures/hive-acid/trino")
REAL_ACID_FILE = FIXTURES / "nationFile25kRowsSortedOnNationKey" / "bucket_00000"
REAL_DELETE_DELTA = (
    FIXTURES / "nation_delete_deltas" / "delete_delta_0000003_0000003_0000" / "bucket_00000"
)
NATION_COLUMNS = [
    ("n_nationkey", "int"),
    ("n_name", "string"),
    ("n_regionkey", "int"),
    ("n_comment", "string"),
]
METADATA_KEYS = {"hive.acid.key.index", "hive.acid.stats", "hive.acid.version"}
NO_OPEN = 9223372036854775807

FOLDER_RE = re.compile(
    r"^(base_\d{7}(_v\d{7})?"
    r"|delta_\d{7}_\d{7}(_\d{4})?(_v\d{7})?"
    r"|delete_delta_\d{7}_\d{7}(_\d{4})?(_v\d{7})?)$"
)
ORIGINAL_RE = re.compile(r"^(\d{6})_0(_copy_(\d+))?$")


# ----------------------------------------------------------------------------------------------
# An independent, naive reader of what the generator wrote
# ----------------------------------------------------------------------------------------------


def read_orc(fs: Any, path: str) -> tuple[pa.Table, dict[str, bytes]]:
    with fs.open(path, "rb") as f:
        orc_file = po.ORCFile(io.BytesIO(f.read()))
    metadata = {k.decode(): v for k, v in (orc_file.metadata or {}).items()}
    return orc_file.read(), metadata


def unescape(text: str) -> str:
    return re.sub(r"%([0-9A-F]{2})", lambda m: chr(int(m.group(1), 16)), text)


def parse_snapshot(text: str) -> Any:
    _, hwm, _, open_ids, aborted = text.split(":")
    invalid = {int(x) for x in (open_ids + "," + aborted).split(",") if x}
    return lambda w: w == 0 or (w <= int(hwm) and w not in invalid)


def folder_range(name: str) -> tuple[int, int, bool]:
    """(min write id, max write id, compacted) of a base/delta folder name."""
    numbers = [int(x) for x in re.findall(r"_(\d+)", name)]
    if name.startswith("base_"):
        return numbers[0], numbers[0], "_v" in name
    compacted = "_v" in name or len(numbers) == 2
    return numbers[0], numbers[1], compacted


def expected_by_hand(
    fs: Any, root: str, data_columns: list[str], snapshot: str, *, use_compacted: bool = True
) -> Counter:
    """Rows a reader must see, computed from the files alone (Hive's rules, simply).

    Per partition: pick the newest base (ignoring compacted folders unless ``use_compacted``),
    the deltas above it (skipping deltas inside a compacted range), the original files if there
    is no base; drop events of invalid writes; remove inserts whose identity has a delete event.
    """
    valid = parse_snapshot(snapshot)
    root = fs._strip_protocol(root).rstrip("/")
    by_partition: dict[tuple, dict[str, list[str]]] = {}
    for path in sorted(fs.find(root)):
        parts = path[len(root) + 1 :].split("/")
        partition = tuple(p for p in parts if "=" in p)
        folder = parts[-2] if len(parts) > 1 and "=" not in parts[-2] else ""
        files = by_partition.setdefault(partition, {}).setdefault(folder, [])
        if not parts[-1].startswith("_"):  # an empty base still counts
            files.append(path)

    rows: Counter = Counter()
    for partition, folders in by_partition.items():
        values = []
        for part in partition:
            value = unescape(part.split("=", 1)[1])
            values.append(None if value == HIVE_DEFAULT_PARTITION else value)
        names = [n for n in folders if n]
        if not use_compacted:
            names = [n for n in names if not (folder_range(n)[2] and n.count("_v"))]
        bases = [n for n in names if n.startswith("base_") and valid(folder_range(n)[1])]
        base = max(bases, key=lambda n: folder_range(n)[1], default=None)
        floor = folder_range(base)[1] if base else -1
        deltas = [n for n in names if not n.startswith("base_") and folder_range(n)[0] > floor]
        compacted = [folder_range(n) for n in deltas if folder_range(n)[2]]
        deltas = [
            n
            for n in deltas
            if folder_range(n)[2]
            or not any(
                lo <= folder_range(n)[0] and folder_range(n)[1] <= hi for lo, hi, _ in compacted
            )
        ]
        inserts: list[tuple[tuple, tuple]] = []
        dead: set[tuple] = set()
        if base is None and "" in folders:  # original files, identities by name order
            position: dict[int, int] = {}
            for path in sorted(folders[""], key=lambda p: p.rsplit("/", 1)[1]):
                bucket = int(ORIGINAL_RE.match(path.rsplit("/", 1)[1]).group(1))
                table, _ = read_orc(fs, path)
                for row in table.to_pylist():
                    start = position.get(bucket, 0)
                    identity = (0, encode_bucket_v1(bucket), start)
                    position[bucket] = start + 1
                    inserts.append((identity, tuple(row[c] for c in data_columns)))
        for name in ([base] if base else []) + deltas:
            for path in folders[name]:
                table, _ = read_orc(fs, path)
                for event in table.to_pylist():
                    identity = (event["originalTransaction"], event["bucket"], event["rowId"])
                    if not valid(event["currentTransaction"]):
                        continue
                    if event["operation"] == 2:
                        dead.add(identity)
                    else:
                        inserts.append((identity, tuple(event["row"][c] for c in data_columns)))
        for identity, row in inserts:
            if identity not in dead:
                rows[row + tuple(values)] += 1
    return rows


def as_counter(table: pa.Table) -> Counter:
    return Counter(tuple(r.values()) for r in table.to_pylist())


def acid_folders(fs: Any, root: str) -> list[str]:
    root = fs._strip_protocol(root).rstrip("/")
    found = set()
    for path in fs.find(root):
        parts = path[len(root) + 1 :].split("/")
        if len(parts) > 1 and "=" not in parts[-2]:
            found.add("/".join(parts[:-1]))
    return sorted(found)


@pytest.fixture
def memory_root() -> str:
    root = f"memory://acid-tests/{uuid.uuid4().hex}/t"
    yield root
    fs = fsspec.filesystem("memory")
    if fs.exists(fs._strip_protocol(root)):
        fs.rm(fs._strip_protocol(root), recursive=True)


# ----------------------------------------------------------------------------------------------
# Format pieces
# ----------------------------------------------------------------------------------------------


def test_bucket_codec_v1() -> None:
    assert encode_bucket_v1(0) == 536870912 == 0x20000000
    assert encode_bucket_v1(2) == 537001984 == 0x20020000
    assert encode_bucket_v1(3, 5) == (1 << 29) | (3 << 16) | 5
    assert decode_bucket(537001984) == (2, 0)
    for bucket_id, statement_id in [(0, 0), (1, 1), (4095, 4095), (17, 300)]:
        assert decode_bucket(encode_bucket_v1(bucket_id, statement_id)) == (bucket_id, statement_id)
    assert decode_bucket(7) == (7, 0)  # codec V0: the plain bucket number
    assert RowIdentity(2, encode_bucket_v1(5, 1), 9).bucket_id == 5
    assert RowIdentity(2, encode_bucket_v1(5, 1), 9).statement_id == 1
    with pytest.raises(ValueError):
        encode_bucket_v1(4096)
    with pytest.raises(ValueError):
        decode_bucket(2 << 29)


def test_folder_and_file_names() -> None:
    assert base_dir_name(5) == "base_0000005"
    assert base_dir_name(5, 12) == "base_0000005_v0000012"
    assert delta_dir_name(3, 3, 0) == "delta_0000003_0000003_0000"
    assert delta_dir_name(1, 4, None, 9) == "delta_0000001_0000004_v0000009"
    assert delta_dir_name(1, 4) == "delta_0000001_0000004"
    assert delete_delta_dir_name(3, 3, 2) == "delete_delta_0000003_0000003_0002"
    assert bucket_file_name(3) == "bucket_00003"
    assert original_file_name(2) == "000002_0"
    assert original_file_name(2, 1) == "000002_0_copy_1"


def test_partition_escaping() -> None:
    assert escape_path_name("a:b/c=d%e") == "a%3Ab%2Fc%3Dd%25e"
    assert escape_path_name("x#y?z*\"'\\{[]^\x01\x7f") == "x%23y%3Fz%2A%22%27%5C%7B%5B%5D%5E%01%7F"
    assert escape_path_name("plain value-_.+ ok") == "plain value-_.+ ok"
    assert partition_dir_name({"DT": "2024-01-01", "ns": "a:b"}) == "dt=2024-01-01/ns=a%3Ab"
    assert partition_dir_name([("p", None)]) == "p=__HIVE_DEFAULT_PARTITION__"
    assert partition_dir_name([("p", "")]) == "p=__HIVE_DEFAULT_PARTITION__"
    assert partition_dir_name([("d", dt.date(2024, 2, 3)), ("b", True), ("i", 7)]) == (
        "d=2024-02-03/b=true/i=7"
    )


@pytest.mark.parametrize(
    "text, arrow_type, canonical",
    [
        ("boolean", pa.bool_(), "boolean"),
        ("TINYINT", pa.int8(), "tinyint"),
        ("smallint", pa.int16(), "smallint"),
        ("int", pa.int32(), "int"),
        ("integer", pa.int32(), "int"),
        ("bigint", pa.int64(), "bigint"),
        ("float", pa.float32(), "float"),
        ("double", pa.float64(), "double"),
        ("decimal(12, 2)", pa.decimal128(12, 2), "decimal(12,2)"),
        ("decimal", pa.decimal128(10, 0), "decimal(10,0)"),
        ("string", pa.string(), "string"),
        ("varchar(10)", pa.string(), "varchar(10)"),
        ("char(3)", pa.string(), "char(3)"),
        ("date", pa.date32(), "date"),
        ("timestamp", pa.timestamp("ns"), "timestamp"),
        ("binary", pa.binary(), "binary"),
        ("array<int>", pa.list_(pa.int32()), "array<int>"),
        ("map<string,array<bigint>>", pa.map_(pa.string(), pa.list_(pa.int64())), None),
        (
            "struct<a:int, B:struct<c:decimal(5,1)>>",
            pa.struct([("a", pa.int32()), ("B", pa.struct([("c", pa.decimal128(5, 1))]))]),
            "struct<a:int,B:struct<c:decimal(5,1)>>",
        ),
    ],
)
def test_hive_types(text: str, arrow_type: pa.DataType, canonical: str | None) -> None:
    hive_type = parse_hive_type(text)
    assert orc_arrow_type(hive_type) == arrow_type
    expected = canonical or text
    assert str(hive_type) == expected
    assert str(orc_type(hive_type)) == expected
    assert parse_hive_type(str(hive_type)) == hive_type


def test_hive_type_errors_and_arrow_mapping() -> None:
    for bad in ["int<", "decimal(40,2)", "varchar", "struct<a int>", "uniontype<int>", "int x"]:
        with pytest.raises(ValueError):
            parse_hive_type(bad)
    assert hive_type_of_arrow(pa.large_string()) == HiveType("string")
    assert hive_type_of_arrow(pa.timestamp("us", "UTC")) == HiveType("timestamp")
    assert str(hive_type_of_arrow(pa.map_(pa.string(), pa.int8()))) == "map<string,tinyint>"


def test_hive_bucketing_hash_matches_hive() -> None:
    # Values from Trino's TestHiveBucketing, computed there with Hive's own code (bucketing v2).
    assert hive_bucket_hash(300_000, "int") == -678663480
    assert hive_bucket_hash(-(2**31), "int") == 1194881028
    assert hive_bucket_hash(300_000_000_000, "bigint") == -888935297
    assert hive_bucket_hash(2**63 - 1, "bigint") == -536577852
    assert hive_bucket_hash(-32768, "smallint") == 1342976838
    assert hive_bucket_hash(32767, "smallint") == -684075052
    assert hive_bucket_hash(-128, "tinyint") == -128
    assert hive_bucket_hash("test string", "string") == -138301454
    assert hive_bucket_hash("", "string") == -965378730
    assert hive_bucket_hash("\u5f3a\u5927\u7684Trino\u5f15\u64ce", "varchar(15)") == 1784416344
    assert hive_bucket_hash(dt.date(2015, 11, 19), "date") == 8542395
    assert hive_bucket_hash(12.34, "double") == -2070733568
    assert hive_bucket_hash(float("inf"), "double") == 1614292060
    assert hive_bucket_hash(float("nan"), "double") == 1138026565
    assert hive_bucket_hash(5e-324, "double") == -8838199
    assert hive_bucket_hash(struct.unpack(">f", struct.pack(">f", 12.34))[0], "float") == -381747602
    assert hive_bucket_hash(float("-inf"), "float") == -1433270801
    assert hive_bucket_hash(True, "boolean") == 1
    assert hive_bucket_hash(None, "int") == 0
    assert murmur3_32(struct.pack(">i", 300_000)) == -678663480

    values = [0, 1, -1, 7, 2**31 - 1, -(2**31), 123456789, None]
    longs = values + [2**40 + 3, -(2**50), 2**63 - 1, -(2**63)]
    for hive_type, data in [("int", values), ("bigint", longs), ("date", values[:-3])]:
        vectorised = hive_bucket_ids(
            [pa.array(data, HiveType.parse(hive_type).to_arrow())], [hive_type], 7
        )
        by_value = [(hive_bucket_hash(v, hive_type) & 0x7FFFFFFF) % 7 for v in data]
        assert vectorised.to_pylist() == by_value
    strings = ["a", "bb", "ccc", "dddd", "é", None]
    assert hive_bucket_ids([pa.array(strings)], ["string"], 4).to_pylist() == [
        (hive_bucket_hash(v, "string") & 0x7FFFFFFF) % 4 for v in strings
    ]


# ----------------------------------------------------------------------------------------------
# ACID files against a real Hive file
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("engine", ["pyarrow", "pyorc"])
def test_rewriting_real_hive_files_gives_same_schema_rows_and_metadata(
    tmp_path: Path, engine: str
) -> None:
    fs = fsspec.filesystem("file")
    row_type = struct_type(NATION_COLUMNS)
    for real, stripe_rows in [(REAL_ACID_FILE, 5000), (REAL_DELETE_DELTA, 5000)]:
        real_table, real_metadata = read_orc(fs, str(real))
        out = str(tmp_path / engine / real.parent.name / "bucket_00000")
        written = write_acid_file(
            fs, out, real_table, row_type, stripe_rows=stripe_rows, engine=engine
        )
        mine, metadata = read_orc(fs, out)
        assert mine.schema.names == list(ACID_COLUMN_NAMES) == real_table.schema.names
        assert mine.schema == real_table.schema  # same field names and types, row struct too
        assert set(metadata) == METADATA_KEYS == set(real_metadata)
        assert metadata == real_metadata  # key index per stripe, stats, version, byte for byte
        assert dict(written.user_metadata) == real_metadata
        assert mine.equals(real_table)
        orc_file = po.ORCFile(out)
        assert orc_file.nstripes == po.ORCFile(str(real)).nstripes == written.stripes


def test_table_writer_file_matches_real_hive_file(tmp_path: Path) -> None:
    real, real_metadata = read_orc(fsspec.filesystem("file"), str(REAL_ACID_FILE))
    table = AcidTableWriter(str(tmp_path / "nation"), NATION_COLUMNS, stripe_rows=1000)
    table.insert(pa.Table.from_pylist([e["row"] for e in real.slice(0, 3000).to_pylist()]))
    path = tmp_path / "nation" / "delta_0000001_0000001_0000" / "bucket_00000"
    mine, metadata = read_orc(fsspec.filesystem("file"), str(path))
    assert [(f.name, f.type) for f in mine.schema] == [(f.name, f.type) for f in real.schema]
    assert set(metadata) == set(real_metadata)
    assert metadata["hive.acid.version"] == b"2"
    assert metadata["hive.acid.stats"] == b"3000,0,0"
    assert metadata["hive.acid.key.index"] == b"1,536870912,999;1,536870912,1999;1,536870912,2999;"
    assert (
        tmp_path / "nation" / "delta_0000001_0000001_0000" / "_orc_acid_version"
    ).read_bytes() == b"2"
    # the pyorc reader (another ORC reader build) agrees on schema and metadata
    with open(path, "rb") as f:
        reader = pyorc.Reader(f)
        assert str(reader.schema) == str(pyorc.Reader(open(REAL_ACID_FILE, "rb")).schema)
        assert reader.user_metadata == metadata


def test_append_user_metadata_is_readable_for_every_compression() -> None:
    table = pa.table({"a": list(range(1000)), "s": [str(i) for i in range(1000)]})
    for compression in ["uncompressed", "zlib", "snappy", "zstd", "lz4"]:
        sink = pa.BufferOutputStream()
        po.write_table(table, sink, compression=compression)
        data = append_user_metadata(
            sink.getvalue().to_pybytes(), {"k.one": b"1", "k2": b"\x00\xff"}
        )
        orc_file = po.ORCFile(io.BytesIO(data))
        assert dict(orc_file.metadata) == {b"k.one": b"1", b"k2": b"\x00\xff"}
        assert orc_file.read().equals(table)
        assert pyorc.Reader(io.BytesIO(data)).user_metadata == {"k.one": b"1", "k2": b"\x00\xff"}


# ----------------------------------------------------------------------------------------------
# The simulator
# ----------------------------------------------------------------------------------------------


def build_scenario(root: str, **options: Any) -> AcidTableWriter:
    """Inserts, deletes, updates, a multi-statement write, an aborted and an open write."""
    table = AcidTableWriter(
        root,
        [("id", "bigint"), ("name", "string"), ("amount", "decimal(10,2)")],
        partition_columns=[("dt", "string")],
        buckets=3,
        bucket_by="id",
        stripe_rows=4,
        **options,
    )
    days = ["2024-01-01", "a:b/c", None]
    rows = [
        {"id": i, "name": f"n{i}", "amount": Decimal(i) / 4, "dt": days[i % 3]} for i in range(30)
    ]
    table.insert(rows)  # write 1
    table.insert([{"id": 100 + i, "name": "x", "amount": 1, "dt": "2024-01-01"} for i in range(5)])
    table.delete(lambda r: r["id"] % 5 == 0)  # write 3
    table.update(pc.field("id") < 4, {"name": "updated", "amount": Decimal("9.99")})  # write 4
    with table.begin() as txn:  # write 5: three statements
        txn.insert([{"id": 200, "name": "multi", "amount": 2, "dt": "2024-01-01"}])
        txn.delete(lambda r: r["id"] == 7)
        txn.update(lambda r: r["id"] == 200, lambda r: {"name": r["name"] + "!"})
    aborted = table.begin()  # write 6
    aborted.insert([{"id": 300, "name": "aborted", "amount": 3, "dt": "2024-01-01"}])
    aborted.delete(lambda r: r["id"] == 8)
    aborted.abort()
    table.delete(lambda r: r["id"] == 101)  # write 7
    still_open = table.begin()  # write 8
    still_open.insert([{"id": 400, "name": "open", "amount": 4, "dt": "2024-01-01"}])
    still_open.delete(lambda r: r["id"] == 9)
    return table


def check_acid_files(fs: Any, table: AcidTableWriter) -> int:
    """Schema, metadata, sort order, bucket field and folder names of every ACID file."""
    root = table.path
    checked = 0
    for folder in acid_folders(fs, root):
        name = folder.rsplit("/", 1)[-1]
        assert FOLDER_RE.match(name), name
        assert fs.cat_file(f"{root}/{folder}/_orc_acid_version") == b"2"
        for path in fs.find(f"{root}/{folder}"):
            file_name = path.rsplit("/", 1)[1]
            if file_name.startswith("_"):
                continue
            assert re.fullmatch(r"bucket_\d{5}", file_name)
            events, metadata = read_orc(fs, path)
            assert events.schema.names == list(ACID_COLUMN_NAMES)
            assert [f.type for f in events.schema][:5] == [
                pa.int32(),
                pa.int64(),
                pa.int32(),
                pa.int64(),
                pa.int64(),
            ]
            assert events.schema.field("row").type == orc_arrow_type(table.row_type)
            assert set(metadata) == METADATA_KEYS
            assert metadata["hive.acid.version"] == b"2"
            ops = Counter(events["operation"].to_pylist())
            assert metadata["hive.acid.stats"] == f"{ops[0]},{ops[1]},{ops[2]}".encode()
            keys = list(
                zip(
                    events["originalTransaction"].to_pylist(),
                    events["bucket"].to_pylist(),
                    events["rowId"].to_pylist(),
                    strict=True,
                )
            )
            assert keys == sorted(keys) and len(set(keys)) == len(keys)
            with fs.open(path, "rb") as f:
                orc_file = po.ORCFile(io.BytesIO(f.read()))
            stripe_last = []
            offset = 0
            for i in range(orc_file.nstripes):
                offset += orc_file.read_stripe(i).num_rows
                stripe_last.append("{},{},{};".format(*keys[offset - 1]))
            assert metadata["hive.acid.key.index"].decode() == "".join(stripe_last)
            lengths = [orc_file.read_stripe(i).num_rows for i in range(orc_file.nstripes)]
            assert (
                all(n == table.stripe_rows for n in lengths[:-1])
                and lengths[-1] <= table.stripe_rows
            )
            bucket_id = int(file_name[len("bucket_") :])
            assert {decode_bucket(b)[0] for _, b, _ in keys} == {bucket_id}
            if name.startswith("delete_delta"):
                assert set(ops) == {2} and events["row"].null_count == events.num_rows
                assert set(events["currentTransaction"].to_pylist()) <= set(
                    range(folder_range(name)[0], folder_range(name)[1] + 1)
                )
            else:
                assert set(ops) == {0} and events["row"].null_count == 0
                assert (
                    events["originalTransaction"].to_pylist()
                    == events["currentTransaction"].to_pylist()
                )
            checked += 1
    return checked


@pytest.mark.parametrize("where", ["local", "memory"])
def test_scenario_files_and_expected_rows(tmp_path: Path, memory_root: str, where: str) -> None:
    root = str(tmp_path / "wh" / "t") if where == "local" else memory_root
    table = build_scenario(root)
    fs = table.fs
    assert check_acid_files(fs, table) > 10

    assert table.valid_write_ids() == "default.t:8:8:8:6"
    assert table.valid_transactions() == "8:8:8:6"
    assert table.write_state(6) is WriteState.ABORTED

    expected = table.expected_rows()
    assert expected.schema.names == ["id", "name", "amount", "dt"]
    by_hand = expected_by_hand(fs, root, ["id", "name", "amount"], table.valid_write_ids())
    assert as_counter(expected) == by_hand
    ids = sorted(expected["id"].to_pylist())
    deleted = {i for i in range(30) if i % 5 == 0} | {7, 101}
    assert ids == sorted([i for i in range(30) if i not in deleted] + [102, 103, 104, 200])
    rows = {r["id"]: r for r in expected.to_pylist()}
    assert rows[1]["name"] == "updated" and rows[1]["amount"] == Decimal("9.99")
    assert rows[200]["name"] == "multi!"
    assert rows[2]["dt"] is None and rows[1]["dt"] == "a:b/c"
    assert 8 in rows and 9 in rows  # deleted only by the aborted and the open write

    # the open write, once committed, becomes visible; an older snapshot still sees the past
    before = table.valid_write_ids()
    table.commit(8)
    assert table.valid_write_ids() == "default.t:8:9223372036854775807::6"
    now = table.expected_rows()
    assert 400 in now["id"].to_pylist() and 9 not in now["id"].to_pylist()
    assert as_counter(table.expected_rows(before)) == by_hand
    assert as_counter(now) == expected_by_hand(
        fs, root, ["id", "name", "amount"], table.valid_write_ids()
    )


def test_folder_layout_of_scenario(tmp_path: Path) -> None:
    table = build_scenario(str(tmp_path / "t"))
    folders = acid_folders(table.fs, table.path)
    part = "dt=2024-01-01"
    for name in [
        "delta_0000001_0000001_0000",
        "delta_0000002_0000002_0000",
        "delete_delta_0000003_0000003_0000",
        "delete_delta_0000004_0000004_0000",
        "delta_0000004_0000004_0000",
        "delta_0000005_0000005_0000",
        "delete_delta_0000005_0000005_0002",
        "delta_0000005_0000005_0002",
        "delta_0000006_0000006_0000",
        "delete_delta_0000007_0000007_0000",
        "delta_0000008_0000008_0000",
        "delete_delta_0000008_0000008_0001",
    ]:
        assert f"{part}/{name}" in folders
    assert "dt=a%3Ab%2Fc/delta_0000001_0000001_0000" in folders
    assert "dt=a%3Ab%2Fc/delete_delta_0000005_0000005_0001" in folders  # id 7 lives there
    assert "dt=__HIVE_DEFAULT_PARTITION__/delta_0000001_0000001_0000" in folders
    assert "dt=__HIVE_DEFAULT_PARTITION__/delete_delta_0000006_0000006_0001" in folders  # id 8
    # statement ids are in the bucket field of the rows each statement inserted
    events, _ = read_orc(table.fs, f"{table.path}/{part}/delta_0000005_0000005_0002/bucket_00001")
    assert {decode_bucket(b)[1] for b in events["bucket"].to_pylist()} == {2}
    # bucketed by id: every row sits in Hive's bucket for its id
    for path in table.fs.find(table.path):
        if "/delta_" in path and path.rsplit("/", 1)[1].startswith("bucket_"):
            events, _ = read_orc(table.fs, path)
            bucket_id = int(path[-5:])
            for row in events["row"].to_pylist():
                assert (hive_bucket_hash(row["id"], "bigint") & 0x7FFFFFFF) % 3 == bucket_id


def test_statement_results_and_identities(memory_root: str) -> None:
    table = AcidTableWriter(memory_root, {"v": "int"}, buckets=2)
    result = table.insert({"v": [10, 11, 12, 13, 14]})
    assert result.write_id == 1 and result.statement_id == 0
    # without a bucketing column rows are cut into one contiguous chunk per bucket
    assert result.inserted_identities == [
        RowIdentity(1, 536870912, 0),
        RowIdentity(1, 536870912, 1),
        RowIdentity(1, 536936448, 0),
        RowIdentity(1, 536936448, 1),
        RowIdentity(1, 536936448, 2),
    ]
    deleted = table.delete([RowIdentity(1, 536936448, 1), (1, 536870912, 0), (9, 9, 9)])
    assert deleted.deleted_identities == [
        RowIdentity(1, 536870912, 0),
        RowIdentity(1, 536936448, 1),
    ]
    updated = table.update(table.expected_identities().slice(0, 1), {"v": 99})
    assert updated.deleted_identities == [RowIdentity(1, 536870912, 1)]
    assert updated.inserted_identities == [RowIdentity(3, 536870912, 0)]
    assert sorted(table.expected_rows()["v"].to_pylist()) == [12, 14, 99]
    with_ids = table.expected_rows(with_row_id=True)
    assert with_ids.column("row__id").to_pylist()[0] == {
        "writeid": 1,
        "bucketid": 536936448,
        "rowid": 0,
    }
    assert table.valid_write_ids() == "default.t:3:9223372036854775807::"
    with pytest.raises(ValueError):
        table.update(None, {"nope": 1})
    assert table.write_state(4) is WriteState.ABORTED  # the failed statement aborted its write
    snapshot = WriteIdSnapshot.parse(table.valid_write_ids())
    assert str(snapshot) == table.valid_write_ids() and snapshot.aborted_write_ids == (4,)


def test_original_files_and_update_of_original_rows(tmp_path: Path) -> None:
    table = AcidTableWriter(str(tmp_path / "t"), [("id", "int"), ("data", "string")], buckets=3)
    table.add_original_files(pa.table({"id": [0, 1, 3, 4], "data": ["a"] * 4}), 0)
    table.add_original_files({"id": list(range(9, 21)), "data": ["c"] * 12}, 2, copies=2)
    table.delete([(0, 536870912, 2), (0, encode_bucket_v1(2), 5)])  # ids 3 and 14
    table.update(pc.field("id") == 20, {"data": "z"})
    files = table.list_files()
    assert {"000000_0", "000002_0", "000002_0_copy_1", "000002_0_copy_2"} <= set(files)
    plain, metadata = read_orc(table.fs, str(tmp_path / "t" / "000002_0_copy_1"))
    assert plain.schema.names == ["id", "data"] and metadata == {}
    assert plain["id"].to_pylist() == [13, 14, 15, 16]
    expected = table.expected_rows()
    assert sorted(expected["id"].to_pylist()) == [0, 1, 4] + [i for i in range(9, 21) if i != 14]
    assert as_counter(expected) == expected_by_hand(
        table.fs, table.root, ["id", "data"], table.valid_write_ids()
    )
    identities = {r["id"]: r["row__id"] for r in table.expected_rows(with_row_id=True).to_pylist()}
    assert identities[15] == {"writeid": 0, "bucketid": encode_bucket_v1(2), "rowid": 6}
    assert identities[20]["writeid"] == 2  # updated: a new identity


def test_compaction(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    table = build_scenario(root)
    data_columns = ["id", "name", "amount"]
    before = table.expected_rows()
    identities_before = as_counter(table.expected_identities())
    minor = [f.split(root + "/")[1] for f in table.compact_minor()]
    # per partition: from the first to the last delta of a valid write (6 aborted, 8 open)
    assert sorted(minor) == [
        "dt=2024-01-01/delete_delta_0000001_0000007_v0000009",
        "dt=2024-01-01/delta_0000001_0000007_v0000009",
        "dt=__HIVE_DEFAULT_PARTITION__/delete_delta_0000001_0000004_v0000011",
        "dt=__HIVE_DEFAULT_PARTITION__/delta_0000001_0000004_v0000011",
        "dt=a%3Ab%2Fc/delete_delta_0000001_0000005_v0000010",
        "dt=a%3Ab%2Fc/delta_0000001_0000005_v0000010",
    ]
    assert as_counter(table.expected_rows()) == as_counter(before)
    assert expected_by_hand(table.fs, root, data_columns, table.valid_write_ids()) == as_counter(
        before
    )
    table.insert([{"id": 500, "name": "after", "amount": 5, "dt": "2024-01-01"}])  # write 9
    major = table.compact_major()
    # write 8 is still open: compaction stops below it (write 9 stays in its delta)
    assert sorted(f.split(root + "/")[1] for f in major) == [
        "dt=2024-01-01/base_0000007_v0000013",
        "dt=__HIVE_DEFAULT_PARTITION__/base_0000004_v0000015",
        "dt=a%3Ab%2Fc/base_0000005_v0000014",
    ]
    for folder in major:
        assert table.fs.cat_file(f"{folder}/_orc_acid_version") == b"2"
        assert table.fs.exists(f"{folder}/_metadata_acid")
    check_acid_files(table.fs, table)
    # the old folders are still there, and readers that skip them get the same rows
    assert "dt=2024-01-01/delta_0000001_0000001_0000" in acid_folders(table.fs, root)
    after = table.expected_rows()
    assert as_counter(after) == as_counter(before) + Counter(
        {(500, "after", Decimal("5.00"), "2024-01-01"): 1}
    )
    snapshot = table.valid_write_ids()
    assert expected_by_hand(table.fs, root, data_columns, snapshot) == as_counter(after)
    assert expected_by_hand(
        table.fs, root, data_columns, snapshot, use_compacted=False
    ) == as_counter(after)
    # compaction keeps identities: the base holds exactly the live identities of writes <= 7
    base_ids: Counter = Counter()
    for folder in major:
        dt_value = unescape(folder.split("/dt=")[1].split("/")[0])
        for path in table.fs.find(folder):
            if path.rsplit("/", 1)[1].startswith("bucket_"):
                events, _ = read_orc(table.fs, path)
                assert set(events["operation"].to_pylist()) == {0}
                for e in events.to_pylist():
                    part = None if dt_value == HIVE_DEFAULT_PARTITION else dt_value
                    base_ids[(part, e["originalTransaction"], e["bucket"], e["rowId"])] += 1
    assert base_ids == identities_before


def test_insert_overwrite_and_snapshot_of_an_older_state(memory_root: str) -> None:
    table = AcidTableWriter(memory_root, [("k", "int")], partition_columns=["p"], buckets=2)
    table.insert([{"k": 1, "p": "a"}, {"k": 2, "p": "b"}])
    old = table.valid_write_ids()
    table.insert_overwrite([{"k": 3}], partition={"p": "a"})
    table.insert_overwrite([], partition="b")
    assert any(re.fullmatch(r"p=a/base_0000002/bucket_0000[01]", f) for f in table.list_files())
    assert "p=b/base_0000003/_orc_acid_version" in table.list_files()
    assert table.expected_rows().to_pylist() == [{"k": 3, "p": "a"}]
    assert sorted(table.expected_rows(old)["k"].to_pylist()) == [1, 2]
    assert as_counter(table.expected_rows()) == expected_by_hand(
        table.fs, memory_root, ["k"], table.valid_write_ids()
    )


def test_insert_only_table(tmp_path: Path) -> None:
    table = AcidTableWriter(
        str(tmp_path / "mm"),
        [("id", "int"), ("s", "string")],
        transactional_properties="insert_only",
        buckets=2,
    )
    table.insert({"id": [1, 2, 3], "s": ["a", "b", "c"]})
    txn = table.begin()
    txn.insert({"id": [4], "s": ["d"]})
    txn.abort()
    assert table.list_files() == [
        "delta_0000001_0000001_0000/000000_0",
        "delta_0000001_0000001_0000/000001_0",
        "delta_0000002_0000002_0000/000000_0",
    ]
    plain, metadata = read_orc(table.fs, str(tmp_path / "mm/delta_0000001_0000001_0000/000001_0"))
    assert plain.schema.names == ["id", "s"] and metadata == {}
    assert sorted(table.expected_rows()["id"].to_pylist()) == [1, 2, 3]
    assert table.valid_write_ids() == "default.mm:2:9223372036854775807::2"
    with pytest.raises(ValueError):
        table.delete(None)
    (base,) = table.compact_major()  # write 2 is aborted: base_1
    assert re.search(r"/base_0000001_v0000003$", base)
    assert {f for f in table.list_files() if f.startswith("base_")} == {
        "base_0000001_v0000003/000000_0",
        "base_0000001_v0000003/000001_0",
    }


ALL_TYPES = [
    ("b", "boolean"),
    ("t", "tinyint"),
    ("s", "smallint"),
    ("i", "int"),
    ("l", "bigint"),
    ("f", "float"),
    ("d", "double"),
    ("dec", "decimal(38,10)"),
    ("dec2", "decimal(5,2)"),
    ("str", "string"),
    ("vc", "varchar(3)"),
    ("ch", "char(4)"),
    ("dt", "date"),
    ("ts", "timestamp"),
    ("bin", "binary"),
    ("st", "struct<x:int,y:string,z:decimal(4,1)>"),
    ("arr", "array<date>"),
    ("m", "map<string,array<bigint>>"),
]


def all_types_rows() -> list[dict[str, Any]]:
    return [
        {
            "b": True,
            "t": -128,
            "s": 32767,
            "i": -(2**31),
            "l": 2**63 - 1,
            "f": 1.5,
            "d": -2.25,
            "dec": Decimal("1234567890123456789012345678.0123456789"),
            "dec2": Decimal("-123.45"),
            "str": "héllo",
            "vc": "abcdef",
            "ch": "ab",
            "dt": dt.date(1969, 12, 31),
            "ts": dt.datetime(1960, 2, 29, 23, 59, 59, 123456),
            "bin": b"\x00\xff",
            "st": {"x": 1, "y": "why", "z": Decimal("-3.5")},
            "arr": [dt.date(2024, 2, 29), None],
            "m": {"k": [1, 2], "e": []},
        },
        {name: None for name, _ in ALL_TYPES},
    ]


def test_all_hive_types_round_trip(tmp_path: Path) -> None:
    table = AcidTableWriter(str(tmp_path / "types"), ALL_TYPES, stripe_rows=1)
    table.insert(all_types_rows())
    path = tmp_path / "types" / "delta_0000001_0000001_0000" / "bucket_00000"
    with open(path, "rb") as f:  # pyorc wrote it (char/varchar): exact ORC types
        schema = str(pyorc.Reader(f).schema)
    assert "vc:varchar(3)" in schema and "ch:char(4)" in schema and "dec:decimal(38,10)" in schema
    events, _ = read_orc(table.fs, str(path))
    assert events.num_rows == 2 and po.ORCFile(str(path)).nstripes == 2
    stored = events["row"].to_pylist()
    expected = table.expected_rows().to_pylist()
    assert stored[0] == expected[0]
    assert expected[0]["vc"] == "abc" and expected[0]["ch"] == "ab  "  # as ORC stores them
    assert expected[0]["ts"] == dt.datetime(1960, 2, 29, 23, 59, 59, 123456)
    assert expected[0]["m"] == [("k", [1, 2]), ("e", [])]
    assert stored[1] == expected[1] == {name: None for name, _ in ALL_TYPES}


def test_both_engines_write_the_same_data(tmp_path: Path) -> None:
    columns = [c for c in ALL_TYPES if c[1] not in ("varchar(3)", "char(4)")]
    rows = [{k: v for k, v in r.items() if k not in ("vc", "ch")} for r in all_types_rows()]
    read = {}
    for engine in ["pyarrow", "pyorc"]:
        table = AcidTableWriter(str(tmp_path / engine), columns, orc_writer=engine, stripe_rows=1)
        table.insert(rows)
        table.delete(lambda r: r["b"] is None)
        read[engine] = [
            read_orc(table.fs, str(tmp_path / engine / folder / "bucket_00000"))
            for folder in ["delta_0000001_0000001_0000", "delete_delta_0000002_0000002_0000"]
        ]
    for (a, meta_a), (b, meta_b) in zip(read["pyarrow"], read["pyorc"], strict=True):
        assert a.equals(b) and meta_a == meta_b


def test_demo_table(tmp_path: Path) -> None:
    root = str(tmp_path / "demo")
    table = generate_demo_table(
        root, partitions=2, buckets=2, rows_per_bucket=500, insert_deltas=2, aborted_writes=1
    )
    folders = acid_folders(table.fs, root)
    assert "dt=2024-01-01/base_0000001" in folders
    assert "dt=2024-01-02/delta_0000003_0000003_0000" in folders
    assert "dt=2024-01-01/delete_delta_0000005_0000005_0000" in folders  # deletes
    assert "dt=2024-01-01/delete_delta_0000006_0000006_0000" in folders  # update: delete part
    assert "dt=2024-01-01/delta_0000006_0000006_0000" in folders  # update: insert part
    assert table.valid_write_ids() == "default.demo:6:9223372036854775807::4"
    check_acid_files(table.fs, table)
    expected = table.expected_rows()
    assert expected.schema.names == ["id", "category", "amount", "ts", "note", "dt"]
    assert expected.schema.field("amount").type == pa.decimal128(12, 2)
    assert 1900 < expected.num_rows < 2030  # 2000 + 2 * 2 * 20 inserted, about 5% deleted
    columns = ["id", "category", "amount", "ts", "note"]
    assert as_counter(expected) == expected_by_hand(
        table.fs, root, columns, table.valid_write_ids()
    )
    assert pc.sum(pc.equal(expected["note"], "updated")).as_py() > 10


def test_demo_table_with_original_files(memory_root: str) -> None:
    table = generate_demo_table(
        memory_root, partitions=1, buckets=2, rows_per_bucket=100, insert_deltas=1, updates=False
    )
    originals = generate_demo_table(
        memory_root + "_orig", partitions=1, buckets=2, rows_per_bucket=100, originals=True
    )
    try:
        assert any(f.endswith("base_0000001/bucket_00000") for f in table.list_files())
        files = originals.list_files()
        assert "dt=2024-01-01/000000_0" in files and "dt=2024-01-01/000001_0_copy_1" in files
        assert not any("base_" in f for f in files)
        columns = ["id", "category", "amount", "ts", "note"]
        assert as_counter(originals.expected_rows()) == expected_by_hand(
            originals.fs, originals.root, columns, originals.valid_write_ids()
        )
    finally:
        originals.fs.rm(originals.path, recursive=True)


def test_local_files_are_plain_files(tmp_path: Path) -> None:
    # the generator writes through fsspec; a local table is a normal folder tree
    table = AcidTableWriter(str(tmp_path / "t"), [("a", "int")])
    table.insert({"a": [1]})
    copy = tmp_path / "copy"
    shutil.copytree(tmp_path / "t", copy)
    events = po.ORCFile(str(copy / "delta_0000001_0000001_0000" / "bucket_00000")).read()
    assert events["row"].to_pylist() == [{"a": 1}]
