"""Partitions' folders matched to a shape and a skeleton: one partition at a time, or many at once.

A partition's *shape* is which of its files lie in which of its folders (by position) and under
which names; the *skeleton* of its folders' names is the names joined by ``/`` with each digit as
``#``, which decides how they parse (:mod:`.shaped_partitions` makes the partitions of one shape,
skeleton and order of write ids from one template). Here are the shape, the skeleton, whether a
reader sees every write of a partition's folders, and :func:`matching`: which of many
partitions in a row match one template's shape, skeleton, order of write ids and statements,
found in a few C-level passes over all of them instead of a few dozen Python steps each (what
``ShapedPartitions.find`` does for one partition).
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import chain, compress, repeat
from itertools import count as count_from
from operator import add, eq, getitem, le, lt, ne, sub

from .bulk import filled, lines, taker
from .names import (
    BASE_DIR_SETTERS,
    DELTA_DIR_SETTERS,
    BaseDir,
    DeltaDir,
    DeltaKind,
    parse_acid_dir,
)
from .writeids import ValidTxnList, ValidWriteIdList


@dataclass(frozen=True, slots=True, eq=False)
class Shape:
    """A partition's files by folder: which folder (by position) and which name each file has.

    One object per shape (shapes are looked up by value once, then compared by identity)."""

    #: The paths -> each folder's first file's path.
    firsts: Callable[[Sequence[str]], tuple[str, ...]]
    #: The length of each folder's first file's name, with its ``/``.
    tails: tuple[int, ...]
    #: Each file's name in its folder.
    names: tuple[str, ...]
    #: Each folder's path (with ``/``), then ``separated`` -> the pieces of ``text``.
    pieces: Callable[[Sequence[str]], tuple[str, ...]]
    #: Each file's name, with the line break after it (the last one's without).
    separated: tuple[str, ...]
    #: By the length of a partition's folder: the slices of its folders' names out of paths.
    cuts: dict[int, tuple[slice, ...]]
    #: Each folder's first file (by position), and each file's folder.
    first_files: tuple[int, ...] = ()
    folder_of_file: tuple[int, ...] = ()

    @classmethod
    def of(cls, folder_of_file: tuple[int, ...], names: tuple[str, ...]) -> Shape:
        """The shape of files in these folders (by position, numbered in order of their first
        file) with these names.

        :param folder_of_file: each file's folder.
        :param names: each file's name.
        """
        firsts = [folder_of_file.index(k) for k in range(max(folder_of_file) + 1)]
        width = len(firsts)
        # each file's folder path, then its name (with its line break) after the folder paths
        pieces = chain.from_iterable((k, width + j) for j, k in enumerate(folder_of_file))
        return cls(
            firsts=taker(tuple(firsts)),
            tails=tuple(len(names[k]) + 1 for k in firsts),
            names=names,
            pieces=taker(tuple(pieces)),
            separated=(*(f"{name}\n" for name in names[:-1]), names[-1]),
            cuts={},
            first_files=tuple(firsts),
            folder_of_file=folder_of_file,
        )

    def text(self, folder_paths: tuple[str, ...]) -> str:
        """The paths of a partition of this shape whose folders' paths (with ``/``) are
        ``folder_paths``, joined by line breaks (what ``lines`` gives for its listing).

        :param folder_paths: each folder's path, with its ``/``.
        """
        return "".join(self.pieces(folder_paths + self.separated))

    def cuts_at(self, length: int) -> tuple[slice, ...]:
        """The slices of a partition's folders' names out of its files' paths, when its
        folder (with ``/``) is ``length`` long.

        :param length: the length of the partition's folder, with its ``/``.
        """
        cuts = self.cuts.get(length)
        if cuts is None:
            cuts = self.cuts[length] = tuple(slice(length, -t) for t in self.tails)
        return cuts

    def folders_of(self, paths: list[str], prefix: str) -> tuple[list[str], str] | None:
        """The folder names of a partition whose files' paths (all below ``prefix``, which
        ends with ``/``) are ``paths``, when it is shaped so, and the names joined by ``/``;
        else None."""
        if len(paths) != len(self.names):
            return None
        folders = list(map(getitem, self.firsts(paths), self.cuts_at(len(prefix))))
        joined = "/".join(folders)
        if joined.count("/") != len(folders) - 1 or len(set(folders)) != len(folders):
            return None  # a folder nested in another, or two folders of the shape one here
        folder_paths = tuple(map(add, repeat(prefix), map(add, folders, repeat("/"))))
        if lines(paths) != self.text(folder_paths):
            return None
        return folders, joined


def shape_key(paths: list[str], prefix: str) -> tuple[tuple[int, ...], tuple[str, ...]] | None:
    """(the folder of each file by position, the name of each file), for a partition whose
    files are each directly inside a folder of it; else None."""
    cut_at = len(prefix)
    index: dict[str, int] = {}
    folder_of_file = []
    names = []
    for path in paths:
        folder, slash, name = path[cut_at:].partition("/")
        if not slash or not name or "/" in name:
            return None  # at the partition's root, or nested
        folder_of_file.append(index.setdefault(folder, len(index)))
        names.append(name)
    return tuple(folder_of_file), tuple(names)


#: A skeleton's digits: ASCII ones as ``#`` (others stay as they are, making skeletons of
#: their own), so that names with numbers of the same widths have the same skeleton.
DIGITS_HIDDEN = str.maketrans("0123456789", "#" * 10)
_DIGIT_RUNS = re.compile("[0-9]+")


def name_tokens(joined: str) -> list[str]:
    """The parts of folder names joined by ``/``: the words and numbers between ``_``, ``_v``
    and ``/``."""
    return joined.replace("/", "_").replace("_v", "_").split("_")


@dataclass(frozen=True, slots=True, eq=False)
class Skeleton:
    """How a partition's folder names parse, known from their *skeleton*: the names joined by
    ``/`` with each digit as ``#``. Hive's name patterns (:mod:`.names`) take each number as a
    whole run of digits between ``_``, ``_v`` and the end, so the skeleton alone decides
    whether each name is a base or a delta and which part of it is which number; the numbers
    are then read from their places (a ``#`` in a name is no number: ``int`` refuses it). One
    object per skeleton (compared by identity)."""

    #: The parts of the joined names (see ``name_tokens``) that are numbers.
    numbers: Callable[[Sequence[str]], tuple[str, ...]]
    #: Per folder: (BaseDir or DeltaDir, the delta's kind, the positions of its fields'
    #: values among the numbers, None for a field the name has not).
    folders: tuple[tuple[type, DeltaKind | None, tuple[int | None, ...]], ...]
    #: The numbers that are write ids (a base's one, a delta's two), in the folders' order.
    write_ids: Callable[[Sequence[int]], tuple[int, ...]]
    #: The numbers that are bases' write ids, statements, compactor transactions.
    bases: Callable[[Sequence[int]], tuple[int, ...]] | None
    statements: Callable[[Sequence[int]], tuple[int, ...]]
    transactions: Callable[[Sequence[int]], tuple[int, ...]] | None
    #: Each folder's (first, last) write, by position among the numbers.
    ranges: tuple[tuple[int, int], ...]

    @classmethod
    def of(cls, names: Sequence[str]) -> Skeleton | None:
        """The skeleton of ``names`` (parsed one by one); None if one is no base or delta."""
        folders = []
        at = 0  # numbers so far
        places: list[int] = []  # the numbers' places among the parts
        parts = 0
        write_ids: list[int] = []
        bases, statements, transactions, ranges = [], [], [], []
        for name in names:
            folder = parse_acid_dir(name)
            if folder is None:
                return None
            if isinstance(folder, BaseDir):
                fields = [folder.write_id, folder.visibility_txn_id]
            else:
                fields = [folder.min_write_id, folder.max_write_id, folder.statement_id]
                fields.append(folder.visibility_txn_id)
            tokens = name_tokens(name)
            words = 1 if isinstance(folder, BaseDir) or not folder.is_delete else 2
            values = [f for f in fields if f is not None]
            try:
                if list(map(int, tokens[words:])) != values:
                    return None
            except ValueError:
                return None
            places += range(parts + words, parts + len(tokens))
            parts += len(tokens)
            positions: list[int | None] = []
            for value in fields:
                positions.append(None if value is None else at)
                at += value is not None
            if isinstance(folder, BaseDir):
                write_ids.append(positions[0])  # type: ignore[arg-type]
                bases.append(positions[0])
                ranges.append((positions[0], positions[0]))
                kind = None
            else:
                write_ids += positions[:2]  # type: ignore[arg-type]
                ranges.append((positions[0], positions[1]))  # type: ignore[arg-type]
                if positions[2] is not None:
                    statements.append(positions[2])
                kind = folder.kind
            if positions[-1] is not None:
                transactions.append(positions[-1])
            folders.append((type(folder), kind, tuple(positions)))
        return cls(
            numbers=taker(tuple(places)),
            folders=tuple(folders),
            write_ids=taker(tuple(write_ids)),
            bases=taker(tuple(bases)) if bases else None,
            statements=taker(tuple(statements)),
            transactions=taker(tuple(transactions)) if transactions else None,
            ranges=tuple(ranges),  # type: ignore[arg-type]
        )

    def make(self, names: Sequence[Sequence[str]], numbers: Sequence[list[int]]) -> list[tuple]:
        """The folders of partitions whose names are ``names`` (each's, in order) with these
        numbers (each's runs), partition after partition."""
        count = len(names)
        by_folder = list(zip(*names, strict=True))
        runs = list(zip(*numbers, strict=True))
        columns = []
        for k, (cls, kind, positions) in enumerate(self.folders):
            values = [runs[p] if p is not None else repeat(None) for p in positions]
            if cls is BaseDir:
                columns.append(filled(BaseDir, count, BASE_DIR_SETTERS, (by_folder[k], *values)))
            else:
                values.insert(0, repeat(kind))
                columns.append(filled(DeltaDir, count, DELTA_DIR_SETTERS, (by_folder[k], *values)))
        return list(zip(*columns, strict=True))


def every_write_seen(
    skeleton: Skeleton,
    numbers: Sequence[int],
    write_ids: tuple[int, ...],
    lists: ValidWriteIdList,
    txns: ValidTxnList | None,
    exceptions: Sequence[int],
) -> bool:
    """Every write of every folder valid (a base's too, however it counts as valid: as a
    compacted base, no write at or below it open; as an insert overwrite, valid), and every
    compactor transaction visible.

    :param skeleton: the skeleton of the partition's folders' names.
    :param numbers: the numbers in the names, in order.
    :param write_ids: the write ids among them (``skeleton.write_ids(numbers)``).
    :param lists: the reader's write-id list.
    :param txns: the reader's transaction list, if any.
    :param exceptions: the list's open and aborted write ids, sorted.
    """
    if max(write_ids) > lists.high_watermark:
        return False
    if skeleton.bases is not None and max(skeleton.bases(numbers)) >= lists.min_open_write_id:
        return False
    if exceptions and not no_exception_within(skeleton, numbers, exceptions):
        return False
    if txns is not None and skeleton.transactions is not None:
        return all(map(txns.is_valid, skeleton.transactions(numbers)))
    return True


def no_exception_within(
    skeleton: Skeleton, numbers: Sequence[int], exceptions: Sequence[int]
) -> bool:
    """No open or aborted write in any folder's range of writes.

    :param skeleton: the skeleton of the partition's folders' names.
    :param numbers: the numbers in the names, in order.
    :param exceptions: the open and aborted write ids, sorted.
    """
    for low, high in skeleton.ranges:
        at = bisect_left(exceptions, numbers[low])
        if at < len(exceptions) and exceptions[at] <= numbers[high]:
            return False
    return True


@dataclass(frozen=True, slots=True)
class Target:
    """What a partition matches to be made from one template (the key ``ShapedPartitions.find``
    gives): the template's shape and skeleton, its write ids' order and its statements; with
    where the numbers are in the names joined by ``/``, and what each of them is."""

    shape: Shape
    skeleton: Skeleton
    #: The skeleton's text (the names joined by ``/``, digits as ``#``), encoded.
    hidden: bytes
    #: The numbers' places in the names joined by ``/`` (any names of the skeleton: the text
    #: of each part between ``_``, ``_v`` and ``/`` is at the same place in each).
    places: tuple[slice, ...]
    #: Which numbers are write ids, bases' write ids, compactor transactions (positions).
    write_ids: tuple[int, ...]
    bases: tuple[int, ...]
    transactions: tuple[int, ...]
    #: (position, value) of each statement id.
    statements: tuple[tuple[int, int], ...]
    #: Pairs of positions (None: the 0 the write ids are ranked with) whose numbers compare
    #: so: the one below the other, or equal.
    below: tuple[tuple[int | None, int], ...]
    ties: tuple[tuple[int | None, int | None], ...]
    #: The numbers are the names' runs of ASCII digits, one for one (the names are ASCII and
    #: hold no ``#``): so are those of any names of the same skeleton text.
    runs_are_numbers: bool = False

    @classmethod
    def of(
        cls,
        shape: Shape,
        skeleton: Skeleton,
        names: Sequence[str],
        ranks: tuple[int, ...],
        statements: tuple[int, ...],
    ) -> Target | None:
        """The target of a template's key; None if its names' numbers cannot be placed.

        :param shape: the shape of its files.
        :param skeleton: the skeleton of its folders' names.
        :param names: its folders' names.
        :param ranks: the dense ranks of 0 and its write ids.
        :param statements: its statement ids.
        """
        joined = "/".join(names)
        places, at = [], 0
        for k, part in enumerate(joined.replace("/", "_").split("_")):
            # name_tokens drops the "v" of each "_v" (and of each "/v")
            places.append(slice(at + (k > 0 and part.startswith("v")), at + len(part)))
            at += len(part) + 1
        numbers = skeleton.numbers(places)
        tokens = skeleton.numbers(name_tokens(joined))
        if [joined[place] for place in numbers] != list(tokens):
            return None
        every = tuple(range(len(numbers)))

        def positions(take: Callable[[Sequence[int]], tuple[int, ...]] | None) -> tuple[int, ...]:
            return take(every) if take is not None else ()

        write_ids = positions(skeleton.write_ids)
        # Values have these dense ranks if and only if, taken in the ranks' order, each is
        # below the next where the ranks differ and equal to it where they tie.
        of_value = (None, *write_ids)
        order = sorted(range(len(ranks)), key=ranks.__getitem__)
        pairs = list(zip(order, order[1:], strict=False))
        runs = [m.span() for m in _DIGIT_RUNS.finditer(joined)]
        return cls(
            shape,
            skeleton,
            joined.translate(DIGITS_HIDDEN).encode("utf-8", "surrogatepass"),
            numbers,
            write_ids,
            positions(skeleton.bases),
            positions(skeleton.transactions),
            tuple(zip(positions(skeleton.statements), statements, strict=True)),
            below=tuple((of_value[a], of_value[b]) for a, b in pairs if ranks[a] < ranks[b]),
            ties=tuple((of_value[a], of_value[b]) for a, b in pairs if ranks[a] == ranks[b]),
            runs_are_numbers=joined.isascii()
            and "#" not in joined
            and runs == [(place.start, place.stop) for place in numbers],
        )


#: ASCII digits as ``#`` in UTF-8 (whose other characters' bytes are all above 127):
#: ``s.translate(DIGITS_HIDDEN).encode() == s.encode().translate(DIGITS_HIDDEN_BYTES)``.
DIGITS_HIDDEN_BYTES = bytes.maketrans(b"0123456789", b"#" * 10)
#: Every byte but ASCII digits and ``#`` as a space: what is left of names are their runs of
#: digits (and of digits and ``#``, which ``int`` refuses).
RUNS_KEPT_BYTES = bytes(c if c in b"0123456789#" else 32 for c in range(256))


@dataclass(frozen=True, slots=True)
class ListingSpans:
    """Partitions' paths as spans of one listing's: partition ``k``'s are
    ``listing[starts[k]:ends[k]]`` (no list of them made for each)."""

    listing: list[str]
    starts: Sequence[int]
    ends: Sequence[int]


def _file_columns(
    paths: Sequence[list[str]] | ListingSpans, at: list[int], files: int
) -> Callable[[int], list[str]]:
    """``j -> the j-th path of each partition at`` ``at`` (each with ``files`` paths): slices of
    the listing where those partitions follow one another in it, else of their paths
    joined in one list."""
    if isinstance(paths, ListingSpans):
        listing = paths.listing
        first = list(map(paths.starts.__getitem__, at))
        start, stop = first[0], first[0] + len(at) * files
        if first == list(range(start, stop, files)):
            return lambda j: listing[start + j : stop : files]
        cuts = map(slice, first, map(add, first, repeat(files)))
        flat = list(chain.from_iterable(map(listing.__getitem__, cuts)))
    else:
        flat = list(chain.from_iterable(map(paths.__getitem__, at)))
    return lambda j: flat[j::files]


def matching(
    target: Target,
    paths: Sequence[list[str]] | ListingSpans,
    prefixes: Sequence[str],
    lists: ValidWriteIdList,
    txns: ValidTxnList | None,
    exceptions: Sequence[int],
) -> list[tuple[tuple[str, ...], tuple[int, ...]] | None]:
    """For each of many partitions: its folders' names and their numbers when it matches
    ``target`` (its files in the target's shape, its folders' names of its skeleton, its write
    ids in the same order and its statements the same) and the reader sees every write of it,
    as ``ShapedPartitions.find`` would find it; else None.

    The checks are made by column, over all the partitions at once: the paths of each file
    position (the first file of every partition, the second ...) joined by line breaks and
    compared with what the shape spells from the partitions' folders, in one comparison; the
    names of each folder position joined likewise, their digits hidden, compared with the
    skeleton's; their numbers read in one pass. Where a column does not compare equal, its
    partitions are compared one by one, and only those that differ are left out.

    :param target: what to match.
    :param paths: each partition's files' paths, in listing order (or their spans of the
        listing's).
    :param prefixes: each partition's folder, with its trailing ``/``.
    :param lists: the reader's write-id list.
    :param txns: the reader's transaction list, if any.
    :param exceptions: the list's open and aborted write ids, sorted.
    """
    shape = target.shape
    files = len(shape.names)
    if isinstance(paths, ListingSpans):
        lengths = list(map(sub, paths.ends, paths.starts))
    else:
        lengths = list(map(len, paths))
    matched: list[tuple[tuple[str, ...], tuple[int, ...]] | None] = [None] * len(lengths)
    at = list(compress(range(len(lengths)), map(files.__eq__, lengths)))
    if not at:
        return matched
    count = len(at)
    column_of = _file_columns(paths, at, files)  # each file position's paths
    folders_of = list(map(prefixes.__getitem__, at))
    starts = list(map(len, folders_of))
    # each folder position's names and paths (with the partition's folder), partition after
    # partition, cut out of its first file's path
    names = [
        list(map(getitem, column_of(first), map(slice, starts, repeat(-tail))))
        for first, tail in zip(shape.first_files, shape.tails, strict=True)
    ]
    folder_paths = [list(map(add, folders_of, column)) for column in names]
    wrong: set[int] = set()  # of the partitions, by position among them
    hidden = target.hidden.split(b"/")
    encoded: list[bytes | None] = []
    # Where no folder (nor its name in the shape, nor the partition's folder) holds a line
    # break, what the shape spells for a file position is its paths joined by line breaks, and
    # holds as many line breaks as the join puts in: a column of paths equal to it holds no
    # other, so each path is the one spelt. Elsewhere the paths are compared one by one.
    unbroken = "\n".join(folders_of).count("\n") == count - 1
    for k, column in enumerate(names):
        text = "\n".join(column)
        encoded.append(text.encode("utf-8", "surrogatepass"))
        if not (
            text.count("/") == 0
            and encoded[k].translate(DIGITS_HIDDEN_BYTES) == b"\n".join(repeat(hidden[k], count))
        ):  # a skeleton's names hold neither "/" nor line breaks
            wrong.update(_differing(map(_skeleton_of, column), repeat(hidden[k])))
            encoded[k] = None
    for j, (k, name) in enumerate(zip(shape.folder_of_file, shape.names, strict=True)):
        listed = column_of(j)
        text = "\n".join(listed)
        spelt = f"/{name}\n".join(folder_paths[k])
        if not (
            unbroken
            and encoded[k] is not None
            and "\n" not in name
            and len(text) == len(spelt) + len(name) + 1
            and text.startswith(spelt)
            and text.endswith(name)
            and text[len(spelt)] == "/"
        ):
            tail = "/" + name
            wrong.update(_differing(listed, map(add, folder_paths[k], repeat(tail))))
    for a, b in _alike_pairs(hidden):  # two folders of the shape one here
        wrong.update(compress(range(count), map(eq, names[a], names[b])))
    if wrong:
        kept = [k not in wrong for k in range(count)]
        at = list(compress(at, kept))
        if not at:
            return matched
        count = len(at)
        names = [list(compress(column, kept)) for column in names]
        encoded = [None] * len(names)
    numbers = _numbers(target, names, encoded, count)
    if numbers is None:  # a "#" in a name: left to find, one partition at a time
        return matched
    step = len(numbers)
    column = numbers.__getitem__
    zero = repeat(0)
    high, low = lists.high_watermark, lists.min_open_write_id
    checks = [map(le, column(k), repeat(high)) for k in target.write_ids]
    checks += (map(lt, column(k), repeat(low)) for k in target.bases)
    checks += (map(eq, column(k), repeat(value)) for k, value in target.statements)
    checks += (map(lt, zero if a is None else column(a), column(b)) for a, b in target.below)
    checks += (
        map(eq, zero if a is None else column(a), zero if b is None else column(b))
        for a, b in target.ties
    )
    by_partition = list(zip(*numbers, strict=True)) if step else [()] * count
    if exceptions:
        checks.append(
            map(no_exception_within, repeat(target.skeleton), by_partition, repeat(exceptions))
        )
    if txns is not None:
        checks += (map(txns.is_valid, column(k)) for k in target.transactions)
    seen = map(all, zip(*checks, strict=True))  # a folder has a write id: never no check
    named = zip(*names, strict=True)
    for k, folder_names, runs, whole in zip(at, named, by_partition, seen, strict=True):
        if whole:
            matched[k] = (folder_names, runs)
    return matched


def _differing(listed: Iterable[object], expected: Iterable[object]) -> Iterator[int]:
    """The positions where ``listed`` and ``expected`` differ."""
    return compress(count_from(), map(ne, listed, expected))


def _skeleton_of(name: str) -> bytes:
    """A folder name's digits hidden, encoded (``/`` and line breaks kept: no skeleton's)."""
    return name.encode("utf-8", "surrogatepass").translate(DIGITS_HIDDEN_BYTES)


def _alike_pairs(hidden: Sequence[bytes]) -> Iterator[tuple[int, int]]:
    """The pairs of folder positions whose names have the same skeleton (so may be one)."""
    for a, first in enumerate(hidden):
        for b in range(a + 1, len(hidden)):
            if hidden[b] == first:
                yield a, b


def _numbers(
    target: Target, names: list[list[str]], encoded: list[bytes | None], count: int
) -> list[list[int]] | None:
    """The numbers of ``count`` partitions' folders' names (``names`` by folder position, each
    column's text encoded where known), by their position among a partition's numbers: each
    a column over the partitions. None when one is no number (a ``#`` in a name)."""
    places = target.places
    try:
        if target.runs_are_numbers:  # a folder position's numbers in one pass
            by_folder = []
            for k, column in enumerate(names):
                text = encoded[k]
                if text is None:
                    text = "\n".join(column).encode("utf-8", "surrogatepass")
                runs = list(map(int, text.translate(RUNS_KEPT_BYTES).split()))
                per = len(runs) // count
                if len(runs) != per * count:
                    break
                by_folder += (runs[i::per] for i in range(per))
            else:
                if len(by_folder) == len(places):
                    return by_folder
        joined = list(map("/".join, zip(*names, strict=True)))
        return [list(map(int, map(getitem, joined, repeat(place)))) for place in places]
    except ValueError:
        return None
