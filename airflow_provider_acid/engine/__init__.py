"""What uses the three sides below it (the Hive side ``acid/`` and ``metastore/``, ``pruning/``
and ``output/``): the snapshot plan, the per-bucket anti-join of compaction and its delete keys,
the glue between a slice manifest and a compaction, the source a step reads, and the watermark
of the last committed snapshot. The Airflow layer and the CLI call into here.

Nothing below imports this package; see ``docs/layout.md`` for the layers.
"""
