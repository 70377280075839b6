"""The Arrow memory pool of a process that reads and writes rows: jemalloc where pyarrow has it.

pyarrow's default pool is mimalloc. The version Arrow bundles keeps the pages of freed
buffers (microsoft/mimalloc#1111 reports a peak-RSS regression of it): a compaction frees each
decoded stripe and encoded row group, often on other threads than the ones that allocated
them, and the pages pile up. Measured with ``benchmarks/s3.py``'s table (4M rows, 4 buckets,
one worker), the local compaction's peak RSS is 282 MiB with mimalloc and 225 MiB with
jemalloc, at about the same speed (``benchmarks/compaction.py``, with snappy, finds it 1 to 2%
slower). On S3 mimalloc needed its unused memory released every two batches to stay under
300 MiB a worker (``compaction.RELEASE_EVERY_BATCHES``), and those releases cost page faults:
0.15 to 0.3 s of a 2.6 s compaction. jemalloc, whose freed pages go back to the system on
their own, kept the same RSS without that cost.

:func:`use_worker_memory_pool` makes jemalloc the process's default pool. The CLI calls it,
and so do the operators that read or write rows, each in its task's own process. A program
that calls the library directly may call it once at its start. It changes nothing when
``ARROW_DEFAULT_MEMORY_POOL`` names a pool (whoever runs the process chose), nor where pyarrow
is built without jemalloc (its wheels for macOS and Windows). The system allocator is not
used instead: glibc's was 10% slower on S3 here (page faults on its large allocations).
"""

from __future__ import annotations

import os

import pyarrow as pa

#: The environment variable by which pyarrow takes its default pool from whoever runs it.
POOL_VARIABLE = "ARROW_DEFAULT_MEMORY_POOL"


def use_worker_memory_pool() -> str:
    """Make jemalloc this process's default Arrow memory pool, unless ``ARROW_DEFAULT_MEMORY_POOL``
    chose one or pyarrow has no jemalloc; returns the name of the default pool now in use.

    Buffers allocated before keep their own pool, so it is safe to call at any time; it is
    meant for the start of a process (or an Airflow task) that compacts or computes changes.
    """
    if not os.environ.get(POOL_VARIABLE, "").strip():
        try:
            pa.set_memory_pool(pa.jemalloc_memory_pool())
        except NotImplementedError:  # a pyarrow built without jemalloc: keep its default
            pass
    return pa.default_memory_pool().backend_name
