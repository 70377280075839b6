"""Partitions laid out alike: resolved from one template instead of each on its own.

Resolving a partition depends on the paths of its files relative to the partition folder,
on which of them are empty, and on the write-id and transaction lists: not on the partition
values, nor on the sizes and versions otherwise. Tables whose partitions are written by the
same statements (a dynamic-partition INSERT gives every partition the same delta folder)
repeat one layout many times. So the first partition of a layout is resolved the plain way
(:mod:`.listing_groups`' ``group_listing`` and :mod:`.acid_state`' ``resolve_partition`` over
its files alone), and the result kept as a template: which of the partition's files (by
position) go into which slice, with which role, bucket, folder, invalid write ids and mark,
and the chosen and excluded folders by relative path. Each further partition laid out alike
is then made from the template with a few C-level passes over its files
(tests/acid/test_snapshot_templates.py
checks that the result is what the plain way gives).

Partitions laid out each their own way (compacted each on its own, so with folders named
after write ids of their own) are mostly shaped alike, and made from a template of
:mod:`.shaped_partitions` instead; after 64 layouts in a row not found, layouts are no longer
looked up unless the listing's runs give them. The first partition of a layout or shape is
resolved alone and becomes the template of both.

What falls back to the plain way: a partition with an empty file, a partition folder nested in
it, or entries that cannot be placed; one whose layout Hive's rules refuse (the plain way then
raises the error, in its order of partitions); one listed with files outside its own folder;
the files at the table root or outside it; a partition an out-of-order listing leaves files of
among those; and a partition neither laid out nor shaped as one before once layouts are no
longer looked up. A layout that cannot be a template (a file listed twice) has its first
partition resolved on its own and the others the plain way.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import chain, cycle, repeat
from operator import add, getitem

from .acid_state import Plan, resolve_partition
from .bulk import (
    PATH_OF,
    SIZE_OF,
    cut,
    each_repeated,
    filled,
    lines,
    new_data_files,
    new_slices,
    new_views,
    taker,
)
from .folder_shapes import ListingSpans
from .listing import StoredFile
from .listing_groups import group_listing
from .names import BaseDir, DeltaDir
from .partitions import Partition, parse_partition_component
from .read_view import (
    CHOSEN_DELTA_SETTERS,
    AcidLayoutError,
    ChosenDelta,
    DataFile,
    ExcludedEntry,
    ExclusionReason,
    FileKind,
    NotEnoughHistoryError,
    PartitionReadView,
    UnrecognisedEntry,
)
from .shaped_partitions import ShapedPartitions
from .writeids import RangeValidity, ValidTxnList, ValidWriteIdList

#: A partition laid out as one resolved before: (partition, its files, its folder with ``/``).
_Alike = tuple[Partition, Sequence[StoredFile], str]
#: A partition to add: (partition, its files, its folder, its layout if known, its paths if
#: known, whether they are known to lie below its folder).
_Added = tuple[Partition, Sequence[StoredFile], str, tuple[str, ...] | None, list[str] | None, bool]


@dataclass(frozen=True, slots=True)
class _Group:
    """One of a template's four groups of files (originals, base, deltas, delete deltas) in
    every slice: which files of the partition (by position), slice after slice, and what."""

    take: Callable[[Sequence[StoredFile]], tuple[StoredFile, ...]]
    bucket_ids: tuple[int, ...]
    kinds: tuple[FileKind, ...]
    #: How many of them each slice has.
    lengths: tuple[int, ...]

    @classmethod
    def of(cls, groups: list[tuple[DataFile, ...]], position: dict[int, int]) -> _Group:
        data_files = [f for group in groups for f in group]
        return cls(
            take=taker(tuple(position[id(f.file)] for f in data_files)),
            bucket_ids=tuple(f.bucket_id for f in data_files),
            kinds=tuple(f._kind for f in data_files),
            lengths=tuple(map(len, groups)),
        )

    def make(self, listed: Iterable[Sequence[StoredFile]], count: int) -> Iterator[tuple]:
        """This group of each slice of ``count`` partitions, from their files."""
        if not self.kinds:
            return repeat((), count * len(self.lengths))
        stored = chain.from_iterable(map(self.take, listed))
        files = len(self.kinds) * count
        data_files = new_data_files(stored, cycle(self.bucket_ids), cycle(self.kinds), files)
        return cut(data_files, self.lengths, count)


@dataclass(frozen=True, slots=True)
class _Template:
    """A partition's resolution, with its files by position and its paths relative to it."""

    #: Each slice's bucket id.
    slice_buckets: tuple[int, ...]
    #: The slices' originals, base, delta and delete delta files.
    groups: tuple[_Group, _Group, _Group, _Group]
    base: BaseDir | None
    base_path: str | None
    #: (folder, relative path, validity, invalid write ids) of each chosen delta.
    deltas: tuple[tuple[DeltaDir, str, RangeValidity, tuple[int, ...]], ...]
    #: (relative path, reason, detail) of each excluded entry, in path order.
    excluded: tuple[tuple[str, ExclusionReason, str], ...]

    @classmethod
    def of(
        cls, snapshot: PartitionReadView, files: Sequence[StoredFile], prefix: str
    ) -> _Template | None:
        """The template of ``snapshot``, resolved from ``files`` (all below ``prefix``, which
        ends with ``/``); None if it cannot be one (a path elsewhere, a file listed twice)."""
        position = {id(stored): k for k, stored in enumerate(files)}
        paths = [d.path for d in snapshot.deltas] + [e.path for e in snapshot.excluded]
        if snapshot.base_path is not None:
            paths.append(snapshot.base_path)
        if len(position) != len(files) or not all(p.startswith(prefix) for p in paths):
            return None
        slices = snapshot.slices
        cut = len(prefix)
        return cls(
            slice_buckets=tuple(s.bucket_id for s in slices),
            groups=(
                _Group.of([s.original_files for s in slices], position),
                _Group.of([s.base_files for s in slices], position),
                _Group.of([s.delta_files for s in slices], position),
                _Group.of([s.delete_delta_files for s in slices], position),
            ),
            base=snapshot.base,
            base_path=snapshot.base_path[cut:] if snapshot.base_path is not None else None,
            deltas=tuple(
                (d.folder, d.path[cut:], d.validity, d.invalid_write_ids) for d in snapshot.deltas
            ),
            excluded=tuple((e.path[cut:], e.reason, e.detail) for e in snapshot.excluded),
        )

    def make(self, alike: list[_Alike]) -> list[PartitionReadView]:
        """The snapshots of partitions laid out as this one, each from its files (listed in
        the same order), made together: each kind of object in a few C-level passes."""
        count = len(alike)
        partitions, listed, prefixes = zip(*alike, strict=True)
        groups = [g.make(listed, count) for g in self.groups]
        slices = new_slices(partitions, self.slice_buckets, groups)
        # the chosen deltas, with their partitions' paths
        per_partition = len(self.deltas)
        chosen: list[ChosenDelta] = []
        if per_partition:
            folders, paths, validities, invalid = zip(*self.deltas, strict=True)
            in_partitions = each_repeated(prefixes, per_partition)
            columns = (cycle(folders), map(add, in_partitions, cycle(paths)), cycle(validities))
            chosen = filled(
                ChosenDelta, per_partition * count, CHOSEN_DELTA_SETTERS, (*columns, cycle(invalid))
            )
        base_paths = map(add, prefixes, repeat(self.base_path)) if self.base_path else None
        excluded = self.excluded
        return new_views(
            partitions,
            repeat(self.base),
            base_paths or repeat(None),
            chosen,
            slices,
            (
                tuple(ExcludedEntry(prefix + path, *rest) for path, *rest in excluded)
                for prefix in prefixes
            )
            if excluded
            else repeat(()),
        )


