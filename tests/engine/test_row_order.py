"""``in_order`` against Python's own comparison of rows: leading keys of one value, a first
key rising strictly, ties decided by later keys, and nulls."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_provider_acid.engine.row_order import in_order

_VALUES = st.one_of(st.just(7), st.integers(-3, 3), st.none())


@st.composite
def _tables(draw: st.DrawFn) -> pa.Table:
    n = draw(st.integers(0, 12))
    columns = {}
    for name in ("a", "b", "c"):
        shape = draw(st.sampled_from(["one value", "rising", "rising with ties", "any"]))
        if shape == "one value":
            values = [draw(st.integers(-3, 3))] * n
        elif shape == "rising with ties":
            values = sorted(draw(st.lists(st.integers(-2, 2), min_size=n, max_size=n)))
        elif shape == "rising":
            values = sorted(
                draw(st.lists(st.integers(-50, 50), min_size=n, max_size=n, unique=True))
            )
        else:
            values = draw(st.lists(_VALUES, min_size=n, max_size=n))
        columns[name] = pa.array(values, pa.int64())
    return pa.table(columns)


@settings(max_examples=400, deadline=None)
@given(_tables(), st.sampled_from([["a"], ["a", "b"], ["b", "a", "c"], ["a", "b", "c"]]))
def test_in_order_is_python_order(table: pa.Table, keys: list[str]) -> None:
    rows = list(zip(*(table[k].to_pylist() for k in keys), strict=True))
    if table.num_rows < 2:
        expected = True
    elif any(v is None for row in rows for v in row):
        expected = False
    else:
        expected = all(x <= y for x, y in zip(rows, rows[1:], strict=False))
    assert in_order(table, keys) is expected


def test_leading_keys_of_one_value_leave_the_order_to_the_next() -> None:
    table = pa.table({"a": [1, 1, 1], "b": [0, 0, 0], "c": [3, 2, 1]})
    assert not in_order(table, ["a", "b", "c"])
    assert in_order(table, ["a", "b"])
    assert in_order(pa.table({"a": [5, 5], "b": [1, 2]}), ["a", "b"])
    # a first key rising with ties decides nothing alone
    assert not in_order(pa.table({"a": [1, 1, 2], "b": [2, 1, 0]}), ["a", "b"])
