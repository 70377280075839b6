"""Partitions shaped alike: the same files in folders that each partition names its own way.

A table compacted partition by partition names each partition's base and delta folders after
write ids of its own (``base_0000041``, ``delta_0000042_0000042_0000`` ...), so no two of its
partitions are laid out alike (:mod:`.alike_partitions`). Yet they are nearly always *shaped*
alike: the same file names (``bucket_00000`` ...) in as many folders, of the same kinds, whose
write ids compare alike (the same order, the same ties, with each other and with 0).

Hive's choice (:mod:`.acid_state`) is then the same folder by position, whenever the reader sees
every write of every folder of them and every compactor transaction: the walk compares write
ids only with each other, and asks the lists only whether a folder's writes are valid and its
transaction visible. And a choice that leaves no folder out names no folder in its result. So
the first partition of each shape and order of write ids is resolved the plain way and kept as a
template by folder position; each further one is made from it with its own folders, in a few
C-level passes (tests/acid/test_snapshot_shapes.py checks the result against the plain way).

What is not made so, and goes the plain way (or is made from a template of
:mod:`.alike_partitions`): a partition with files at its root or nested deeper than its base
and delta folders, or in other folders; with a folder some of whose writes the reader does not
see, or whose compactor transaction it does not; whose choice leaves folders out (obsolete or
aborted ones: a detail names the folder that covers them); and every partition after 64
templates were made with none used again.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import chain, cycle, repeat
from operator import add, getitem, itemgetter

from .bulk import (
    NAME_OF,
    cut,
    each_repeated,
    filled,
    new_data_files,
    new_slices,
    new_views,
    taker,
)
from .listing import StoredFile
from .names import (
    BASE_DIR_SETTERS,
    DELTA_DIR_SETTERS,
    AcidDir,
    BaseDir,
    DeltaDir,
    DeltaKind,
    parse_acid_dir,
)
from .partitions import Partition
from .read_view import (
    CHOSEN_DELTA_SETTERS,
    KIND_SETTERS,
    ChosenDelta,
    FileKind,
    FileRole,
    PartitionReadView,
)
from .writeids import RangeValidity, ValidTxnList, ValidWriteIdList


@dataclass(frozen=True, slots=True, eq=False)
class _Shape:
    """A partition's files by folder: which folder (by position) and which name each file has.

    One object per shape (shapes are looked up by value once, then compared by identity)."""

    #: The paths -> each folder's first file's path.
    firsts: Callable[[Sequence[str]], tuple[str, ...]]
    #: The length of each folder's first file's name, with its ``/``.
    tails: tuple[int, ...]
    #: Each folder's path (with ``/``) -> the folder path of each file.
    folder_of_file: Callable[[Sequence[str]], tuple[str, ...]]
    #: Each file's name in its folder.
    names: tuple[str, ...]
    #: By the length of a partition's folder: the slices of its folders' names out of paths.
    cuts: dict[int, tuple[slice, ...]]

    def folders_of(self, paths: list[str], prefix: str) -> tuple[list[str], str] | None:
        """The folder names of a partition whose files' paths (all below ``prefix``, which
        ends with ``/``) are ``paths``, when it is shaped so, and the names joined by ``/``;
        else None."""
        if len(paths) != len(self.names):
            return None
        cuts = self.cuts.get(len(prefix))
        if cuts is None:
            cuts = self.cuts[len(prefix)] = tuple(slice(len(prefix), -t) for t in self.tails)
        folders = list(map(getitem, self.firsts(paths), cuts))
        joined = "/".join(folders)
        if joined.count("/") != len(folders) - 1 or len(set(folders)) != len(folders):
            return None  # a folder nested in another, or two folders of the shape one here
        folder_paths = list(map(add, repeat(prefix), map(add, folders, repeat("/"))))
        if list(map(add, self.folder_of_file(folder_paths), self.names)) != paths:
            return None
        return folders, joined


def _shape_key(paths: list[str], prefix: str) -> tuple[tuple[int, ...], tuple[str, ...]] | None:
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
_DIGITS_HIDDEN = str.maketrans("0123456789", "#" * 10)


def _tokens(joined: str) -> list[str]:
    """The parts of folder names joined by ``/``: the words and numbers between ``_``, ``_v``
    and ``/``."""
    return joined.replace("/", "_").replace("_v", "_").split("_")


@dataclass(frozen=True, slots=True, eq=False)
class _Skeleton:
    """How a partition's folder names parse, known from their *skeleton*: the names joined by
    ``/`` with each digit as ``#``. Hive's name patterns (:mod:`.names`) take each number as a
    whole run of digits between ``_``, ``_v`` and the end, so the skeleton alone decides
    whether each name is a base or a delta and which part of it is which number; the numbers
    are then read from their places (a ``#`` in a name is no number: ``int`` refuses it). One
    object per skeleton (compared by identity)."""

    #: The parts of the joined names (see ``_tokens``) that are numbers.
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
    def of(cls, names: Sequence[str]) -> _Skeleton | None:
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
            tokens = _tokens(name)
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


@dataclass(frozen=True, slots=True)
class _Found:
    """A partition to make from a shape's template: the template's key, and its folders'
    names, their numbers and their skeleton."""

    key: tuple[object, ...]
    names: list[str]
    numbers: list[int]


@dataclass(frozen=True, slots=True)
class _Group:
    """One of a template's groups of files (base, deltas, delete deltas) in every slice:
    which files of the partition (by position), slice after slice, with what bucket, from
    which of the partition's folders (by position among the template's kinds)."""

    take: Callable[[Sequence[StoredFile]], tuple[StoredFile, ...]]
    bucket_ids: tuple[int, ...]
    kind_of: Callable[[Sequence[FileKind]], tuple[FileKind, ...]]
    #: How many of them each slice has.
    lengths: tuple[int, ...]

    def make(self, listed: Iterable[Sequence[StoredFile]], kinds: list[tuple], count: int):
        """This group of each slice of ``count`` partitions, from their files and the kinds of
        their folders."""
        if not self.bucket_ids:
            return repeat((), count * len(self.lengths))
        stored = list(chain.from_iterable(map(self.take, listed)))
        kinds_of_files = chain.from_iterable(map(self.kind_of, kinds))
        data_files = new_data_files(stored, cycle(self.bucket_ids), kinds_of_files)
        return cut(data_files, self.lengths, count)


@dataclass(frozen=True, slots=True)
class _Template:
    """A partition's resolution by the positions of its files and folders."""

    slice_buckets: tuple[int, ...]
    #: The slices' base, delta and delete delta files (no originals: none are in folders).
    groups: tuple[_Group, _Group, _Group]
    #: (folder position, role, marked) of each folder whose files are chosen.
    kinds: tuple[tuple[int, FileRole, bool], ...]
    base: int | None
    #: The chosen deltas' folder positions, in reading order.
    deltas: tuple[int, ...]
    #: How the folders' names parse.
    skeleton: _Skeleton

    @classmethod
    def of(
        cls,
        snapshot: PartitionReadView,
        files: Sequence[StoredFile],
        prefix: str,
        folders: tuple[AcidDir, ...],
        skeleton: _Skeleton,
    ) -> _Template | None:
        """The template of ``snapshot``, resolved from ``files`` (below ``prefix``, in
        ``folders``); None if it cannot be one (a folder left out, a file listed twice)."""
        position = {id(stored): k for k, stored in enumerate(files)}
        at = {folder.name: k for k, folder in enumerate(folders)}
        if snapshot.excluded or len(position) != len(files) or len(at) != len(folders):
            return None
        base = None
        if snapshot.base is not None:
            base = at.get(snapshot.base.name)
            if base is None or snapshot.base_path != prefix + snapshot.base.name:
                return None
        deltas = []
        for chosen in snapshot.deltas:
            k = at.get(chosen.folder.name)
            if (
                k is None
                or chosen.path != prefix + chosen.folder.name
                or chosen.validity is not RangeValidity.ALL
                or chosen.invalid_write_ids
            ):
                return None
            deltas.append(k)
        slices = snapshot.slices
        if any(s.original_files for s in slices):
            return None
        kinds: dict[int, tuple[FileRole, bool]] = {}
        groups = []
        for group in ([s.base_files for s in slices], [s.delta_files for s in slices]) + (
            [s.delete_delta_files for s in slices],
        ):
            data_files = [f for files_of_slice in group for f in files_of_slice]
            folder_at = []
            for data_file in data_files:
                kind = data_file._kind
                k = at.get(kind.folder.name) if kind.folder is not None else None
                if k is None or kind != FileKind(
                    kind.role, folders[k], (), kind.acid_version_marked
                ):
                    return None
                if kinds.setdefault(k, (kind.role, kind.acid_version_marked)) != (
                    kind.role,
                    kind.acid_version_marked,
                ):
                    return None
                folder_at.append(k)
            groups.append((data_files, folder_at, tuple(map(len, group))))
        order = sorted(kinds)
        kind_at = {k: j for j, k in enumerate(order)}
        return cls(
            slice_buckets=tuple(s.bucket_id for s in slices),
            groups=tuple(  # type: ignore[arg-type]
                _Group(
                    take=taker(tuple(position[id(f.file)] for f in data_files)),
                    bucket_ids=tuple(f.bucket_id for f in data_files),
                    kind_of=taker(tuple(kind_at[k] for k in folder_at)),
                    lengths=lengths,
                )
                for data_files, folder_at, lengths in groups
            ),
            kinds=tuple((k, *kinds[k]) for k in order),
            base=base,
            deltas=tuple(deltas),
            skeleton=skeleton,
        )

    def make(self, alike: list[tuple[Partition, Sequence[StoredFile], str, list[str], list[int]]]):
        """The read views of partitions shaped as this one, each from its files and its
        folders' names and numbers, made together: each kind of object in a few C-level
        passes."""
        count = len(alike)
        partitions, listed, prefixes, names, numbers = zip(*alike, strict=True)
        folders = self.skeleton.make(names, numbers)
        columns = [  # each chosen folder's kind, partition after partition
            filled(
                FileKind,
                count,
                KIND_SETTERS,
                (repeat(role), map(itemgetter(k), folders), repeat(()), repeat(marked)),
            )
            for k, role, marked in self.kinds
        ]
        kinds = list(zip(*columns, strict=True)) if columns else [()] * count
        base_files, delta_files, delete_delta_files = (
            g.make(listed, kinds, count) for g in self.groups
        )
        no_originals = repeat((), count * len(self.slice_buckets))
        slices = new_slices(
            partitions,
            self.slice_buckets,
            (no_originals, base_files, delta_files, delete_delta_files),
        )
        per_partition = len(self.deltas)
        chosen_folders = list(chain.from_iterable(map(taker(self.deltas), folders)))
        paths = map(add, each_repeated(prefixes, per_partition), map(NAME_OF, chosen_folders))
        columns = (chosen_folders, paths, repeat(RangeValidity.ALL), repeat(()))
        chosen = filled(ChosenDelta, len(chosen_folders), CHOSEN_DELTA_SETTERS, columns)
        if self.base is not None:
            bases = list(map(itemgetter(self.base), folders))
            base_paths: Iterator[str | None] = map(add, prefixes, map(NAME_OF, bases))
        else:
            bases, base_paths = [None] * count, repeat(None)
        return new_views(partitions, bases, base_paths, chosen, slices, repeat(()))