class Resolver:
    """Resolves partitions for one write-id and transaction list, each laid out as one
    resolved before from that one's template."""

    #: Layouts looked up in a row with none found: then the table's partitions are laid out
    #: each its own way, and making more templates of layouts would only cost.
    _UNUSED_TEMPLATES_AT_MOST = 64
    #: Partitions matched together by ``add_many``.
    _MATCHED_AT_MOST = 512

    def __init__(
        self, write_ids: ValidWriteIdList, txns: ValidTxnList | None, insert_only: bool
    ) -> None:
        self.write_ids = write_ids
        self.txns = txns
        self.insert_only = insert_only
        self.plans: dict[tuple[tuple[str, bool], ...], Plan] = {}
        #: By the layout of a partition's files (see ``add``): the template of the partition
        #: resolved first so; None when it is not one to copy.
        self.templates: dict[tuple[str, ...], _Template | None] = {}
        #: The partitions resolved on their own, and those to make from each template.
        self.resolved: list[PartitionReadView] = []
        self.alike: dict[int, tuple[_Template, list[_Alike]]] = {}
        self.misses = 0  # layouts looked up in a row and not found
        #: Partitions shaped alike, whose folders are named each their own way.
        self.shaped = ShapedPartitions(write_ids, txns)

    def add(
        self,
        partition: Partition,
        files: Sequence[StoredFile],
        prefix: str,
        layout: tuple[str, ...] | None = None,
        paths: list[str] | None = None,
        below: bool = True,
        sized: bool = False,
    ) -> bool:
        """Take ``partition`` to resolve, whose files (every file of it, in listing order,
        below ``prefix``, which ends with ``/``) are ``files``. False when it is not resolved
        on its own here (files in folders of other partitions, entries that cannot be placed,
        a layout Hive's rules refuse, empty files): the caller resolves it the plain way.

        A partition laid out as one before is made from that one's template; else one shaped
        as one before, from that one's (:mod:`.shaped_partitions`); else it is resolved alone
        and becomes the template of both.

        :param partition: the partition.
        :param files: its files.
        :param prefix: its folder.
        :param layout: the files' paths relative to ``prefix``, when known.
        :param paths: the files' paths, when known.
        :param below: the files are known to lie below ``prefix`` (else it is checked where
            it matters: a file elsewhere sends the partition the plain way).
        :param sized: no file is known to be empty."""
        if not sized and 0 in map(SIZE_OF, files):
            return False  # empty files are no data; rare, so left to the plain way
        if paths is None:
            paths = list(map(PATH_OF, files))
        if layout is None and not self._given_up():
            if not below and not all(map(str.startswith, paths, repeat(prefix))):
                return False
            layout = tuple(map(getitem, paths, repeat(slice(len(prefix), None))))
        if layout is not None:
            template = self.templates.get(layout, False)
            if template is None:
                return False
            if template is not False:
                self.alike[id(template)][1].append((partition, files, prefix))
                self.misses = 0
                return True
            self.misses += 1
        found = self.shaped.find(paths, prefix)
        if found is not None:
            taken = self.shaped.take(found, partition, files, prefix)
            if taken is not None:
                return taken
        elif layout is None or self._given_up():
            return False
        snapshot = self._resolve_alone(partition, files, prefix)
        if found is not None:
            self.shaped.learn(found, snapshot, files, prefix)
        if layout is not None and not self._given_up():
            template = _Template.of(snapshot, files, prefix) if snapshot is not None else None
            self.templates[layout] = template
            if template is not None:
                self.alike[id(template)] = (template, [])
        if snapshot is None:
            return False
        self.resolved.append(snapshot)
        return True

    def add_many(
        self,
        items: Sequence[_Added],
        sized: bool = False,
        listing: list[str] | None = None,
        spans: Sequence[tuple[int, int] | None] | None = None,
    ) -> list[bool]:
        """``add`` each of ``items`` (partition, files, prefix, layout, paths, below: ``add``'s
        arguments), in order: whether each is resolved here.

        Partitions in a row that only their shape can place (their layout not known, layouts
        no longer looked up, no file empty) are first matched together, up to
        ``_MATCHED_AT_MOST`` at a time, against the template of :mod:`.shaped_partitions` last
        used (``ShapedPartitions.take_many``); those that do not match it are added one by one.

        :param items: the partitions' ``add`` arguments.
        :param sized: no file of theirs is known to be empty.
        :param listing: the listing's paths, which ``spans`` are of.
        :param spans: each item's paths as a span (start, end) of ``listing``, or None; an
            item with a span may have no paths (None): they are not copied out of the
            listing where they are matched together (an item with neither has its paths read
            from its files)."""

        def given(k: int) -> _Added:  # item k, with its paths
            item = items[k]
            span = spans[k] if spans is not None else None
            if item[4] is not None:
                return item
            if span is not None and listing is not None:
                return (*item[:4], listing[span[0] : span[1]], item[5])
            return (*item[:4], list(map(PATH_OF, item[1])), item[5])

        taken: list[bool] = []
        add = self.add
        at, count = 0, len(items)
        while at < count:
            end = at
            if sized and self._given_up():
                most = min(count, at + self._MATCHED_AT_MOST)
                while end < most and items[end][3] is None:
                    end += 1
            if end - at < 2:
                taken.append(add(*given(at), sized=sized))
                at += 1
                continue
            partitions, listed, prefixes, _, _, _ = zip(*items[at:end], strict=True)
            row_spans = spans[at:end] if spans is not None else None
            paths: Sequence[list[str]] | ListingSpans
            if listing is not None and row_spans is not None and None not in row_spans:
                starts, ends = zip(*row_spans, strict=True)  # type: ignore[misc]
                paths = ListingSpans(listing, starts, ends)
            else:
                paths = [given(k)[4] for k in range(at, end)]  # type: ignore[misc]
            matched = self.shaped.take_many(partitions, listed, prefixes, paths)
            taken += [
                done or add(*given(k), sized=sized)
                for done, k in zip(matched, range(at, end), strict=True)
            ]
            at = end
        return taken

    def _given_up(self) -> bool:
        """Layouts looked up in a row, none of them laid out as one before (the partitions
        are laid out each its own way): no more are looked up unless the caller knows them."""
        return self.misses > self._UNUSED_TEMPLATES_AT_MOST

    def snapshots(self) -> list[PartitionReadView]:
        """Every partition taken."""
        made = list(self.resolved)
        for template, alike in self.alike.values():
            if alike:
                made += template.make(alike)
        return made + self.shaped.snapshots()

    def _resolve_alone(
        self, partition: Partition, files: Sequence[StoredFile], prefix: str
    ) -> PartitionReadView | None:
        listings, unrecognised = group_listing(prefix[:-1], files, self.insert_only)
        if unrecognised or len(listings) != 1 or listings[0].partition.path:
            return None
        listing = listings[0]
        listing.partition = partition
        try:
            return resolve_partition(listing, self.write_ids, self.txns, self.plans)
        except (AcidLayoutError, NotEnoughHistoryError):
            return None  # raised by the plain way, in its order of partitions


