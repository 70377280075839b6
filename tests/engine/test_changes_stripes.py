"""A delete feed passes over the base's stripes whose identity bounds hold no deleted row
(``event_changes`` with ``SliceReader.data_batches(may_pick=...)``): the same feed, fewer
stripes read."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from airflow_provider_acid.acid import data_file_open
from airflow_provider_acid.engine.change_runs import compute_changes
from airflow_provider_acid.testing.table_writer import AcidTableWriter


def _feed(table: AcidTableWriter, out: Path) -> tuple[pa.Table, dict]:
    feed = compute_changes(
        table.root, str(out), from_write_id=1, write_ids=table.valid_write_ids(), key=["id"]
    )
    rows = pa.concat_tables([pq.read_table(p) for p in feed.result.file_paths()])
    return rows.sort_by([("_change_ordinal", "ascending"), ("_acid_row_id", "ascending")]), dict(
        feed.counts
    )


@pytest.fixture
def stripe_reads(monkeypatch: pytest.MonkeyPatch) -> Counter:
    reads: Counter = Counter()
    real = data_file_open.OpenFile.stripe

    def counted(self, index, columns, timestamp_unit="us"):
        reads[self.data_file.folder.name if self.data_file.folder else ""] += 1
        return real(self, index, columns, timestamp_unit)

    monkeypatch.setattr(data_file_open.OpenFile, "stripe", counted)
    return reads


def test_clustered_deletes_read_only_the_base_stripes_holding_them(
    tmp_path, stripe_reads, monkeypatch
):
    table = AcidTableWriter(
        str(tmp_path / "t"), [("id", "bigint"), ("v", "string")], stripe_rows=10
    )
    table.insert_overwrite([{"id": i, "v": f"v{i}"} for i in range(100)])  # write 1: base_1
    table.insert([{"id": 100 + i, "v": "new"} for i in range(3)])  # write 2
    table.delete(lambda r: r["id"] in (12, 15))  # write 3: the base's second stripe
    table.update(lambda r: r["id"] == 57, {"v": "changed"})  # write 4: its sixth
    rows, counts = _feed(table, tmp_path / "feed")
    assert counts == {"insert": 3, "delete": 2, "update_preimage": 1, "update_postimage": 1}
    assert sorted(rows.filter(pc.equal(rows["_change_type"], "delete"))["id"].to_pylist()) == [
        12,
        15,
    ]
    # the base's 10 stripes: the identity and the values of 2 of them, nothing of the others
    assert stripe_reads["base_0000001"] == 4
    stripe_reads.clear()
    monkeypatch.setattr(
        data_file_open, "read_stripe_statistics", lambda handle, orc, columns=None: None
    )
    unfiltered, unfiltered_counts = _feed(table, tmp_path / "feed-unfiltered")
    assert stripe_reads["base_0000001"] == 12  # every stripe's identity, 2 stripes' values
    assert unfiltered_counts == counts
    assert unfiltered.equals(rows)


def test_clustered_deletes_of_a_big_stripe_read_only_their_rows(tmp_path, monkeypatch):
    prefixes = []
    real = data_file_open.OpenFile.stripe_prefix

    def counted(self, index, columns, rows, timestamp_unit="us"):
        prefixes.append((self.data_file.folder.name, index, tuple(columns), rows))
        return real(self, index, columns, rows, timestamp_unit)

    monkeypatch.setattr(data_file_open.OpenFile, "stripe_prefix", counted)
    table = AcidTableWriter(
        str(tmp_path / "t"), [("id", "bigint"), ("v", "string"), ("amount", "decimal(9,2)")],
        stripe_rows=100_000,
    )  # fmt: skip
    rows = [{"id": i, "v": f"v{i}", "amount": f"{i}.25"} for i in range(40_000)]
    table.insert_overwrite(rows)  # write 1: base_1, one stripe
    table.delete(lambda r: 1000 <= r["id"] < 1200 or r["id"] == 1500)  # write 2
    table.update(lambda r: r["id"] == 1300, {"v": "changed"})  # write 3
    feed, counts = _feed(table, tmp_path / "feed")
    assert counts == {"insert": 0, "delete": 201, "update_preimage": 1, "update_postimage": 1}
    # the base's first 1501 rows with their rowIds, not its identity columns nor the stripe
    assert prefixes == [("base_0000001", 0, ("rowId", "row"), 1501)]
    deleted = feed.filter(pc.equal(feed["_change_type"], "delete"))
    assert sorted(deleted["id"].to_pylist()) == [*range(1000, 1200), 1500]
    assert deleted.filter(pc.equal(deleted["id"], 1500))["amount"].to_pylist() == [
        pa.scalar(1500.25).cast(pa.decimal128(9, 2)).as_py()
    ]
    # the same feed read from whole stripes (no statistics: identity columns, then values)
    monkeypatch.setattr(
        data_file_open, "read_stripe_statistics", lambda handle, orc, columns=None: None
    )
    prefixes.clear()
    unfiltered, unfiltered_counts = _feed(table, tmp_path / "feed-unfiltered")
    assert prefixes == [("base_0000001", 0, ("row",), 1501)]  # found by identity, then read
    assert (unfiltered_counts, unfiltered.equals(feed)) == (counts, True)