class ShapedPartitions:
    """The shapes and templates of one resolution (one write-id and transaction list)."""

    #: Templates made with none of them used again: the partitions are not shaped alike
    #: either, and making more would only cost.
    _UNUSED_TEMPLATES_AT_MOST = 64

    def __init__(self, write_ids: ValidWriteIdList, txns: ValidTxnList | None) -> None:
        self.write_ids = write_ids
        self.txns = txns
        self._exceptions = sorted({*write_ids.open_ids, *write_ids.aborted_ids})
        #: Shapes by key (see ``_shape_key``), and the one last seen (tried first).
        self.shapes: dict[tuple[tuple[int, ...], tuple[str, ...]], _Shape] = {}
        self.last: _Shape | None = None
        #: Skeletons of folder names (see ``_Skeleton``): None when a name is no base or delta.
        self.skeletons: dict[str, _Skeleton | None] = {}
        #: By the key of ``find``: the template, or None when there is none to make.
        self.templates: dict[tuple[object, ...], _Template | None] = {}
        self.alike: dict[int, tuple[_Template, list]] = {}
        self.used = False

    def find(self, paths: list[str], prefix: str) -> _Found | None:
        """The key of the template to make a partition from, with its folders (its files'
        paths ``paths``, all below ``prefix``); None if it is made otherwise.

        :param paths: the paths of the partition's files, in listing order.
        :param prefix: the partition's folder, with its trailing ``/``.
        """
        if not self.used and len(self.templates) >= self._UNUSED_TEMPLATES_AT_MOST:
            return None
        shape = self.last
        found = shape.folders_of(paths, prefix) if shape is not None else None
        if found is None:
            key = _shape_key(paths, prefix)
            if key is None:
                return None
            shape = self.shapes.get(key)
            if shape is None:
                folder_of_file, file_names = key
                firsts = [folder_of_file.index(k) for k in range(max(folder_of_file) + 1)]
                shape = self.shapes[key] = _Shape(
                    firsts=taker(tuple(firsts)),
                    tails=tuple(len(file_names[k]) + 1 for k in firsts),
                    folder_of_file=taker(folder_of_file),
                    names=file_names,
                    cuts={},
                )
            found = shape.folders_of(paths, prefix)
            if found is None:
                return None
            self.last = shape
        names, joined = found
        skeletons = self.skeletons
        skeleton_key = joined.translate(_DIGITS_HIDDEN)
        skeleton = skeletons.get(skeleton_key, False)
        if skeleton is False:
            skeleton = skeletons[skeleton_key] = _Skeleton.of(names)
        if skeleton is None:
            return None
        try:
            numbers = list(map(int, skeleton.numbers(_tokens(joined))))
        except ValueError:
            return None  # a "#" in a name
        write_ids = skeleton.write_ids(numbers)
        if not self._seen_whole(skeleton, numbers, write_ids):
            return None
        values = [0, *write_ids]
        order = sorted(set(values))
        rank = dict(zip(order, range(len(order)), strict=True))
        ranks = tuple(map(rank.__getitem__, values))
        return _Found((shape, skeleton, ranks, skeleton.statements(numbers)), names, numbers)

    def _seen_whole(self, skeleton: _Skeleton, numbers: list[int], write_ids: tuple) -> bool:
        """Every write of every folder valid (a base's too, however it counts as valid: as
        a compacted base, no write at or below it open; as an insert overwrite, valid), and
        every compactor transaction visible."""
        lists = self.write_ids
        if max(write_ids) > lists.high_watermark:
            return False
        if skeleton.bases is not None and max(skeleton.bases(numbers)) >= lists.min_open_write_id:
            return False
        exceptions = self._exceptions
        if exceptions:
            for low, high in skeleton.ranges:
                at = bisect_left(exceptions, numbers[low])
                if at < len(exceptions) and exceptions[at] <= numbers[high]:
                    return False
        txns = self.txns
        if txns is not None and skeleton.transactions is not None:
            return all(map(txns.is_valid, skeleton.transactions(numbers)))
        return True

    def take(
        self, found: _Found, partition: Partition, files: Sequence[StoredFile], prefix: str
    ) -> bool | None:
        """Take a partition to make from its template: None when its key has none yet (the
        caller resolves it alone, then ``learn``), False when there is none to make."""
        template = self.templates.get(found.key, False)
        if template is False:
            return None
        if template is None:
            return False
        self.alike[id(template)][1].append((partition, files, prefix, found.names, found.numbers))
        self.used = True
        return True

    def learn(
        self,
        found: _Found,
        snapshot: PartitionReadView | None,
        files: Sequence[StoredFile],
        prefix: str,
    ) -> None:
        """Keep ``snapshot`` (the partition of ``found`` resolved alone; None: it could not
        be) as the template of its key."""
        folders = tuple(map(parse_acid_dir, found.names))
        skeleton = found.key[1]
        template = _Template.of(snapshot, files, prefix, folders, skeleton) if snapshot else None
        self.templates[found.key] = template
        if template is not None:
            self.alike[id(template)] = (template, [])

    def snapshots(self) -> list[PartitionReadView]:
        """Every partition taken."""
        made: list[PartitionReadView] = []
        for template, alike in self.alike.values():
            if alike:
                made += template.make(alike)
        return made