@dataclass(slots=True)
class _Run:
    """A partition's files in a listing: its spans (start, end), and while it has one, the
    paths of its files relative to it (its layout: see ``Resolver.add``); whether each of its
    files is known to lie below its folder."""

    partition: Partition
    spans: list[tuple[int, int]]
    layout: tuple[str, ...] | None
    below: bool


#: Runs in a row laid out otherwise than the one before, after which no more are compared.
_MISSES_AT_MOST = 64


def _partition_runs(root: str, paths: list[str]) -> tuple[dict[str, _Run], list[tuple[int, int]]]:
    """Cut a listing into runs of files below one partition folder.

    A listing sorted by path has each partition's files in one run, found by bisection, and
    its partitions often laid out alike: a run is first taken to be laid out as the one before
    it, which costs one comparison of the paths to check, or else to have as many files.
    Returns the runs by partition folder (with its trailing ``/``), and the spans (start, end)
    of the other files: those of the table folder itself, or outside it."""
    prefix = root.rstrip("/") + "/"
    cut = len(prefix)
    runs: dict[str, _Run] = {}
    others: list[tuple[int, int]] = []
    i, n = 0, len(paths)
    before: tuple[str, ...] | None = ()  # the layout of the run before
    misses = 0  # runs in a row not laid out as the one before
    length = 0  # files in the run before
    while i < n:
        path = paths[i]
        components: list[str] = []
        values = []
        if path.startswith(prefix):
            for name in path[cut:].split("/")[:-1]:  # the folders, from the table's down
                parsed = parse_partition_component(name) if "=" in name else None
                if parsed is None:
                    break
                components.append(name)
                values.append(parsed)
        if not components:
            others.append((i, i + 1))
            i += 1
            continue
        partition_path = "/".join(components)
        folder = f"{prefix}{partition_path}/"
        end = i + len(before) if before is not None else i
        layout: tuple[str, ...] | None = before
        if (
            before is None
            or (end < n and paths[end].startswith(folder))
            or lines(paths[i:end]) != folder + f"\n{folder}".join(before)
        ):
            end = i + length  # as many files as the run before, if so
            # Where no layout is taken from the run, whether each of its paths lies below
            # its folder is left to what uses it (Resolver.add, folder_shapes.matching).
            checked = before is not None
            if not (
                length
                and end <= n
                and paths[end - 1].startswith(folder)
                and (end == n or not paths[end].startswith(folder))
                and (not checked or all(map(str.startswith, paths[i:end], repeat(folder))))
            ):
                end = bisect_left(paths, folder[:-1] + "0", i)  # "0" follows "/"
                below = list(map(str.startswith, paths[i:end], repeat(folder)))
                if not all(below):  # a listing out of order
                    end = i + below.index(False)
                checked = True
            layout = None
            if before is not None:
                misses += 1
                if misses > _MISSES_AT_MOST:  # laid out each its own way: stop guessing
                    before = None
                else:
                    layout = before = tuple(
                        map(getitem, paths[i:end], repeat(slice(len(folder), None)))
                    )
        else:
            misses, checked = 0, True
        run = runs.get(folder)
        if run is None:  # Partition.from_components, with the names parsed already
            partition = Partition(partition_path, tuple(values))
            runs[folder] = _Run(partition, [(i, end)], layout, checked)
        else:
            run.spans.append((i, end))
            run.layout = None
            run.below = run.below and checked
        length, i = end - i, end
    return runs, others


