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
Finding a partition's shape, skeleton and order one at a time costs a few dozen Python steps;
so once layouts are no longer looked up, many partitions in a row are matched together against
the template last used (:func:`.folder_shapes.matching`), and only those that do not match it
are found one at a time (tests/acid/test_snapshot_shapes_many.py).

What is not made so, and goes the plain way (or is made from a template of
:mod:`.alike_partitions`): a partition with files at its root or nested deeper than its base
and delta folders, or in other folders; with a folder some of whose writes the reader does not
see, or whose compactor transaction it does not; whose choice leaves folders out (obsolete or
aborted ones: a detail names the folder that covers them); and every partition after 64
templates were made with none used again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import chain, compress, cycle, repeat
from operator import add, is_not, itemgetter

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
from .folder_shapes import (
    DIGITS_HIDDEN,
    ListingSpans,
    Shape,
    Skeleton,
    Target,
    every_write_seen,
    matching,
    name_tokens,
    shape_key,
)
from .listing import StoredFile
from .names import (
    AcidDir,
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
        stored = chain.from_iterable(map(self.take, listed))
        kinds_of_files = chain.from_iterable(map(self.kind_of, kinds))
        files = len(self.bucket_ids) * count
        data_files = new_data_files(stored, cycle(self.bucket_ids), kinds_of_files, files)
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
    skeleton: Skeleton

    @classmethod
    def of(
        cls,
        snapshot: PartitionReadView,
        files: Sequence[StoredFile],
        prefix: str,
        folders: tuple[AcidDir, ...],
        skeleton: Skeleton,
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
        #: Shapes by key (see ``shape_key``), and the one last seen (tried first).
        self.shapes: dict[tuple[tuple[int, ...], tuple[str, ...]], Shape] = {}
        self.last: Shape | None = None
        #: Skeletons of folder names (see ``Skeleton``): None when a name is no base or delta.
        self.skeletons: dict[str, Skeleton | None] = {}
        #: By the key of ``find``: the template, or None when there is none to make.
        self.templates: dict[tuple[object, ...], _Template | None] = {}
        self.alike: dict[int, tuple[_Template, list]] = {}
        self.used = False
        #: What the partitions of the template last taken match, and that template.
        self.target: tuple[Target, _Template] | None = None

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
            key = shape_key(paths, prefix)
            if key is None:
                return None
            shape = self.shapes.get(key)
            if shape is None:
                shape = self.shapes[key] = Shape.of(*key)
            found = shape.folders_of(paths, prefix)
            if found is None:
                return None
            self.last = shape
        names, joined = found
        skeletons = self.skeletons
        skeleton_key = joined.translate(DIGITS_HIDDEN)
        skeleton = skeletons.get(skeleton_key, False)
        if skeleton is False:
            skeleton = skeletons[skeleton_key] = Skeleton.of(names)
        if skeleton is None:
            return None
        try:
            numbers = list(map(int, skeleton.numbers(name_tokens(joined))))
        except ValueError:
            return None  # a "#" in a name
        write_ids = skeleton.write_ids(numbers)
        if not every_write_seen(
            skeleton, numbers, write_ids, self.write_ids, self.txns, self._exceptions
        ):
            return None
        values = [0, *write_ids]
        order = sorted(set(values))
        rank = dict(zip(order, range(len(order)), strict=True))
        ranks = tuple(map(rank.__getitem__, values))
        return _Found((shape, skeleton, ranks, skeleton.statements(numbers)), names, numbers)

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
        if self.target is None or self.target[1] is not template:
            target = Target.of(*found.key[:2], found.names, *found.key[2:])
            self.target = (target, template) if target is not None else None
        return True

    def take_many(
        self,
        partitions: Sequence[Partition],
        listed: Sequence[Sequence[StoredFile]],
        prefixes: Sequence[str],
        paths: Sequence[list[str]] | ListingSpans,
    ) -> list[bool]:
        """Take, of many partitions in a row, those that ``find`` would find to make from
        the template last taken (shaped, named and ordered as its partition), found together
        (:func:`.folder_shapes.matching`): True for each taken, False for each left to
        ``find`` (and ``take``), one at a time.

        :param partitions: the partitions.
        :param listed: each one's files, in listing order.
        :param prefixes: each one's folder, with its trailing ``/``.
        :param paths: each one's files' paths (or their spans of the listing's).
        """
        if self.target is None:  # none taken yet, or its numbers not placed
            return [False] * len(partitions)
        target, template = self.target
        matched = matching(target, paths, prefixes, self.write_ids, self.txns, self._exceptions)
        taken = list(map(is_not, matched, repeat(None)))
        found = list(compress(matched, taken))
        if found:
            names, numbers = zip(*found, strict=True)
            made = (compress(column, taken) for column in (partitions, listed, prefixes))
            self.alike[id(template)][1].extend(zip(*made, names, numbers, strict=True))
        return taken

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
