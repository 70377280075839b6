"""The change feed's invariant on random simulator histories: for every pair of write ids
A < B, the snapshot at A plus the feed (A, B] is the snapshot at B, as multisets of rows with
their identity.

Histories of at least 10 writes mix inserts, deletes, updates, multi-statement writes, aborted
and open writes, streaming deltas (several writes, some aborted, in one delta), original files,
and Hive's major and minor compaction. Where a major compaction falls inside (A, B], the feed
must refuse without an identity snapshot at A (naming the base), and with one, computed by the
identity diff, satisfy the invariant too. The expected snapshots come from the simulator's
logical history, not from the reader.
"""

from __future__ import annotations

import collections
import random
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from airflow_provider_acid.engine.change_rows import (
    CHANGE_TYPES,
    IDENTITY,
    CompactedRangeError,
)
from airflow_provider_acid.engine.change_runs import compute_changes
from airflow_provider_acid.engine.compaction import CompactionOptions, compact_table
from airflow_provider_acid.testing.streaming import stream_batch
from airflow_provider_acid.testing.table_writer import AcidTableWriter
from airflow_provider_acid.testing.write_history import WriteIdSnapshot, WriteState

COLUMNS = [("id", "bigint"), ("v", "string"), ("n", "int")]
PARTS = ["a", "b"]


class History:
    """A random history on a simulated table, the write-id list kept after each write."""

    def __init__(self, root: str, seed: int) -> None:
        self.random = random.Random(seed)
        self.table = AcidTableWriter(
            root,
            COLUMNS,
            partition_columns=[("p", "string")],
            buckets=2,
            bucket_by="id",
            stripe_rows=7,
        )
        self.next_id = 0
        self.kinds: list[str] = []

    def rows(self, count: int) -> list[dict]:
        out = []
        for _ in range(count):
            out.append(
                {"id": self.next_id, "v": f"v{self.next_id}", "n": self.random.randint(0, 9)}
            )
            self.next_id += 1
        return out

    def live_ids(self, part: str) -> list[int]:
        rows = self.table.expected_rows()
        return [r["id"] for r in rows.to_pylist() if r["p"] == part]

    def some(self, part: str, most: int) -> set[int]:
        ids = self.live_ids(part)
        return set(self.random.sample(ids, min(len(ids), self.random.randint(1, most))))

    def step(self) -> None:
        r, t = self.random, self.table
        part = r.choice(PARTS)
        kind = r.choice(
            [
                "insert",
                "insert",
                "delete",
                "update",
                "update",
                "statements",
                "aborted",
                "open",
                "stream",
                "minor",
                "major",
            ]
        )
        if kind in ("delete", "update") and not self.live_ids(part):
            kind = "insert"
        if kind == "insert":
            t.insert(self.rows(r.randint(1, 6)), partition=part)
        elif kind == "delete":
            chosen = self.some(part, 3)
            t.delete(lambda row: row["id"] in chosen, partition=part)
        elif kind == "update":
            chosen = self.some(part, 3)
            t.update(lambda row: row["id"] in chosen, {"v": f"u{self.next_id}"}, partition=part)
            self.next_id += 1
        elif kind == "statements":
            tx = t.begin()
            new = self.rows(r.randint(1, 4))
            tx.insert(new, partition=part)
            own = {new[0]["id"]}
            tx.update(lambda row: row["id"] in own, {"v": "again"}, partition=part)
            if r.random() < 0.5:
                tx.delete(lambda row: row["id"] in own, partition=part)
            elif self.live_ids(part):
                others = self.some(part, 2)
                tx.delete(lambda row: row["id"] in others, partition=part)
            tx.commit()
        elif kind == "aborted":
            tx = t.begin()
            tx.insert(self.rows(r.randint(1, 3)), partition=part)
            tx.abort()
        elif kind == "open":
            tx = t.begin()
            tx.insert(self.rows(r.randint(1, 3)), partition=part)  # left open for good
        elif kind == "stream":
            stream_batch(
                t,
                [(self.rows(r.randint(1, 4)), r.random() < 0.7) for _ in range(r.randint(2, 3))],
                partition=part,
            )
        elif kind == "minor":
            t.compact_minor()
        elif kind == "major":
            # one partition (if it has been written yet: an unknown one is the simulator's
            # KeyError), or all of them
            one = r.random() < 0.5
            written = part in [spec["p"] for spec in t.partitions()]
            t.compact_major(partition=part if one and written else None)
        self.kinds.append(kind)

    @property
    def high_watermark(self) -> int:
        return self.table.write_id_snapshot().high_watermark

    def at(self, write_id: int) -> str:
        """The write-id list at ``write_id``, with the writes' states as they are now."""
        snapshot = self.table.write_id_snapshot()
        return str(
            WriteIdSnapshot(
                snapshot.table_name,
                write_id,
                tuple(w for w in snapshot.open_write_ids if w <= write_id),
                tuple(w for w in snapshot.aborted_write_ids if w <= write_id),
            )
        )


def _row(record: dict, names: list[str]) -> tuple:
    return tuple(record[n] for n in names)


def _expected(history: History, write_id: int) -> collections.Counter:
    rows = history.table.expected_rows(history.at(write_id), with_row_id=True)
    names = [c for c, _ in COLUMNS] + ["p"]
    return collections.Counter(
        _row(r, names) + (r["row__id"]["writeid"], r["row__id"]["bucketid"], r["row__id"]["rowid"])
        for r in rows.to_pylist()
    )


