"""The delete keys of one bucket, and which rows of a batch they delete.

A delete delta names the rows it deletes by their identity ``(originalTransaction, bucket,
rowId)``; the anti-join of compaction asks, batch by batch, which rows of the bucket's data
files carry one of those identities.

The keys are kept per ``(originalTransaction, bucket)`` as a sorted array of unique rowIds. A
batch's rows of one ``(originalTransaction, bucket)`` nearly always carry consecutive rowIds
(Hive numbers the rows of a write's bucket 0, 1, 2, ... in each file): then the deleted rows'
positions are the deleted rowIds minus the first one, and the mask is made by scattering them
(``pyarrow.compute.inverse_permutation``: the positions no deleted rowId lands on are null), with
no hashing; other batches, and pyarrow releases without that kernel, are matched with ``is_in``.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Iterable, Mapping

import pyarrow as pa
import pyarrow.compute as pc

from ..acid.rows import DeleteBatch

_MAX_RUNS = 64


def _scatter_works() -> bool:
    """Whether this pyarrow has the ``inverse_permutation`` kernel with its options (recent
    releases): it scatters positions twice as fast as ``scatter`` of a constant array."""
    try:
        mask = pc.inverse_permutation(pa.array([1], pa.int64()), max_index=2)
    except (AttributeError, TypeError, pa.ArrowException):
        return False
    return mask.to_pylist() == [None, 0, None]


#: Whether masks of consecutive rowIds are made by scattering (else by ``is_in``).
SCATTER = _scatter_works()


def _runs(original: pa.Array, bucket: pa.Array) -> list[tuple[int, int]] | None:
    """``(start, end)`` of runs of equal (originalTransaction, bucket); None if too many."""
    n = len(original)
    if n == 0:
        return []
    o, b = pc.min_max(original), pc.min_max(bucket)
    if o["min"] == o["max"] and b["min"] == b["max"]:
        return [(0, n)]
    changed = pc.or_(
        pc.not_equal(original.slice(1), original.slice(0, n - 1)),
        pc.not_equal(bucket.slice(1), bucket.slice(0, n - 1)),
    )
    starts = pc.indices_nonzero(changed)
    if len(starts) >= _MAX_RUNS:
        return None
    bounds = [0, *(i + 1 for i in starts.to_pylist()), n]
    return list(zip(bounds[:-1], bounds[1:], strict=True))


class DeleteKeySet:
    """The delete keys of one bucket: per ``(originalTransaction, bucket)`` a sorted array of
    unique rowIds (int64), searched by binary search then hashed only over the overlap."""

    def __init__(self, groups: Mapping[tuple[int, int], pa.Array]) -> None:
        self._groups = dict(groups)
        self._views = {k: _int64_view(v) for k, v in self._groups.items()}

    @classmethod
    def from_batches(cls, batches: Iterable[DeleteBatch]) -> DeleteKeySet:
        parts: dict[tuple[int, int], list[pa.Array]] = defaultdict(list)
        for batch in batches:
            original, bucket, row_id = batch.original_transaction, batch.bucket, batch.row_id
            runs = _runs(original, bucket)
            if runs is None:  # unsorted events: order them first
                order = pc.sort_indices(
                    pa.table({"o": original, "b": bucket}),
                    sort_keys=[("o", "ascending"), ("b", "ascending")],
                )
                original, bucket, row_id = (pc.take(a, order) for a in (original, bucket, row_id))
                runs = _slow_runs(original, bucket)
            for start, end in runs:
                key = (original[start].as_py(), bucket[start].as_py())
                parts[key].append(row_id.slice(start, end - start))
        groups = {}
        for key, arrays in parts.items():
            groups[key] = _sorted_unique(
                arrays[0] if len(arrays) == 1 else pa.concat_arrays(arrays)
            )
        return cls(groups)

    def __len__(self) -> int:
        return sum(len(v) for v in self._groups.values())

    @property
    def nbytes(self) -> int:
        return sum(v.nbytes for v in self._groups.values())

    def may_hold(
        self, original: tuple[int, int], bucket: tuple[int, int], row_id: tuple[int, int]
    ) -> bool:
        """Whether a key lies within the given bounds (each a minimum and maximum, inclusive):
        False means no row whose identity lies within them is deleted.

        :param original: the bounds of ``originalTransaction``.
        :param bucket: the bounds of ``bucket``.
        :param row_id: the bounds of ``rowId``.
        """
        for (key_original, key_bucket), view in self._views.items():
            if original[0] <= key_original <= original[1] and bucket[0] <= key_bucket <= bucket[1]:
                if bisect.bisect_left(view, row_id[0]) < bisect.bisect_right(view, row_id[1]):
                    return True
        return False

    def match(self, original: pa.Array, bucket: pa.Array, row_id: pa.Array) -> pa.Array | None:
        """A mask of the rows whose key is deleted; None when no row can be."""
        if not self._groups or len(row_id) == 0:
            return None
        runs = _runs(original, bucket)
        if runs is not None:
            return self._match_runs(original, bucket, row_id, runs)
        # many (originalTransaction, bucket) runs: match in key order, then restore the order
        order = pc.sort_indices(
            pa.table({"o": original, "b": bucket}),
            sort_keys=[("o", "ascending"), ("b", "ascending")],
        )
        original, bucket, row_id = (pc.take(a, order) for a in (original, bucket, row_id))
        mask = self._match_runs(original, bucket, row_id, _slow_runs(original, bucket))
        return None if mask is None else pc.take(mask, pc.sort_indices(order))

    def _match_runs(
        self,
        original: pa.Array,
        bucket: pa.Array,
        row_id: pa.Array,
        runs: list[tuple[int, int]],
    ) -> pa.Array | None:
        masks: list[pa.Array] = []
        hit = False
        for start, end in runs:
            key = (original[start].as_py(), bucket[start].as_py())
            mask = self._member(key, row_id.slice(start, end - start))
            hit = hit or mask is not None
            masks.append(mask if mask is not None else pa.repeat(pa.scalar(False), end - start))
        if not hit:
            return None
        return masks[0] if len(masks) == 1 else pa.concat_arrays(masks)

    def _member(self, key: tuple[int, int], row_ids: pa.Array) -> pa.Array | None:
        ids = self._groups.get(key)
        if ids is None:
            return None
        bounds = pc.min_max(row_ids)
        low_id, high_id = bounds["min"].as_py(), bounds["max"].as_py()
        view = self._views[key]
        low = bisect.bisect_left(view, low_id)
        high = bisect.bisect_right(view, high_id)
        if low >= high:
            return None
        window = ids.slice(low, high - low)
        if SCATTER and _consecutive(row_ids, low_id, high_id):
            # row i carries rowId low_id + i: the deleted rows are at (deleted rowId - low_id)
            positions = pc.subtract(window, pa.scalar(low_id, pa.int64()))
            hits = pc.inverse_permutation(positions, max_index=len(row_ids) - 1)
            return pc.is_valid(hits)  # the rows no deleted rowId was scattered to are null
        return pc.is_in(row_ids, value_set=window)


def _slow_runs(original: pa.Array, bucket: pa.Array) -> list[tuple[int, int]]:
    """Runs of sorted arrays without a limit on their number."""
    n = len(original)
    changed = pc.or_(
        pc.not_equal(original.slice(1), original.slice(0, n - 1)),
        pc.not_equal(bucket.slice(1), bucket.slice(0, n - 1)),
    )
    bounds = [0, *(i + 1 for i in pc.indices_nonzero(changed).to_pylist()), n]
    return list(zip(bounds[:-1], bounds[1:], strict=True))


def _consecutive(row_ids: pa.Array, low: int, high: int) -> bool:
    """Whether ``row_ids`` (null-free, with minimum ``low`` and maximum ``high``) is exactly
    ``low, low + 1, ..., high``: strictly increasing over a span of its own length."""
    n = len(row_ids)
    if high - low != n - 1:
        return False
    if n == 1:
        return True
    return pc.all(pc.greater(row_ids.slice(1), row_ids.slice(0, n - 1))).as_py()


def _sorted_unique(values: pa.Array) -> pa.Array:
    """``values`` (int64, null-free) sorted, each value once."""
    n = len(values)
    if n < 2:
        return values
    if not pc.all(pc.greater(values.slice(1), values.slice(0, n - 1))).as_py():
        values = pc.take(values, pc.array_sort_indices(values))
        repeated = pc.equal(values.slice(1), values.slice(0, n - 1))
        if pc.any(repeated).as_py():
            first = pa.array([True])
            values = pc.filter(values, pa.concat_arrays([first, pc.invert(repeated)]))
    return values


def _int64_view(array: pa.Array) -> memoryview:
    """The values of a null-free int64 array as a memoryview (what :mod:`bisect` searches)."""
    if array.null_count:
        raise ValueError("delete keys must not be null")
    values = memoryview(array.buffers()[1]).cast("q")
    return values[array.offset : array.offset + len(array)]


__all__ = ["DeleteKeySet"]
