"""Progress of ``airflow-acid compact`` on a terminal, and nothing anywhere else.

One line on stderr, rewritten in place (``\\r``) after each bucket::

    buckets 3/8  rows 1,234,567  12.3 MB/s

``rows`` counts the rows read from the table's files so far, ``MB/s`` the Parquet bytes written
per second since the compaction started. The line is drawn only when stderr is a terminal and
``--quiet`` is not given: pipes, files and CI logs get no control characters. stdout (the
summary or ``--json``) is never touched.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    from types import TracebackType

    from .output import BucketResult


def is_terminal(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def format_rate(bytes_per_second: float) -> str:
    """``12.3 MB/s`` (decimal units, like the sizes storage consoles show)."""
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if bytes_per_second >= size:
            return f"{bytes_per_second / size:.1f} {unit}/s"
    return f"{bytes_per_second:.0f} B/s"


class ProgressLine:
    """A progress callback for ``compact_table`` that draws one line in place on a terminal.

    Use as a context manager: leaving it ends the line (also on an error, so that the error
    message starts on a line of its own). Redraws at most every ``min_interval`` seconds,
    except for the last bucket, which is always shown.
    """

    def __init__(
        self,
        stream: IO[str] | None = None,
        *,
        enabled: bool | None = None,
        min_interval: float = 0.1,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = is_terminal(self.stream) if enabled is None else enabled
        self.min_interval = min_interval
        self.clock = clock
        self.started = clock()
        self.rows = 0
        self.bytes_written = 0
        self.done = 0
        self.total = 0
        self._drawn_at: float | None = None
        self._width = 0

    def __call__(self, result: BucketResult, done: int, total: int) -> None:
        self.rows += result.rows_read
        self.bytes_written += sum(f.size for f in result.files)
        self.done, self.total = done, total
        if not self.enabled:
            return
        now = self.clock()
        if done < total and self._drawn_at is not None and now - self._drawn_at < self.min_interval:
            return
        self._draw(now)

    def line(self, now: float | None = None) -> str:
        elapsed = max((self.clock() if now is None else now) - self.started, 1e-9)
        return (
            f"buckets {self.done}/{self.total}  rows {self.rows:,}  "
            f"{format_rate(self.bytes_written / elapsed)}"
        )

    def _draw(self, now: float) -> None:
        text = self.line(now)
        padding = " " * max(0, self._width - len(text))  # wipe what a longer line left
        self.stream.write(f"\r{text}{padding}")
        self.stream.flush()
        self._width = len(text)
        self._drawn_at = now

    def close(self) -> None:
        """End the line, if one was drawn (idempotent)."""
        if self._drawn_at is not None:
            self.stream.write("\n")
            self.stream.flush()
            self._drawn_at = None
            self._width = 0

    def __enter__(self) -> ProgressLine:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


def progress_line(quiet: bool, stream: IO[str] | None = None) -> ProgressLine:
    """The CLI's reporter: drawing only on a terminal and without ``--quiet``."""
    stream = stream if stream is not None else sys.stderr
    return ProgressLine(stream, enabled=not quiet and is_terminal(stream))


__all__ = ["ProgressLine", "format_rate", "is_terminal", "progress_line"]