def _feed_rows(out: str, feed) -> list[dict]:
    import pyarrow.parquet as pq

    rows = []
    for path in feed.result.file_paths():
        rows += pq.read_table(path).to_pylist()
    return rows


def _apply(at_a: collections.Counter, changes: list[dict]) -> collections.Counter:
    names = [c for c, _ in COLUMNS] + ["p"]
    state = collections.Counter(at_a)
    for change in sorted(changes, key=lambda c: c["_change_ordinal"]):
        row = _row(change, names) + (
            change["_acid_original_write_id"],
            change["_acid_bucket"],
            change["_acid_row_id"],
        )
        if change["_change_type"] in ("insert", "update_postimage"):
            state[row] += 1
        else:
            assert state[row] > 0, f"the feed removes a row the table does not hold: {change}"
            state[row] -= 1
    return +state


def _apply_by_identity(at_a: collections.Counter, changes: list[dict]) -> collections.Counter:
    """A feed without delete values applied as a snapshot with identity columns applies it:
    a delete removes the row of its identity, whatever its other columns hold."""
    names = [c for c, _ in COLUMNS] + ["p"]
    state = {row[-3:]: row for row in at_a.elements()}
    assert len(state) == sum(at_a.values()), "identities are unique"
    for change in sorted(changes, key=lambda c: c["_change_ordinal"]):
        identity = tuple(change[c] for c in IDENTITY)
        if change["_change_type"] == "insert":
            assert identity not in state
            state[identity] = _row(change, names) + identity
        else:
            assert change["_change_type"] == "delete", change  # no key: no pairs
            held = state.pop(identity, None)
            assert held is not None, f"deletes a row not held: {change}"
            given = _row(change, names)
            # the partition's value always, the others null or the row's own
            assert given[-1] == held[len(names) - 1], (change, held)
            assert all(
                v is None or v == h for v, h in zip(given, held[: len(given)], strict=True)
            ), (change, held)
    return collections.Counter(state.values())


def _check_history(seed: int, workdir: Path, *, writes: int = 10) -> collections.Counter:
    history = History(str(workdir / "t"), seed)
    identity = str(workdir / "identity")  # the provider's snapshots with identity, as it goes

    def snapshot_new_writes(done: int) -> int:
        for w in range(done + 1, history.high_watermark + 1):
            compact_table(
                history.table.root,
                identity,
                write_ids=history.at(w),
                options=CompactionOptions(include_identity=True),
            )
        return history.high_watermark

    seen: collections.Counter = collections.Counter()

    def check_feeds_to(b: int) -> None:
        """Every feed (a, b], computed when b is the newest write (as a scheduled feed is)."""
        at_b = _expected(history, b)
        for a in range(0, b):
            out = str(workdir / f"feed_{a}_{b}")
            key = ("id",) if (a + b) % 2 else ()
            net = (a * b) % 3 == 0
            arguments = dict(
                from_write_id=a,
                to_write_id=b,
                write_ids=history.table.valid_write_ids(),
                key=key,
                net=net,
            )
            try:
                feed = compute_changes(history.table.root, out, **arguments)
                seen["events"] += 1
            except CompactedRangeError as exc:
                assert "base_" in str(exc) and "--identity-snapshot" in str(exc)
                feed = compute_changes(
                    history.table.root, out, identity_snapshot=identity, **arguments
                )
                assert any("diffing row identities" in w for w in feed.warnings)
                seen["identity_diff"] += 1
            changes = _feed_rows(out, feed)
            counts = collections.Counter(c["_change_type"] for c in changes)
            assert feed.to_dict()["counts"] == {t: counts.get(t, 0) for t in CHANGE_TYPES}
            for c in changes:  # aborted and open writes never appear
                if c["_commit_write_id"] is not None:
                    assert a < c["_commit_write_id"] <= b
                    state = history.table.write_state(c["_commit_write_id"])
                    assert state is WriteState.COMMITTED
            assert _apply(_expected(history, a), changes) == at_b, (seed, a, b, history.kinds)
            if key:  # a key pairs updates on the deleted rows' values
                continue
            # the same range without the deletes' values: only the range's deltas read
            out = str(workdir / f"identity_feed_{a}_{b}")
            try:
                lean = compute_changes(
                    history.table.root, out, **{**arguments, "delete_values": False}
                )
            except CompactedRangeError:
                continue
            changes = _feed_rows(out, lean)
            at_a = _expected(history, a)
            assert _apply_by_identity(at_a, changes) == at_b, (seed, a, b, history.kinds)
            seen["identity_deletes"] += 1

    history.table.add_original_files(history.rows(3), bucket=0, partition="a")
    done = snapshot_new_writes(-1)
    while history.high_watermark < writes:
        history.step()
        for b in range(done + 1, history.high_watermark + 1):
            check_feeds_to(b)
        done = snapshot_new_writes(done)
    seen.update(history.kinds)
    return seen


@settings(
    max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(seed=st.integers(0, 2**31))
@example(seed=203)  # a major compaction of a partition not written yet
def test_every_pair_of_random_histories(seed: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        _check_history(seed, Path(tmp))


def test_fixed_histories_cover_every_feature(tmp_path: Path) -> None:
    seen: collections.Counter = collections.Counter()
    for seed in (3, 11, 42):
        seen += _check_history(seed, tmp_path / str(seed), writes=12)
    features = ("insert", "delete", "update", "statements", "aborted", "open", "stream")
    more = ("minor", "major", "events", "identity_diff", "identity_deletes")
    assert all(seen[f] for f in (*features, *more)), seen
