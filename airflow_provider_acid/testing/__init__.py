"""Generators of real Hive 3 ACID tables (ORC) and of the rows a correct reader must return.

Used by the demo, the benchmarks and differential tests. Nothing here imports Airflow.

:class:`AcidTableWriter` simulates Hive writing one table; :func:`generate_demo_table` writes the
demo table with it. The parts, one idea each:

* :mod:`.table_writer`: the simulator (statements, transactions), over
  :mod:`.write_history` (write ids, open/aborted writes), :mod:`.row_history` (the rows a reader
  must see), :mod:`.table_layout` (partitions and their folders), :mod:`.table_columns`
  (columns, input rows), :mod:`.table_files` (bucket files) and :mod:`.compaction`;
* the file format: :mod:`.acid_format` (event schema, metadata, bucket field),
  :mod:`.acid_layout` (folder and file names), :mod:`.bucketing` (Hive's bucketing hash);
* ORC: :mod:`.orc_types` (Hive types as ORC and Arrow types), :mod:`.orc_writer`,
  :mod:`.orc_values` (values for pyorc), :mod:`.orc_footer` (user metadata);
* :mod:`.demo_table`.
"""

from __future__ import annotations

from .demo_table import generate_demo_table
from .table_writer import AcidTableWriter

__all__ = ["AcidTableWriter", "generate_demo_table"]
