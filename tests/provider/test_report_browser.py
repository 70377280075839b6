"""The pruning report of a dag.test() run, rendered by a real browser: Debian's Chromium,
headless (installed by ``make chromium``, a prerequisite of ``make test``; this test runs that
target itself when chromium is missing, and skips, saying why, only if it cannot install it).

``chromium --dump-dom`` gives the DOM the browser built from the page; its figures are
compared with the manifest's and the committed snapshot's. ``--screenshot`` takes the picture
the README shows (set ``ACID_REPORT_SCREENSHOT=docs/pruning-report.png`` to store it there).
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import tempfile
import time
import zlib
from collections import defaultdict
from html.parser import HTMLParser
from pathlib import Path

import pytest
from test_pruning_report import ReportRun, run_with_report

from airflow_provider_acid.output import latest_snapshot
from airflow_provider_acid.pruning.manifest_files import read_manifest
from airflow_provider_acid.pruning.report import PruningReport, ReportSlice, write_report
from airflow_provider_acid.pruning.report_page import MAX_SLICE_ROWS

REPO = Path(__file__).resolve().parents[2]
#: the flags a headless Chromium needs on this closed network (no sandbox: root in a container)
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def find_chromium() -> str | None:
    return shutil.which("chromium") or (
        "/usr/bin/chromium" if os.access("/usr/bin/chromium", os.X_OK) else None
    )


@pytest.fixture(scope="module")
def chromium() -> str:
    found = find_chromium()
    if found is None:
        done = subprocess.run(
            ["make", "-C", str(REPO), "chromium"], capture_output=True, text=True, timeout=1200
        )
        found = find_chromium()
        if found is None:
            pytest.skip(
                "chromium is not installed and `make chromium` could not install it: "
                + (done.stdout + done.stderr).strip()[-500:]
            )
    return found


def browse(chromium: str, *args: str) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory(prefix="acid-chromium-") as profile:
        done = subprocess.run(
            [chromium, *FLAGS, f"--user-data-dir={profile}", *args],
            capture_output=True,
            text=True,
            timeout=180,
        )
    assert done.returncode == 0, done.stderr[-2000:]
    return done


class Dom(HTMLParser):
    """The parts of the dumped DOM the test reads: elements by id, table cells by row, and
    the chart's bars."""

    def __init__(self) -> None:
        super().__init__()
        self.by_id: dict[str, dict[str, str]] = {}
        self.text: dict[str, str] = {}
        self.tables: dict[str, list[dict[str, tuple[str, str]]]] = defaultdict(list)
        self.bars: list[dict[str, str]] = []
        self.rects: list[dict[str, str]] = []
        self._table: str | None = None
        self._cell: tuple[str, str] | None = None
        self._open: list[str] = []
        self._text: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = {k: v or "" for k, v in attrs}
        if "id" in a:
            self.by_id[a["id"]] = a
        if tag == "table":
            self._table = a.get("id")
        elif tag == "tr" and self._table and ("data-partition" in a or "data-step" in a):
            self.tables[self._table].append({})
        elif tag == "td" and self._table and self.tables[self._table]:
            self._cell = (a["data-field"], a["data-value"])
            self._text = []
        elif tag == "g" and a.get("class") == "bar":
            self.bars.append(a)
        elif tag == "rect" and self.bars and len(self.rects) < len(self.bars):
            self.rects.append(a)
        if tag == "div" and a.get("class") == "card":
            self._open.append(a["id"])
            self._text = []

    def handle_data(self, data):
        self._text.append(data)

    def handle_endtag(self, tag):
        if tag == "td" and self._cell is not None:
            field, value = self._cell
            self.tables[self._table][-1][field] = (value, "".join(self._text))
            self._cell = None
        elif tag == "table":
            self._table = None
        elif tag == "div" and self._open and self.by_id.get(self._open[-1]):
            # a card's text: its value and its label
            self.text.setdefault(self._open[-1], "".join(self._text))


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">II", data[16:24])


def png_pixels(data: bytes) -> bytes:
    """The PNG's decompressed scanlines (filter bytes included)."""
    pos, chunks = 8, []
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        if kind == b"IDAT":
            chunks.append(data[pos + 8 : pos + 8 + length])
        pos += 12 + length
    return zlib.decompress(b"".join(chunks))


