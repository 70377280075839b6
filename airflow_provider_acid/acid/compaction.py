"""Deprecated: compaction moved to :mod:`airflow_provider_acid.engine.compaction`.

It uses all three sides (the Hive side, pruning and output), so it left ``acid/`` for the
``engine/`` package above them. This module keeps the old import path working for one release;
it warns on import. See ``docs/layout.md``.
"""

from __future__ import annotations

import warnings

from ..engine.compaction import *  # noqa: F403
from ..engine.compaction import __all__  # noqa: F401

warnings.warn(
    "airflow_provider_acid.acid.compaction is deprecated: import from "
    "airflow_provider_acid.engine.compaction",
    DeprecationWarning,
    stacklevel=2,
)
