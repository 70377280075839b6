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
from operator import add, itemgetter

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
from .names import AcidDir, BaseDir, DeltaKind, parse_acid_dir
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

    #: Each folder's first file, by position.
    firsts: tuple[int, ...]
    #: Each folder's path (with ``/``) -> the folder path of each file.
    folder_of_file: Callable[[Sequence[str]], tuple[str, ...]]
    #: Each file's name in its folder.
    names: tuple[str, ...]

    def folders_of(self, paths: list[str], prefix: str) -> list[str] | None:
        """The folder names of a partition whose files' paths (all below ``prefix``, which
        ends with ``/``) are ``paths``, when it is shaped so; else None."""
        if len(paths) != len(self.names):
            return None
        cut_at = len(prefix)
        folders = []
        for first in self.firsts:
            path = paths[first]
            end = path.find("/", cut_at)
            if end < 0:
                return None
            folders.append(path[cut_at:end])
        if len(set(folders)) != len(folders):
            return None  # two folders of the shape are one here
        folder_paths = [f"{prefix}{folder}/" for folder in folders]
        if list(map(add, self.folder_of_file(folder_paths), self.names)) != paths:
            return None
        return folders


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


#: A folder name as the key of a shape sees it: (the parsed folder, its class, its write ids).
#: The class is what the walk asks of it besides its write ids: the kind, the statement, and
#: whether it has a compactor transaction.
_Facts = tuple[AcidDir, tuple[object, ...], tuple[int, ...]]


@dataclass(frozen=True, slots=True)
class _Found:
    """A partition to make from a shape's template: the template's key, and its folders."""

    key: tuple[object, ...]
    folders: tuple[AcidDir, ...]


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

    @classmethod
    def of(
        cls,
        snapshot: PartitionReadView,
        files: Sequence[StoredFile],
        prefix: str,
        folders: tuple[AcidDir, ...],
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
        )

    def make(self, alike: list[tuple[Partition, Sequence[StoredFile], str, tuple[AcidDir, ...]]]):
        """The read views of partitions shaped as this one, each from its files and folders,
        made together: each kind of object in a few C-level passes."""
        count = len(alike)
        partitions, listed, prefixes, folders = zip(*alike, strict=True)
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
        #: Folder names, parsed: None for a name that is no base or delta, or some of whose
        #: writes (or whose compactor transaction) the reader does not see.
        self.facts: dict[str, _Facts | None] = {}
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
        names = shape.folders_of(paths, prefix) if shape is not None else None
        if names is None:
            key = _shape_key(paths, prefix)
            if key is None:
                return None
            shape = self.shapes.get(key)
            if shape is None:
                folder_of_file, file_names = key
                firsts = tuple(folder_of_file.index(k) for k in range(max(folder_of_file) + 1))
                shape = self.shapes[key] = _Shape(firsts, taker(folder_of_file), file_names)
            names = shape.folders_of(paths, prefix)
            if names is None:
                return None
            self.last = shape
        facts = self.facts
        found = [facts[n] if n in facts else self._facts(n) for n in names]
        if None in found:
            return None
        folders, classes, write_ids = zip(*found, strict=True)  # type: ignore[misc]
        values = [0, *chain.from_iterable(write_ids)]
        order = sorted(set(values))
        rank = dict(zip(order, range(len(order)), strict=True))
        return _Found((shape, classes, tuple(map(rank.__getitem__, values))), folders)

    def _facts(self, name: str) -> _Facts | None:
        """What the key of a partition needs of a folder name (see ``facts``): None unless
        every write of the folder is valid (a base's too, however it counts as valid) and its
        compactor transaction visible."""
        facts: _Facts | None = None
        folder = parse_acid_dir(name)
        if folder is not None:
            txn = folder.visibility_txn_id
            if txn is None or self.txns is None or self.txns.is_valid(txn):
                if isinstance(folder, BaseDir):
                    # a compacted base: no write at or below it open; an insert overwrite: valid
                    low = high = folder.write_id
                    kind: tuple[object, ...] = (None, txn is None)
                    values: tuple[int, ...] = (high,)
                    valid = high < self.write_ids.min_open_write_id
                else:
                    low, high = folder.min_write_id, folder.max_write_id
                    kind = (folder.kind is DeltaKind.DELETE, folder.statement_id, txn is None)
                    values = (low, high)
                    valid = True
                exceptions = self._exceptions
                if valid and high <= self.write_ids.high_watermark:
                    if exceptions:
                        at = bisect_left(exceptions, low)
                        valid = at == len(exceptions) or exceptions[at] > high
                    if valid:
                        facts = (folder, kind, values)
        self.facts[name] = facts
        return facts

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
        self.alike[id(template)][1].append((partition, files, prefix, found.folders))
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
        template = _Template.of(snapshot, files, prefix, found.folders) if snapshot else None
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