@pytest.fixture(scope="module")
def report_run(airflow_db, tmp_path_factory) -> ReportRun:
    return run_with_report(tmp_path_factory.mktemp("browser"), dag_id="acid_report_browser")


def test_chromium_renders_the_report_with_the_manifests_figures(chromium, report_run, tmp_path):
    url = report_run.report_path.as_uri()
    dom = Dom()
    dom.feed(browse(chromium, "--dump-dom", url).stdout)
    manifest = read_manifest(report_run.summary["manifest_uri"])
    m = manifest.metrics

    # the summary cards: the manifest's metrics, as numbers and as text
    for field in ("slices_kept", "files_candidate", "bytes_kept", "partitions_kept"):
        assert int(dom.by_id[f"metric-{field}"]["data-value"]) == getattr(m, field)
    for field in ("slices_total", "files_total", "bytes_total", "partitions_total"):
        assert int(dom.by_id[f"metric-{field}"]["data-value"]) == getattr(m, field)
    assert float(dom.by_id["metric-skipping_ratio"]["data-value"]) == pytest.approx(
        m.skipping_ratio, abs=1e-6
    )
    assert dom.text["metric-slices_kept"].startswith(f"{m.slices_kept:,} / {m.slices_total:,}")
    assert f"{100 * m.skipping_ratio:.1f}%" in dom.text["metric-skipping_ratio"]

    # per partition: the manifest's verdicts and kept files, added up here independently
    expected: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for v in manifest.verdicts:
        expected[v.partition]["data_files"] += v.data_files
        expected[v.partition]["size"] += v.size
    for s in manifest.slices:
        data = [f for f in s.files if f.role != "delete_delta"]
        expected[s.partition]["candidates"] += sum(f.candidate for f in data)
        expected[s.partition]["bytes_kept"] += sum(f.size for f in s.files)
    shown = {row["partition"][0]: row for row in dom.tables["partitions"]}
    assert set(shown) == set(expected)
    for partition, figures in expected.items():
        for field in ("data_files", "size", "candidates", "bytes_kept"):
            assert int(shown[partition][field][0]) == figures[field], (partition, field)
        assert shown[partition]["candidates"][1] == f"{figures['candidates']:,}"

    # the chart: one bar per partition, its height the partition's skipping ratio
    assert [b["data-partition"] for b in dom.bars] == list(shown)
    for bar, rect in zip(dom.bars, dom.rects, strict=True):
        figures = expected[bar["data-partition"]]
        ratio = 1 - figures["candidates"] / figures["data_files"]
        assert float(bar["data-ratio"]) == pytest.approx(ratio, abs=1e-6)
        assert float(rect["height"]) == pytest.approx(180 * ratio, abs=0.06)

    # every slice once, with its verdict and its reason as the manifest recorded them
    slices = dom.tables["slices"]
    assert len(slices) == len(manifest.verdicts) == m.slices_total
    for row, verdict in zip(slices, manifest.verdicts, strict=True):
        assert row["partition"][0] == verdict.partition
        assert int(row["bucket"][0]) == verdict.bucket
        assert row["verdict"][0] == verdict.step
        assert row["reason"][0] == verdict.reason
        assert row["verdict"][1] == ("kept" if verdict.kept else f"pruned ({verdict.step})")

    # after the commit: rows per partition as the snapshot's manifest records them
    snapshot = latest_snapshot(str(report_run.out))
    assert dom.by_id["snapshot-id"] is not None
    rows: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for b in snapshot.buckets:
        for field in ("rows_read", "rows_deleted", "rows_filtered", "rows_written"):
            rows[b.partition][field] += getattr(b, field)
    got = {
        r["partition"][0]: {k: int(v[0]) for k, v in r.items() if k != "partition"}
        for r in dom.tables["rows"]
    }
    assert got == {p: dict(v) for p, v in rows.items()}

    # and a picture of it, as a reader sees it
    shot = tmp_path / "pruning-report.png"
    browse(chromium, f"--screenshot={shot}", "--window-size=1200,900", url)
    data = shot.read_bytes()
    assert png_size(data) == (1200, 900)
    assert len(set(png_pixels(data))) > 16  # not a blank page
    target = os.environ.get("ACID_REPORT_SCREENSHOT")
    if target:
        shutil.copyfile(shot, REPO / target)


