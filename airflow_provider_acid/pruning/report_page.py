"""The pruning report's page: HTML and inline SVG, no script, nothing fetched.

For a large table the page stays small: the partitions table and chart show at most
:data:`MAX_PARTITION_ROWS` / :data:`MAX_CHART_BARS` partitions and the slice table at most
:data:`MAX_SLICE_ROWS` slices (the kept ones first), under a summary of every slice per
verdict; the note above each capped table says how many are not shown. Every slice is still in
the page's data block (what the commit step reads back).
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable, Sequence
from typing import Any

from .explain import KEPT, STEPS

# A report (report.PruningReport) and its partitions (report.PartitionSummary) are read by
# their attributes only: report.py imports this module, not the other way round.
PruningReport = Any
PartitionSummary = Any

DATA_ID = "acid-report-data"
MAX_SLICE_ROWS = 500
MAX_PARTITION_ROWS = 200
MAX_CHART_BARS = 60

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
    width = left + max(1, min(len(parts), MAX_CHART_BARS)) * (bar + gap) + gap
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
    for i, p in enumerate(parts[:MAX_CHART_BARS]):
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
        for p in parts[:MAX_PARTITION_ROWS]
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
        for s in _shown_slices(report.slices)
    ]
    if report.commit_error is not None:
        commit = (
            f'<p id="commit-failed" class="warn">The commit failed: {_e(report.commit_error)}</p>'
        )
    elif report.rows is None:
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
        + _capped("partitions-capped", len(part_rows), len(parts), "partitions")
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
        + _verdicts(report.slices)
        + _capped("slices-capped", len(slice_rows), len(report.slices), "slices, kept first")
        + _table(
            "slices",
            ["partition", "bucket", "verdict", "why", "data files kept", "bytes kept"],
            slice_rows,
        )
        + f'<script type="application/json" id="{DATA_ID}">{data}</script>'
        "</body></html>"
    )


def _shown_slices(slices: Sequence[Any]) -> list[Any]:
    """Every slice in the snapshot's order; more than :data:`MAX_SLICE_ROWS`, the first of
    them: the kept ones first, then the pruned, each in the snapshot's order."""
    if len(slices) <= MAX_SLICE_ROWS:
        return list(slices)
    kept = [s for s in slices if s.kept][:MAX_SLICE_ROWS]
    return kept + [s for s in slices if not s.kept][: MAX_SLICE_ROWS - len(kept)]


def _capped(element_id: str, shown: int, total: int, what: str) -> str:
    if shown >= total:
        return ""
    return (
        f'<p class="warn" id="{element_id}" data-shown="{shown}" data-total="{total}">'
        f"Showing {_n(shown)} of {_n(total)} {_e(what)}; the summary counts them all, and the "
        "manifest lists every kept slice.</p>"
    )


def _verdicts(slices: Sequence[Any]) -> str:
    """Every slice counted per verdict: slices, data files, bytes."""
    totals: dict[str, list[int]] = {}
    for s in slices:
        row = totals.setdefault(s.step, [0, 0, 0])
        row[0] += 1
        row[1] += s.data_files
        row[2] += s.size
    order = [step for step in STEPS if step in totals] + sorted(set(totals) - set(STEPS))
    rows = [
        f'<tr data-step="{_e(step)}">'
        + _cells(
            [
                ("verdict", step, "kept" if step == KEPT else f"pruned ({step})"),
                ("slices", totals[step][0], _n(totals[step][0])),
                ("data_files", totals[step][1], _n(totals[step][1])),
                ("size", totals[step][2], _bytes(totals[step][2])),
            ]
        )
        + "</tr>"
        for step in order
    ]
    return _table("verdicts", ["verdict", "slices", "data files", "bytes"], rows)
