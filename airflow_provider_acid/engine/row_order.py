"""Rows in order: positions 0, 1, 2, ..., whether a table's rows are already in the order of
some keys (then a stable sort would leave them as they are, and is not run), and delete events
matched to their pre-images by the order of their identities (:mod:`.change_rows`)."""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc


def arange(n: int) -> pa.Array:
    """int64 ``0, 1, ..., n - 1``.

    :param n: how many values.
    """
    if n == 0:
        return pa.array([], pa.int64())
    ones = pa.repeat(pa.scalar(1, pa.int64()), n)
    return pc.subtract(pc.cumulative_sum(ones), pa.scalar(1, pa.int64()))


def in_order(table: pa.Table, keys: Sequence[str]) -> bool:
    """Whether the rows are already in ascending order of ``keys`` (False when one of them
    holds a null).

    :param table: the rows.
    :param keys: the columns the order is by, the first first.
    """
    n = table.num_rows
    if n < 2:
        return True
    if any(table[name].null_count for name in keys):
        return False
    keys = list(keys)
    while keys:  # leading keys of one value order nothing; a strictly rising one all
        column = table[keys[0]]
        bounds = pc.min_max(column)
        if bounds["min"] != bounds["max"]:
            if pc.all(pc.less(column.slice(0, n - 1), column.slice(1))).as_py():
                return True
            break
        keys.pop(0)
    if not keys:
        return True
    before: pa.Array | pa.ChunkedArray | None = None  # a row before the next by the keys
    same: pa.Array | pa.ChunkedArray | None = None  # a row equal to the next so far
    for name in keys:
        column = table[name]
        first, then = column.slice(0, n - 1), column.slice(1)
        less = pc.less(first, then)
        if same is not None:
            less = pc.and_(same, less)
        before = less if before is None else pc.or_(before, less)
        equal = pc.equal(first, then)
        same = equal if same is None else pc.and_(same, equal)
    assert before is not None and same is not None
    return bool(pc.all(pc.or_(before, same)).as_py())


def strictly_increasing(table: pa.Table, keys: Sequence[str]) -> bool:
    """Whether rows sorted by ``keys`` hold each combination of their values once.

    :param table: the rows, sorted by ``keys``.
    :param keys: the columns.
    """
    n = table.num_rows
    if n < 2:
        return True
    same = None
    for name in keys:
        column = table[name]
        equal = pc.equal(column.slice(1), column.slice(0, n - 1))
        same = equal if same is None else pc.and_(same, equal)
    return not pc.any(same).as_py()


def matched_in_order(
    preimages: pa.Table, deletes: pa.Table, identity: Sequence[str], position: str
) -> tuple[pa.Table, bool] | None:
    """The delete events with the position of their pre-image (column ``position``), when the
    two hold the same identities once each: both sorted by identity, then compared (a
    fraction of a join's cost), and whether the positions are 0, 1, 2, ... (the pre-images
    in the events' order); None otherwise (a join then pairs them).

    :param preimages: the deleted rows found, with their identity columns.
    :param deletes: the delete events, with their identity columns.
    :param identity: the identity columns' names.
    :param position: the name of the column of positions added to the events.
    """
    if preimages.num_rows != deletes.num_rows:
        return None
    order = [(c, "ascending") for c in identity]
    n = deletes.num_rows
    # each sorted only when not in order already (as read: a base's rows, Hive's delete
    # deltas), the stable sort's order either way
    found = None
    if not in_order(preimages, identity):
        found = pc.sort_indices(preimages.select(list(identity)), sort_keys=order)
    events = deletes
    if not in_order(deletes, identity):
        events = deletes.take(pc.sort_indices(deletes.select(list(identity)), sort_keys=order))
    for name in identity:
        found_rows = preimages[name] if found is None else pc.take(preimages[name], found)
        if not found_rows.equals(events[name]):
            return None
    if not strictly_increasing(events, identity):
        return None  # an identity deleted twice: the join says what matches
    positions = arange(n) if found is None else pc.cast(found, pa.int64())
    return events.append_column(position, positions), found is None


__all__ = ["arange", "in_order", "matched_in_order", "strictly_increasing"]
