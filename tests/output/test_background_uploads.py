"""BackgroundUpload (output/background_uploads.py) on a real local file whose writes are held:
the writer goes on until ``max_waiting`` bytes wait, then waits; every byte lands in order."""

from __future__ import annotations

import threading
import time

import pytest

from airflow_provider_acid.output.background_uploads import (
    BackgroundUpload,
    uploads_in_background,
)

MIB = 1024 * 1024


class HeldFile:
    """A real file whose writes wait until ``release`` is set (a store slow to answer)."""

    def __init__(self, path) -> None:
        self._file = open(path, "wb")  # noqa: SIM115 - closed by close()
        self.release = threading.Event()
        self.writes: list[int] = []
        self.closed = False

    def write(self, data: bytes) -> int:
        self.release.wait(timeout=30)
        self.writes.append(len(data))
        return self._file.write(data)

    def close(self) -> None:
        self._file.close()
        self.closed = True

    def discard(self) -> None:
        self._file.close()


def _handed(upload: BackgroundUpload, chunks: list[bytes], done: list[int]) -> None:
    for chunk in chunks:
        upload.write(chunk)
        done.append(len(chunk))


@pytest.mark.parametrize("max_waiting_mib", [3, 8])
def test_the_writer_waits_only_past_max_waiting_bytes(tmp_path, max_waiting_mib):
    chunks = [bytes([n]) * MIB for n in range(12)]
    inner = HeldFile(tmp_path / "part")
    upload = BackgroundUpload(inner, max_waiting=max_waiting_mib * MIB)
    done: list[int] = []
    writer = threading.Thread(target=_handed, args=(upload, chunks, done))
    writer.start()
    time.sleep(0.5)  # the store holds every write: the writer stops at the bound
    # max_waiting bytes handed over (the chunk being written included), no more
    assert len(done) == max_waiting_mib, len(done)
    inner.release.set()
    writer.join(timeout=30)
    assert len(done) == len(chunks)
    with uploads_in_background():
        upload.close()  # completes on the upload thread; the block waits for it
    assert inner.closed
    assert (tmp_path / "part").read_bytes() == b"".join(chunks)


def test_small_writes_are_handed_on_a_mib_at_a_time(tmp_path):
    """The Parquet writer writes a page at a time: the upload thread gets them gathered, a MiB
    at a time (one wake-up each), not one hand-over per write."""
    inner = HeldFile(tmp_path / "part")
    inner.release.set()
    upload = BackgroundUpload(inner, hand_bytes=MIB)
    pages = [bytes([n % 251]) * 10_000 for n in range(1_000)]  # 10 MB in writes of 10 kB
    for page in pages:
        assert upload.write(memoryview(page)) == len(page)
    assert upload.tell() == 10_000_000
    upload.close()
    assert len(inner.writes) == 10  # 9 of at least a MiB, then the rest at the close
    assert all(size >= MIB for size in inner.writes[:-1]) and sum(inner.writes) == 10_000_000
    assert (tmp_path / "part").read_bytes() == b"".join(pages)
