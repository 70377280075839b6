"""The pruning report: one self-contained HTML page of what a slice manifest kept and why.

Per partition and bucket, kept or pruned, and for a pruned slice the step and the predicate
term that ruled it out (the manifest's verdicts, :mod:`.explain`); files and bytes kept
against the total; the skipping ratio per partition as an inline SVG bar chart; and, once the
snapshot is committed (:meth:`PruningReport.with_snapshot`), the rows read, deleted, filtered
and written per partition, or the commit's error when it failed. For large tables the slice
table is capped (:data:`~.report_page.MAX_SLICE_ROWS`) under a summary per verdict. No
script, no external style sheet or font: the page opens from storage, a ``file://`` URL or
the Airflow UI alike.

The report's data travels inside the page (a ``<script type="application/json">`` block that
no browser runs), so the commit step can read the page back and add its rows
(:func:`add_snapshot`) without the manifest or the table.

The per-partition figures add up to the manifest's metrics: ``data_files`` to ``files_total``,
``candidates`` to ``files_candidate``, ``size`` to ``bytes_total`` and ``bytes_kept`` to
``bytes_kept``. A partition's skipping ratio is ``1 - candidates / data_files``, as the
manifest's (Hudi's) is for the whole table.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..acid.listing import location_uri, resolve_filesystem
from ..acid.storage import write_whole
from .explain import KEPT
from .manifest_files import SliceManifest
from .report_page import DATA_ID, render_html

FORMAT = "airflow-acid/pruning-report"
VERSION = 2  # 2: slices as rows of SLICE_FIELDS, partitions and reasons as indexes; a commit error
_DATA = re.compile(
    r'<script type="application/json" id="' + DATA_ID + r'">(?P<data>.*?)</script>', re.S
)
_DATA_ROLES = ("original", "base", "delta")  # the roles of data files (not delete deltas)


@dataclass(frozen=True)
class ReportSlice:
    """One slice's line: its verdict and what the manifest kept of it."""

    partition: str
    bucket: int
    step: str
    reason: str
    data_files: int
    files_kept: int  # data files the manifest lists (all of a kept slice, at slice grain)
    candidates: int  # data files whose statistics may hold a match
    size: int  # every file's bytes, delete deltas included
    bytes_kept: int  # bytes of the files the manifest lists

    @property
    def kept(self) -> bool:
        return self.step == KEPT


@dataclass(frozen=True)
class PartitionRows:
    """What compacting one partition's kept slices did (summed over its buckets)."""

    partition: str
    rows_read: int
    rows_deleted: int
    rows_filtered: int
    rows_written: int


@dataclass(frozen=True)
class PartitionSummary:
    """One partition's slices added up."""

    partition: str
    slices: int
    slices_kept: int
    data_files: int
    files_kept: int
    candidates: int
    size: int
    bytes_kept: int

    @property
    def skipping_ratio(self) -> float:
        return 1.0 - self.candidates / self.data_files if self.data_files else 0.0


@dataclass(frozen=True)
class PruningReport:
    """What the report shows; ``slices`` in the snapshot's order. ``complete`` is False for
    a manifest written without verdicts: its pruned slices are then unknown."""

    table: str
    table_name: str | None
    predicate: str
    write_ids: str | None
    created_at: str
    manifest_uri: str | None
    metrics: Mapping[str, Any]
    slices: tuple[ReportSlice, ...]
    complete: bool = True
    snapshot_id: str | None = None
    committed_at: str | None = None
    rows: tuple[PartitionRows, ...] | None = None
    commit_error: str | None = None

    def partitions(self) -> list[PartitionSummary]:
        """Per partition, in the order of first appearance."""
        groups: dict[str, list[ReportSlice]] = {}
        for s in self.slices:
            groups.setdefault(s.partition, []).append(s)
        return [
            PartitionSummary(
                partition,
                len(items),
                sum(s.kept for s in items),
                sum(s.data_files for s in items),
                sum(s.files_kept for s in items),
                sum(s.candidates for s in items),
                sum(s.size for s in items),
                sum(s.bytes_kept for s in items),
            )
            for partition, items in groups.items()
        ]

    def with_snapshot(self, result: Any) -> PruningReport:
        """The report with a committed snapshot's rows per partition
        (a :class:`~airflow_provider_acid.output.SnapshotResult`)."""
        sums: dict[str, list[int]] = {}
        for b in result.buckets:
            row = sums.setdefault(b.partition, [0, 0, 0, 0])
            row[0] += b.rows_read
            row[1] += b.rows_deleted
            row[2] += b.rows_filtered
            row[3] += b.rows_written
        return replace(
            self,
            snapshot_id=result.snapshot_id,
            committed_at=result.committed_at,
            rows=tuple(PartitionRows(p, *v) for p, v in sums.items()),
            commit_error=None,
        )

    def with_failure(self, message: str) -> PruningReport:
        """The report of a commit that failed (or a run that ended before its commit)."""
        return replace(self, commit_error=" ".join(str(message).split()) or "failed")

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "version": VERSION,
            "table": self.table,
            "table_name": self.table_name,
            "predicate": self.predicate,
            "write_ids": self.write_ids,
            "created_at": self.created_at,
            "manifest_uri": self.manifest_uri,
            "metrics": dict(self.metrics),
            "complete": self.complete,
            **_slice_columns(self.slices),
            "snapshot_id": self.snapshot_id,
            "committed_at": self.committed_at,
            "rows": [r.__dict__ for r in self.rows] if self.rows is not None else None,
            "commit_error": self.commit_error,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PruningReport:
        if data.get("format") != FORMAT:
            raise ValueError(f"not a pruning report (format {data.get('format')!r})")
        rows = data.get("rows")
        return cls(
            table=data["table"],
            table_name=data.get("table_name"),
            predicate=data["predicate"],
            write_ids=data.get("write_ids"),
            created_at=data["created_at"],
            manifest_uri=data.get("manifest_uri"),
            metrics=dict(data["metrics"]),
            slices=_slices_from(data),
            complete=bool(data.get("complete", True)),
            snapshot_id=data.get("snapshot_id"),
            committed_at=data.get("committed_at"),
            rows=tuple(PartitionRows(**r) for r in rows) if rows is not None else None,
            commit_error=data.get("commit_error"),
        )


