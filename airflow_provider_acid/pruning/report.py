"""The pruning report: one self-contained HTML page of what a slice manifest kept and why.

Per partition and bucket, kept or pruned, and for a pruned slice the step and the predicate
term that ruled it out (the manifest's verdicts, :mod:`.explain`); files and bytes kept
against the total; the skipping ratio per partition as an inline SVG bar chart; and, once the
snapshot is committed (:meth:`PruningReport.with_snapshot`), the rows read, deleted, filtered
and written per partition. No script, no external style sheet or font: the page opens from
storage, a ``file://`` URL or the Airflow UI alike.

The report's data travels inside the page (a ``<script type="application/json">`` block that
no browser runs), so the commit step can read the page back and add its rows
(:func:`add_snapshot`) without the manifest or the table.

The per-partition figures add up to the manifest's metrics: ``data_files`` to ``files_total``,
``candidates`` to ``files_candidate``, ``size`` to ``bytes_total`` and ``bytes_kept`` to
``bytes_kept``. A partition's skipping ratio is ``1 - candidates / data_files``, as the
manifest's (Hudi's) is for the whole table.
"""

from __future__ import annotations

import html
import json
import posixpath
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..acid.listing import location_uri, resolve_filesystem
from ..acid.storage import write_whole
from .explain import KEPT, STEPS
from .manifest_files import SliceManifest

FORMAT = "airflow-acid/pruning-report"
VERSION = 1
_DATA_ID = "acid-report-data"
_DATA = re.compile(
    r'<script type="application/json" id="' + _DATA_ID + r'">(?P<data>.*?)</script>', re.S
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
        )

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
            "slices": [s.__dict__ for s in self.slices],
            "snapshot_id": self.snapshot_id,
            "committed_at": self.committed_at,
            "rows": [r.__dict__ for r in self.rows] if self.rows is not None else None,
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
            slices=tuple(ReportSlice(**s) for s in data["slices"]),
            complete=bool(data.get("complete", True)),
            snapshot_id=data.get("snapshot_id"),
            committed_at=data.get("committed_at"),
            rows=tuple(PartitionRows(**r) for r in rows) if rows is not None else None,
        )


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
    found = _DATA.search(page)
    if found is None:
        raise ValueError(f"{uri} is not a pruning report (no {_DATA_ID} block)")
    return PruningReport.from_dict(json.loads(found.group("data")))


def add_snapshot(uri: str, result: Any, storage_options: dict[str, Any] | None = None) -> str:
    """Add a committed snapshot's rows per partition to the report at ``uri``."""
    return write_report(
        read_report(uri, storage_options).with_snapshot(result), uri, storage_options
    )


# -- the page ---------------------------------------------------------------------------------

_CSS = """
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px;color:#1d2733}
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:24px 0 8px}
.sub{color:#5b6b7b;margin:0 0 16px}code{background:#f1f4f7;padding:1px 4px;border-radius:3px}
.cards{display:flex;flex-wrap:wrap;gap:12px}
.card{border:1px solid #d9e1e8;border-radius:6px;padding:10px 14px;min-width:150px}
.card .v{font-size:20px;font-weight:600}.card .l{color:#5b6b7b;font-size:12px}
table{border-collapse:collapse;font-size:13px}
th,td{padding:4px 8px;border-bottom:1px solid #e6ebf0;white-space:nowrap}
th{text-align:left;background:#f6f8fa}td.n{text-align:right;font-variant-numeric:tabular-nums}
tr.kept td.s{color:#1a7f37;font-weight:600}tr.pruned td.s{color:#9a3412}
.warn{color:#9a3412}.row{display:flex;flex-wrap:wrap;gap:28px;align-items:flex-start}.chart{max-width:270px}
"""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _n(value: int) -> str:
    return f"{value:,}"


def _bytes(value: int) -> str:
    size = float(value)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{value:,} B" if unit == "B" else f"{size:,.1f} {unit}"
        size /= 1024
    return f"{value:,} B"  # pragma: no cover


def _pct(value: float) -> str:
    return f"{100 * value:.1f}%"


def _card(field: str, value: Any, shown: str, label: str) -> str:
    return (
        f'<div class="card" id="metric-{field}" data-value="{_e(value)}">'
        f'<div class="v">{_e(shown)}</div><div class="l">{_e(label)}</div></div>'
    )


