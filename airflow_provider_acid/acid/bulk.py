"""Making many read-view objects at C speed: one pass of ``map`` per slot, not a Python loop.

Resolution makes a few objects per listed file. Where many are made alike (the partitions of
one template, :mod:`.alike_partitions` and :mod:`.shaped_partitions`), each kind is made in a
few passes: ``object.__new__`` over a ``repeat``, then each slot's setter mapped over the
objects and their values. Here are the passes' small tools, and the slices, chosen deltas and
partition read views made so.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import chain, cycle, islice, repeat
from operator import attrgetter, itemgetter
from typing import Any, TypeVar

from .listing import StoredFile
from .names import BaseDir
from .partitions import Partition
from .read_view import (
    DATA_FILE_SETTERS,
    SLICE_SETTERS,
    VIEW_SETTERS,
    BucketSlice,
    ChosenDelta,
    DataFile,
    ExcludedEntry,
    FileKind,
    PartitionReadView,
)

T = TypeVar("T")

#: Run an iterator to its end, keeping nothing (the passes' results are the slots they set).
consume: Callable[[Iterable[Any]], None] = deque(maxlen=0).extend

PATH_OF = attrgetter("path")
SIZE_OF = attrgetter("size")
NAME_OF = attrgetter("name")


def new_objects(cls: type[T], count: int) -> list[T]:
    """``count`` new, empty instances of ``cls`` (slots unset), made without ``__init__``.

    :param cls: the class.
    :param count: how many.
    """
    return list(map(object.__new__, repeat(cls, count)))  # type: ignore[arg-type]


def taker(order: tuple[int, ...]) -> Callable[[Sequence[T]], tuple[T, ...]]:
    """``items -> tuple(items[k] for k in order)``, at C speed where it can be.

    :param order: the positions to take, in the order to take them.
    """
    if len(order) > 1:
        return itemgetter(*order)
    if order:
        (only,) = order
        return lambda items: (items[only],)
    return lambda items: ()


def cut(items: list[Any], lengths: tuple[int, ...], times: int) -> Iterator[tuple[Any, ...]]:
    """``items`` cut into consecutive tuples of ``lengths``, ``times`` over.

    :param items: what to cut, ``sum(lengths) * times`` of them.
    :param lengths: the lengths of the tuples, cycled.
    :param times: how many times over.
    """
    if len(set(lengths)) == 1:  # all alike (one base file a slice, ...): zip cuts them
        if not lengths[0]:
            return repeat((), len(lengths) * times)
        return zip(*[iter(items)] * lengths[0], strict=True)
    consumed = iter(items)
    return map(tuple, map(islice, repeat(consumed), islice(cycle(lengths), len(lengths) * times)))


def lines(paths: Sequence[str]) -> str | None:
    """``paths`` joined by line breaks, when none of them holds one (else None): one string
    to compare instead of each path. Lists of paths, as many each, are equal when their lines
    are (and are not None), and so are a list of paths and the lines of as many pieces joined
    by line breaks, piece for path.

    :param paths: the paths.
    """
    text = "\n".join(paths)
    return text if text.count("\n") == len(paths) - 1 else None


def each_repeated(values: Iterable[Any], times: int) -> Iterator[Any]:
    """Each of ``values`` ``times`` over: a, a, b, b, ...

    :param values: the values.
    :param times: how many times each.
    """
    return chain.from_iterable(map(repeat, values, repeat(times)))


# -- the read view's objects, many at once ---------------------------------------------------


def filled(
    cls: type[T], count: int, setters: Sequence[Callable[[T, Any], None]], columns: Iterable
) -> list[T]:
    """``count`` new instances of ``cls``, each slot set from its column of values in turn.

    :param cls: the class.
    :param count: how many.
    :param setters: the slots' setters.
    :param columns: for each setter, the values of the objects made (iterables, ``count`` long
        or longer).
    """
    made = new_objects(cls, count)
    for setter, values in zip(setters, columns, strict=True):
        consume(map(setter, made, values))
    return made


def new_data_files(
    stored: Iterable[StoredFile],
    bucket_ids: Iterable[int],
    kinds: Iterable[FileKind],
    count: int | None = None,
) -> list[DataFile]:
    """A data file for each of ``stored``, with its bucket id and kind in turn.

    :param stored: the files (a list, or ``count`` of them at least).
    :param bucket_ids: each one's bucket id.
    :param kinds: each one's kind.
    :param count: how many, when ``stored`` is no list: it is then not copied into one (a
        pass over every file fewer).
    """
    if count is None:
        count = len(stored)  # type: ignore[arg-type]
    return filled(DataFile, count, DATA_FILE_SETTERS, (stored, bucket_ids, kinds))


def new_slices(
    partitions: Sequence[Partition],
    buckets: tuple[int, ...],
    groups: Sequence[Iterable[tuple[DataFile, ...]]],
) -> list[BucketSlice]:
    """The slices of ``partitions``, each with one slice per bucket of ``buckets``.

    :param partitions: the partitions, each once.
    :param buckets: the bucket id of each slice of a partition.
    :param groups: the original, base, delta and delete delta files of each slice, slice after
        slice of partition after partition.
    """
    per_partition = len(buckets)
    columns = (each_repeated(partitions, per_partition), cycle(buckets), *groups)
    return filled(BucketSlice, per_partition * len(partitions), SLICE_SETTERS, columns)


def new_views(
    partitions: Sequence[Partition],
    bases: Iterable[BaseDir | None],
    base_paths: Iterable[str | None],
    deltas: list[ChosenDelta],
    slices: list[BucketSlice],
    excluded: Iterable[tuple[ExcludedEntry, ...]],
) -> list[PartitionReadView]:
    """The read views of ``partitions``, as many chosen deltas and slices each.

    :param partitions: the partitions.
    :param bases: each one's base.
    :param base_paths: each one's base path.
    :param deltas: the chosen deltas of all, partition after partition, as many each.
    :param slices: the slices of all, partition after partition, as many each.
    :param excluded: each one's excluded entries.
    """
    count = len(partitions)
    deltas_of = cut(deltas, (len(deltas) // count,), count)
    slices_of = cut(slices, (len(slices) // count,), count)
    columns = (partitions, bases, base_paths, deltas_of, slices_of, excluded)
    return filled(PartitionReadView, count, VIEW_SETTERS, columns)
