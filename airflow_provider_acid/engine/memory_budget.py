"""The memory budget of one bucket's delete keys: fail with a clear error, not the OOM killer.

A bucket's delete keys are held in memory for its anti-join (:mod:`.delete_keys`). Building
the set costs more than holding it: the rowIds as read, their concatenation, the sort and the
de-duplication are alive at once for the largest ``(originalTransaction, bucket)`` group.
:data:`PEAK_BYTES_PER_KEY` bounds that peak per key: ``benchmarks/delete_keys.py`` measures
12.7 bytes a key of peak RSS (a compaction with 20 million delete keys minus the same
compaction without them) on delete events in Hive's order, and events out of order cost up to
24 bytes a key more while they are sorted (Arrow's pool peak), so the bound is 48 with a margin.
:func:`within_budget` counts the keys as the delete deltas are read and
raises :class:`DeleteKeyBudgetError`, naming the slice and the budget, as soon as the keys read
so far would need more than the budget: before they are all in memory, so the process is
never the one the kernel kills.

The budget is per bucket being compacted (``max_workers`` buckets run at once):
``ACID_DELETE_KEY_BUDGET`` (bytes, or with a unit: ``512MiB``, ``4GiB``), else an eighth of the
memory the process may use (the cgroup limit when there is one, else the physical memory).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

from ..acid.rows import DeleteBatch

#: Bytes per delete key assumed at the peak of building a bucket's set (see above).
PEAK_BYTES_PER_KEY = 48
BUDGET_VARIABLE = "ACID_DELETE_KEY_BUDGET"
_UNITS = {"": 1, "b": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40}
_UNITS.update({"kb": 1000, "mb": 1000**2, "gb": 1000**3, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30})


class DeleteKeyBudgetError(RuntimeError):
    """A bucket's delete keys need more memory than the delete-key budget allows."""


def parse_size(text: str) -> int:
    """``"4GiB"``, ``"512 MiB"``, ``"1000000"`` as bytes; a ValueError naming the text."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", text)
    unit = match[2].lower() if match else ""
    if match is None or unit not in _UNITS:
        raise ValueError(
            f"{BUDGET_VARIABLE}={text!r}: not a size (bytes, or a number with KiB, MiB, GiB)"
        )
    return int(float(match[1]) * _UNITS[unit])


def memory_limit() -> int:
    """Bytes this process may use: the cgroup (v2 or v1) limit if set, else physical memory."""
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = Path(path).read_text().strip()
        except OSError:
            continue
        if text.isdigit() and 0 < int(text) < physical:
            return int(text)
    return physical


def delete_key_budget() -> int:
    """The delete-key budget of one bucket, in bytes (see the module docstring)."""
    given = os.environ.get(BUDGET_VARIABLE, "").strip()
    return parse_size(given) if given else memory_limit() // 8


def _size(n: int) -> str:
    return f"{n / (1 << 20):,.0f} MiB" if n < 10 << 30 else f"{n / (1 << 30):,.1f} GiB"


def within_budget(batches: Iterable[DeleteBatch], budget: int, where: str) -> Iterator[DeleteBatch]:
    """``batches``, raising :class:`DeleteKeyBudgetError` once the keys read would need more
    than ``budget`` bytes to build the set (``where`` names the slice in the message)."""
    keys = 0
    for batch in batches:
        keys += len(batch.row_id)
        need = keys * PEAK_BYTES_PER_KEY
        if need > budget:
            raise DeleteKeyBudgetError(
                f"{where}: its delete deltas hold at least {keys:,} delete keys, which need "
                f"about {_size(need)} to build (~{PEAK_BYTES_PER_KEY} bytes a key), over the "
                f"delete-key memory budget of {_size(budget)} per bucket. Set "
                f"{BUDGET_VARIABLE} higher (bytes or e.g. 8GiB) on a worker with that much "
                "memory, compact fewer buckets at once (max_workers), or run a major "
                "compaction of the table in Hive first"
            )
        yield batch
