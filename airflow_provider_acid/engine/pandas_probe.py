"""Keep pyarrow from importing pandas into a process that reads and writes rows without it.

pyarrow imports pandas, when it is installed, at its first conversion of a Python value:
``pa.array`` of a list, ``pa.scalar``, a compute function given a Python number (it checks
whether the value is a pandas object, apache/arrow#34994). Nothing in this package uses pandas,
yet that import costs a worker about 43 MiB of RSS and 0.2 s. Measured with
``benchmarks/s3.py``'s table (4M rows, 4 buckets, one worker), the compaction's peak RSS was
226-228 MiB locally and 282-287 MiB on S3 with pandas imported, and 191-199 and 247-252 MiB
without, at the same speed.

:func:`keep_pandas_unimported` lets pyarrow's one check find no pandas, as where pandas is not
installed. pyarrow asks again, and imports it, when pandas is really used (``to_pandas``,
``Table.from_pandas``). Until then, the process behaves as pyarrow does without pandas:
``pa.array`` takes a pandas object as a plain sequence (a categorical becomes strings), and
``as_py()`` of a nanosecond timestamp that a ``datetime`` cannot hold raises. The package's
own code runs the same either way: its tests pass with pandas blocked from import, and
compaction, change feeds and manifests read sub-microsecond timestamps alike. (The test
simulator, :mod:`..testing`, needs pandas to delete rows holding such timestamps.)

The CLI calls it first, before any conversion: the process runs nothing else. The operators do
not: a task's process may run other code (``dag.test()`` runs a whole DAG in one) that passes
pandas objects to pyarrow. A program that calls the library directly may call it at its start.
"""

from __future__ import annotations

import sys
from importlib.machinery import ModuleSpec
from types import ModuleType

import pyarrow as pa


class _NoPandas:
    """A module finder that says pandas is not there (and leaves every other module alone)."""

    def find_spec(
        self, name: str, path: object = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


def keep_pandas_unimported() -> bool:
    """Let pyarrow's check for pandas find none, unless this process imported pandas already;
    returns whether pandas is left unimported.

    Call it at the start of a process, before pyarrow converts any Python value: once pyarrow
    has checked, it does not check again, and this changes nothing (pandas then stays imported).
    No other thread should import pandas meanwhile: for the time of pyarrow's check, an import
    of pandas fails.
    """
    if "pandas" in sys.modules:
        return False
    finder = _NoPandas()
    sys.meta_path.insert(0, finder)
    try:
        pa.scalar(0)  # pyarrow's first conversion checks for pandas, once for the process
    finally:
        sys.meta_path.remove(finder)
    return "pandas" not in sys.modules
