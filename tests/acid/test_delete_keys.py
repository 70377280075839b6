"""The delete-key set marks exactly the rows whose full key was deleted, whichever way it
matches: by scattering the positions of consecutive rowIds, or by ``is_in`` (other rows, and
pyarrow releases without ``scatter``). A plain Python set of keys is the reference."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_provider_acid.acid.rows import DeleteBatch, encode_bucket_v1
from airflow_provider_acid.engine import delete_keys
from airflow_provider_acid.engine.delete_keys import DeleteKeySet

B0, B1 = encode_bucket_v1(0), encode_bucket_v1(1)


def batch(keys: list[tuple[int, int, int]]) -> DeleteBatch:
    o, b, r = zip(*keys, strict=True) if keys else ((), (), ())
    return DeleteBatch(
        None, pa.array(o, pa.int64()), pa.array(b, pa.int32()), pa.array(r, pa.int64())
    )


def arrays(rows: list[tuple[int, int, int]]) -> tuple[pa.Array, pa.Array, pa.Array]:
    o, b, r = zip(*rows, strict=True)
    return pa.array(o, pa.int64()), pa.array(b, pa.int32()), pa.array(r, pa.int64())


def check(deletes: list[list[tuple[int, int, int]]], rows: list[tuple[int, int, int]]) -> None:
    keys = DeleteKeySet.from_batches([batch(b) for b in deletes])
    deleted = {k for b in deletes for k in b}
    assert len(keys) == len(deleted)
    mask = keys.match(*arrays(rows))
    expected = [row in deleted for row in rows]
    if mask is None:
        assert not any(expected)
    else:
        assert mask.to_pylist() == expected
        assert mask.null_count == 0


@pytest.fixture(params=[True, False], ids=["scatter", "is_in"])
def way(request, monkeypatch):
    if request.param and not delete_keys.SCATTER:
        pytest.skip("this pyarrow has no scatter kernel")
    monkeypatch.setattr(delete_keys, "SCATTER", request.param)
    return request.param


def test_consecutive_row_ids_of_a_file_slice(way):
    # a base file's batch: write 1, rowIds 1000..1999; deletes from three delete deltas
    # overlapping it, before it and after it, one repeated
    deletes = [
        [(1, B0, r) for r in (3, 999, 1000, 1500, 1999)],
        [(1, B0, r) for r in (1000, 1001, 2000, 5000)],
        [(1, B1, 1002), (2, B0, 1003)],
    ]
    check(deletes, [(1, B0, r) for r in range(1000, 2000)])


def test_rows_of_several_writes_and_gaps(way):
    deletes = [[(1, B0, 5), (1, B0, 7), (2, B0, 0), (2, B0, 2)]]
    rows = [(1, B0, r) for r in (4, 5, 7, 9)] + [(2, B0, r) for r in range(4)]
    check(deletes, rows)


def test_one_row(way):
    check([[(1, B0, 5)]], [(1, B0, 5)])
    check([[(1, B0, 5)]], [(1, B0, 6)])


@settings(max_examples=150, deadline=None)
@given(
    start=st.integers(0, 50),
    length=st.integers(1, 60),
    shuffle=st.randoms(use_true_random=False),
    disorder=st.sampled_from(["consecutive", "gaps", "shuffled", "repeated"]),
    deletes=st.lists(
        st.lists(
            st.tuples(st.sampled_from([1, 2]), st.sampled_from([B0, B1]), st.integers(0, 120)),
            max_size=30,
        ),
        min_size=1,
        max_size=4,
    ),
    use_scatter=st.booleans(),
)
def test_matches_a_set_of_keys(start, length, shuffle, disorder, deletes, use_scatter):
    row_ids = list(range(start, start + length))
    if disorder == "gaps":
        row_ids = row_ids[::2]
    elif disorder == "shuffled":
        shuffle.shuffle(row_ids)
    elif disorder == "repeated":
        row_ids = sorted(row_ids + row_ids[: length // 2])
    rows = [(1, B0, r) for r in row_ids]
    previous = delete_keys.SCATTER
    delete_keys.SCATTER = use_scatter and previous
    try:
        check(deletes, rows)
    finally:
        delete_keys.SCATTER = previous