def _cells(cells: Iterable[tuple[str, Any, str]]) -> str:
    """``(field, raw value, shown text)`` cells; numbers right-aligned."""
    out = []
    for field, raw, shown in cells:
        numeric = isinstance(raw, (int, float)) and not isinstance(raw, bool)
        css = "n" if numeric else ("s" if field == "verdict" else "")
        out.append(
            f'<td class="{css}" data-field="{field}" data-value="{_e(raw)}">{_e(shown)}</td>'
        )
    return "".join(out)


def _table(table_id: str, headers: Sequence[str], rows: Iterable[str]) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join(rows)
    return f'<table id="{table_id}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _chart(parts: Sequence[PartitionSummary]) -> str:
    """The skipping ratio per partition: one bar each, 0 to 100%."""
    bar, gap, height, left, top = 32, 12, 180, 60, 12
    width = left + max(1, len(parts)) * (bar + gap) + gap
    total = top + height + 70
    out = [
        f'<svg id="skipping-chart" xmlns="http://www.w3.org/2000/svg" width="{width}" '
        f'height="{total}" viewBox="0 0 {width} {total}" role="img" '
        f'aria-label="skipping ratio per partition">'
    ]
    for tick in (0, 25, 50, 75, 100):
        y = top + height - height * tick / 100
        out.append(
            f'<line x1="{left}" x2="{width}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e6ebf0"/>'
            f'<text x="{left - 6}" y="{y + 4:.1f}" font-size="11" text-anchor="end" '
            f'fill="#5b6b7b">{tick}%</text>'
        )
    for i, p in enumerate(parts):
        ratio = p.skipping_ratio
        h = height * ratio
        x = left + gap + i * (bar + gap)
        label = p.partition or "(unpartitioned)"
        out.append(
            f'<g class="bar" data-partition="{_e(p.partition)}" data-ratio="{ratio:.6f}">'
            f"<title>{_e(label)}: {_pct(ratio)} of {p.data_files} data files skipped</title>"
            f'<rect x="{x}" y="{top + height - h:.1f}" width="{bar}" height="{h:.1f}" '
            f'fill="#2f7ebc"/>'
            f'<text x="{x + bar / 2}" y="{top + height - h - 4:.1f}" font-size="11" '
            f'text-anchor="middle" fill="#1d2733">{_pct(ratio)}</text>'
            f'<text x="{x + bar / 2}" y="{top + height + 14}" font-size="11" '
            f'text-anchor="end" fill="#1d2733" transform="rotate(-35 {x + bar / 2} '
            f'{top + height + 14})">{_e(label)}</text></g>'
        )
    out.append("</svg>")
    return "".join(out)