def resolve_listing(
    root: str, files: Sequence[StoredFile], resolver: Resolver
) -> tuple[list[PartitionReadView], list[UnrecognisedEntry]]:
    """Resolve every partition of a listing below ``root``: those laid out as one before from
    its template, the rest the plain way. Partitions in path order.

    :param root: the table's folder.
    :param files: the listed files below it, in path order.
    :param resolver: the resolver holding the write-id and transaction lists and the templates.
    """
    all_paths = list(map(PATH_OF, files))
    sized = all(map(SIZE_OF, files))  # no file empty; else each partition is looked at
    runs, plain = _partition_runs(root, all_paths)
    taken: set[str] = set()
    items: list[_Added] = []
    one_span: list[tuple[int, int] | None] = []  # the paths of those are taken from all_paths
    for folder, run in runs.items():
        spans = run.spans
        paths: list[str] | None = None
        if len(spans) == 1:
            start, end = spans[0]
            in_partition = files[start:end]
            one_span.append(spans[0])
        else:
            in_partition = [f for start, end in spans for f in files[start:end]]
            paths = list(map(PATH_OF, in_partition))
            one_span.append(None)
        items.append((run.partition, in_partition, folder, run.layout, paths, run.below))
    added_all = resolver.add_many(items, sized, all_paths, one_span)
    for run, added in zip(runs.values(), added_all, strict=True):
        if added:
            taken.add(run.partition.path)
        else:
            plain += run.spans
    while True:
        plain.sort()
        rest = [f for start, end in plain for f in files[start:end]]
        listings, unrecognised = group_listing(root, rest, resolver.insert_only)
        # A partition taken, yet with files among the rest, is resolved the plain way. That
        # happens in a listing out of order: the files of a partition's partition folder
        # (dt=1/h=2/) that come before its other files are a run of their own.
        clash = {listing.partition.path for listing in listings} & taken
        if not clash:
            break
        for path in clash:
            taken.remove(path)
            plain += runs[f"{root.rstrip('/')}/{path}/"].spans
    partitions = [p for p in resolver.snapshots() if p.partition.path in taken]
    partitions += (
        resolve_partition(listing, resolver.write_ids, resolver.txns, resolver.plans)
        for listing in listings
    )
    partitions.sort(key=_partition_path)
    return partitions, unrecognised


def _partition_path(snapshot: PartitionReadView) -> str:
    return snapshot.partition.path