#: a slice's fields in the page's data, one row each: partitions and reasons, which repeat, as
#: indexes into their lists (10,000 slices take ~40 bytes each)
SLICE_FIELDS = (
    "partition",
    "bucket",
    "step",
    "reason",
    "data_files",
    "files_kept",
    "candidates",
    "size",
    "bytes_kept",
)
_INDEXED = ("partition", "step", "reason")


def _slice_columns(slices: Sequence[ReportSlice]) -> dict[str, Any]:
    values: dict[str, dict[str, int]] = {name: {} for name in _INDEXED}
    rows = []
    for s in slices:
        row = []
        for name in SLICE_FIELDS:
            value = getattr(s, name)
            if name in values:
                value = values[name].setdefault(value, len(values[name]))
            row.append(value)
        rows.append(row)
    return {
        "slice_fields": list(SLICE_FIELDS),
        **{f"{name}_values": list(values[name]) for name in _INDEXED},
        "slices": rows,
    }


def _slices_from(data: Mapping[str, Any]) -> tuple[ReportSlice, ...]:
    if "slice_fields" not in data:  # version 1: a dict per slice
        return tuple(ReportSlice(**s) for s in data["slices"])
    fields = data["slice_fields"]
    lists = {name: data[f"{name}_values"] for name in _INDEXED}
    slices = []
    for row in data["slices"]:
        given = dict(zip(fields, row, strict=True))
        for name, values in lists.items():
            given[name] = values[given[name]]
        slices.append(ReportSlice(**given))
    return tuple(slices)


def build_report(manifest: SliceManifest, manifest_uri: str | None = None) -> PruningReport:
    """The report of a manifest; computed with ``explain=True`` it shows every slice, else
    only the kept ones (``complete`` False)."""
    kept = {s.key: s for s in manifest.slices}

    def kept_figures(key: str) -> tuple[int, int, int]:
        s = kept.get(key)
        if s is None:
            return 0, 0, 0
        data = [f for f in s.files if f.role in _DATA_ROLES]
        return len(data), sum(f.candidate for f in data), s.size

    slices = []
    if manifest.verdicts is not None:
        for v in manifest.verdicts:
            files_kept, candidates, bytes_kept = kept_figures(v.key)
            slices.append(
                ReportSlice(
                    v.partition,
                    v.bucket,
                    v.step,
                    v.reason,
                    v.data_files,
                    files_kept,
                    candidates,
                    v.size,
                    bytes_kept,
                )
            )
    else:
        for s in manifest.slices:
            files_kept, candidates, bytes_kept = kept_figures(s.key)
            slices.append(
                ReportSlice(
                    s.partition,
                    s.bucket,
                    KEPT,
                    "",
                    files_kept,
                    files_kept,
                    candidates,
                    bytes_kept,
                    bytes_kept,
                )
            )
    definition = manifest.definition
    return PruningReport(
        table=manifest.table,
        table_name=definition.name if definition else None,
        predicate=manifest.predicate,
        write_ids=manifest.write_ids,
        created_at=manifest.created_at,
        manifest_uri=manifest_uri,
        metrics=manifest.metrics.to_dict(),
        slices=tuple(slices),
        complete=manifest.verdicts is not None,
    )


def report_uri_for(manifest_uri: str) -> str:
    """Where a manifest's report goes: next to it, ``.html`` for its extension."""
    head, tail = posixpath.split(manifest_uri)
    stem = tail.rsplit(".", 1)[0] if "." in tail else tail
    return posixpath.join(head, f"{stem}.html")


def write_report(
    report: PruningReport, uri: str, storage_options: dict[str, Any] | None = None
) -> str:
    """Write the page whole (a reader never sees half of it); returns its URI."""
    fs, path = resolve_filesystem(uri, storage_options=storage_options)
    write_whole(fs, path, render_html(report).encode())
    return location_uri(fs, path)


def read_report(uri: str, storage_options: dict[str, Any] | None = None) -> PruningReport:
    """The report data of a page :func:`write_report` wrote."""
    fs, path = resolve_filesystem(uri, storage_options=storage_options)
    with fs.open(path, "r", encoding="utf-8") as handle:
        page = handle.read()
    return report_from_page(page, uri)


def report_from_page(page: str, uri: str = "the page") -> PruningReport:
    """The report data inside a page :func:`render_html` made."""
    found = _DATA.search(page)
    if found is None:
        raise ValueError(f"{uri} is not a pruning report (no {DATA_ID} block)")
    return PruningReport.from_dict(json.loads(found.group("data")))


def add_snapshot(uri: str, result: Any, storage_options: dict[str, Any] | None = None) -> str:
    """Add a committed snapshot's rows per partition to the report at ``uri``."""
    return write_report(
        read_report(uri, storage_options).with_snapshot(result), uri, storage_options
    )


def add_failure(uri: str, message: str, storage_options: dict[str, Any] | None = None) -> str:
    """Mark the report at ``uri`` as of a commit that failed, with its error."""
    return write_report(
        read_report(uri, storage_options).with_failure(message), uri, storage_options
    )