def render_html(report: PruningReport) -> str:
    """The self-contained page (no script runs, nothing is fetched)."""
    m = report.metrics
    parts = report.partitions()
    title = report.table_name or report.table
    cards = [
        _card(
            "slices_kept",
            m["slices_kept"],
            f"{_n(m['slices_kept'])} / {_n(m['slices_total'])}",
            "slices kept / total",
        ),
        _card(
            "files_candidate",
            m["files_candidate"],
            f"{_n(m['files_candidate'])} / {_n(m['files_total'])}",
            "candidate data files / total",
        ),
        _card(
            "bytes_kept",
            m["bytes_kept"],
            f"{_bytes(m['bytes_kept'])} / {_bytes(m['bytes_total'])}",
            "bytes kept / total",
        ),
        _card("skipping_ratio", m["skipping_ratio"], _pct(m["skipping_ratio"]), "skipping ratio"),
        _card(
            "partitions_kept",
            m["partitions_kept"],
            f"{_n(m['partitions_kept'])} / {_n(m['partitions_total'])}",
            "partitions kept / total",
        ),
    ]
    hidden = "".join(
        f'<span hidden id="metric-{k}" data-value="{_e(m[k])}"></span>'
        for k in ("slices_total", "files_total", "bytes_total", "partitions_total")
        if k in m
    )
    part_rows = [
        f'<tr data-partition="{_e(p.partition)}">'
        + _cells(
            [
                ("partition", p.partition, p.partition or "(unpartitioned)"),
                ("slices_kept", p.slices_kept, f"{p.slices_kept} / {p.slices}"),
                ("candidates", p.candidates, _n(p.candidates)),
                ("files_kept", p.files_kept, _n(p.files_kept)),
                ("data_files", p.data_files, _n(p.data_files)),
                ("bytes_kept", p.bytes_kept, _bytes(p.bytes_kept)),
                ("size", p.size, _bytes(p.size)),
                ("skipping_ratio", round(p.skipping_ratio, 6), _pct(p.skipping_ratio)),
            ]
        )
        + "</tr>"
        for p in parts
    ]
    slice_rows = [
        f'<tr class="{"kept" if s.kept else "pruned"}" data-partition="{_e(s.partition)}" '
        f'data-bucket="{s.bucket}">'
        + _cells(
            [
                ("partition", s.partition, s.partition or "(unpartitioned)"),
                ("bucket", s.bucket, str(s.bucket)),
                ("verdict", s.step, "kept" if s.kept else f"pruned ({s.step})"),
                ("reason", s.reason, s.reason or "may hold matching rows"),
                ("files_kept", s.files_kept, f"{s.files_kept} / {s.data_files}"),
                ("bytes_kept", s.bytes_kept, f"{_bytes(s.bytes_kept)} / {_bytes(s.size)}"),
            ]
        )
        + "</tr>"
        for s in report.slices
    ]
    if report.rows is None:
        commit = (
            '<p id="commit-pending" class="sub">No snapshot committed from this manifest yet: '
            "the commit task adds its rows here.</p>"
        )
    else:
        rows = [
            f'<tr data-partition="{_e(r.partition)}">'
            + _cells(
                [
                    ("partition", r.partition, r.partition or "(unpartitioned)"),
                    ("rows_read", r.rows_read, _n(r.rows_read)),
                    ("rows_deleted", r.rows_deleted, _n(r.rows_deleted)),
                    ("rows_filtered", r.rows_filtered, _n(r.rows_filtered)),
                    ("rows_written", r.rows_written, _n(r.rows_written)),
                ]
            )
            + "</tr>"
            for r in report.rows
        ]
        commit = (
            f'<p class="sub">Snapshot <code id="snapshot-id">{_e(report.snapshot_id)}</code> '
            f"committed {_e(report.committed_at)}.</p>"
            + _table(
                "rows",
                ["partition", "rows read", "deleted", "filtered out", "written"],
                rows,
            )
        )
    note = (
        ""
        if report.complete
        else '<p class="warn">This manifest was written without verdicts: only its kept slices '
        "are listed.</p>"
    )
    unlisted = m.get("partitions_total", 0) - len(parts) if report.complete else 0
    if unlisted > 0:
        note += (
            f'<p class="sub" id="unlisted" data-value="{unlisted}">{_n(unlisted)} more '
            "partition(s) ruled out on their values before listing (by the metastore, or by "
            "the predicate's partition terms): their files were never listed.</p>"
        )
    data = json.dumps(report.to_dict(), separators=(",", ":")).replace("</", "<\\/")
    steps = ", ".join(s for s in STEPS if s != KEPT)
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>Pruning report: {_e(title)}</title><style>{_CSS}</style></head><body>"
        f"<h1>Pruning report: {_e(title)}</h1>"
        f'<p class="sub">Predicate <code id="predicate">{_e(report.predicate)}</code> · '
        f"write ids <code>{_e(report.write_ids or 'all on storage')}</code> · "
        f"manifest {_e(report.manifest_uri or '')} · {_e(report.created_at)}</p>"
        f'<div class="cards">{"".join(cards)}</div>{hidden}'
        '<div class="row"><div class="chart">'
        "<h2>Skipping ratio per partition</h2>"
        '<p class="sub">Share of each partition\'s data files that cannot hold a matching row.</p>'
        f"{_chart(parts)}</div><div>"
        "<h2>Partitions</h2>"
        + _table(
            "partitions",
            [
                "partition",
                "slices kept",
                "candidate files",
                "files kept",
                "data files",
                "bytes kept",
                "bytes",
                "skipping ratio",
            ],
            part_rows,
        )
        + "<h2>Rows per partition</h2>"
        + commit
        + "</div></div>"
        + "<h2>Slices (partition, bucket)</h2>"
        f'<p class="sub">A pruned slice names its step ({steps}) and the predicate term that '
        "ruled it out.</p>"
        + note
        + _table(
            "slices",
            ["partition", "bucket", "verdict", "why", "data files kept", "bytes kept"],
            slice_rows,
        )
        + f'<script type="application/json" id="{_DATA_ID}">{data}</script>'
        "</body></html>"
    )