def large_report(partitions: int, buckets: int) -> PruningReport:
    """A report of ``partitions x buckets`` slices: one bucket in four kept, the others pruned
    by bucket or by statistics, with figures that differ slice by slice."""
    slices = []
    for p in range(partitions):
        for b in range(buckets):
            step = "kept" if b == p % buckets else ("bucket" if b % 2 else "statistics")
            files = 1 + (p + b) % 3
            size = 1000 * files + p
            kept = step == "kept"
            reason = "" if kept else ("id = 7" if step == "bucket" else "amount > 100")
            slices.append(
                ReportSlice(
                    f"dt=2024-01-01/h={p:05d}",
                    b,
                    step,
                    reason,
                    files,
                    files if kept else 0,
                    files if kept else 0,
                    size,
                    size if kept else 0,
                )
            )
    n_kept = sum(s.kept for s in slices)
    metrics = {
        "slices_total": len(slices),
        "slices_kept": n_kept,
        "files_total": sum(s.data_files for s in slices),
        "files_candidate": sum(s.candidates for s in slices),
        "bytes_total": sum(s.size for s in slices),
        "bytes_kept": sum(s.bytes_kept for s in slices),
        "skipping_ratio": 0.75,
        "partitions_total": partitions,
        "partitions_kept": partitions,
    }
    return PruningReport(
        table="/data/sales",
        table_name="sales.orders",
        predicate="id = 7 AND amount > 100",
        write_ids="sales.orders:9:9223372036854775807::",
        created_at="2026-12-01T00:00:00+00:00",
        manifest_uri="/out/_manifests/run.json",
        metrics=metrics,
        slices=tuple(slices),
    )


def test_a_report_of_10000_slices_is_capped_under_a_summary(chromium, tmp_path):
    """10,000 slices: the slice table shows the first kept ones, a summary per verdict counts
    them all, and the page stays small. The render time in Chromium is printed (beside a
    16-slice page's, measured in the same run), not asserted."""
    report = large_report(2_500, 4)
    page = tmp_path / "large.html"
    write_report(report, str(page))
    size = page.stat().st_size
    assert size < 800_000, size  # uncapped (every slice, partition and bar) it is 8.1 MB
    dom = Dom()
    started = time.perf_counter()
    dom.feed(browse(chromium, "--dump-dom", page.as_uri()).stdout)
    seconds = time.perf_counter() - started
    slices = dom.tables["slices"]
    assert len(slices) == MAX_SLICE_ROWS
    kept = [s for s in report.slices if s.kept]
    assert [(r["partition"][0], int(r["bucket"][0])) for r in slices] == [
        (s.partition, s.bucket) for s in kept[:MAX_SLICE_ROWS]
    ]
    capped = dom.by_id["slices-capped"]
    assert (capped["data-shown"], capped["data-total"]) == (str(MAX_SLICE_ROWS), "10000")
    verdicts = {r["verdict"][0]: int(r["slices"][0]) for r in dom.tables["verdicts"]}
    assert verdicts == {"kept": 2_500, "bucket": 3_750, "statistics": 3_750}
    assert sum(verdicts.values()) == len(report.slices) == 10_000
    files = {r["verdict"][0]: int(r["data_files"][0]) for r in dom.tables["verdicts"]}
    for step, count in files.items():
        assert count == sum(s.data_files for s in report.slices if s.step == step)
    assert len(dom.tables["partitions"]) < 2_500 and "partitions-capped" in dom.by_id
    # the page's data still holds every slice: the commit step reads it back whole
    from airflow_provider_acid.pruning.report import read_report

    assert read_report(str(page)).slices == report.slices

    small = tmp_path / "small.html"
    write_report(large_report(4, 4), str(small))
    started = time.perf_counter()
    browse(chromium, "--dump-dom", small.as_uri())
    reference = time.perf_counter() - started
    print(
        f"\n10,000-slice report: {size:,} bytes, rendered by Chromium in {seconds:.2f} s "
        f"(a 16-slice page: {small.stat().st_size:,} bytes, {reference:.2f} s; "
        f"ratio {seconds / reference:.2f})"
    )
