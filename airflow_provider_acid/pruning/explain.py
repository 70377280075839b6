"""Why each slice was kept or pruned: the verdicts behind a manifest, for the pruning report.

A slice (partition, bucket) is ruled out at one of three steps of
:func:`~airflow_provider_acid.pruning.manifest.build_manifest`, and the verdict names it:

* ``partition``: the partition's values cannot match;
* ``bucket``: Hive's bucketing hash puts every matching row in other buckets;
* ``statistics``: no data file's column statistics can hold a matching row;
* ``empty``: the slice has no data file (only delete deltas).

The *reason* is the predicate term that rules the slice out: the first top-level conjunct of
the (bound, normalised) predicate that, evaluated alone, rules out the partition or every data
file of the slice. When no single term does (an OR, or files ruled out by different terms)
the reason is the whole predicate.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from .expressions import And, Expr, to_sql

KEPT = "kept"
PARTITION = "partition"
BUCKET = "bucket"
STATISTICS = "statistics"
EMPTY = "empty"
STEPS = (KEPT, PARTITION, BUCKET, STATISTICS, EMPTY)


@dataclass(frozen=True)
class SliceVerdict:
    """One slice of the snapshot: kept, or the step and the term that pruned it.

    ``data_files`` counts its originals, base and delta files (as the metrics'
    ``files_total`` does); ``size`` is every file's bytes, delete deltas included (as
    ``bytes_total``)."""

    key: str
    partition: str
    bucket: int
    data_files: int
    size: int
    step: str
    reason: str = ""

    @property
    def kept(self) -> bool:
        return self.step == KEPT

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "partition": self.partition,
            "bucket": self.bucket,
            "data_files": self.data_files,
            "size": self.size,
            "step": self.step,
            "reason": self.reason,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SliceVerdict:
        return cls(
            key=data["key"],
            partition=data["partition"],
            bucket=int(data["bucket"]),
            data_files=int(data["data_files"]),
            size=int(data["size"]),
            step=data["step"],
            reason=data.get("reason", ""),
        )


def conjuncts(expr: Expr) -> tuple[Expr, ...]:
    """The top-level terms of an AND (the expression itself otherwise)."""
    return tuple(expr.children) if isinstance(expr, And) else (expr,)


def ruling_terms(
    expr: Expr,
    evaluate: Callable[[Expr], Any],
    owners: pa.Array,
    n_owners: int,
) -> list[str | None]:
    """For each owner ``0 .. n_owners-1`` (a partition, a slice), the SQL of the first
    conjunct of ``expr`` that rules out every row it owns; None where none does alone.

    ``evaluate(term)`` gives, per row, whether the row might match ``term``; ``owners[i]`` is
    row i's owner. Owners without rows get None."""
    found: list[str | None] = [None] * n_owners
    if not len(owners):
        return found
    owned = set(pc.unique(owners).to_pylist())
    for term in conjuncts(expr):
        mask = evaluate(term)
        mask = pa.array(mask, pa.bool_()) if not isinstance(mask, pa.Array) else mask
        table = pa.table({"owner": owners, "might": pc.fill_null(mask, True)})
        grouped = table.group_by("owner").aggregate([("might", "any")])
        sql = to_sql(term)
        for owner, might in zip(
            grouped.column("owner").to_pylist(),
            grouped.column("might_any").to_pylist(),
            strict=True,
        ):
            if not might and found[owner] is None:
                found[owner] = sql
        if all(found[o] is not None for o in owned):
            break
    return found


def explain_slices(
    expr: Expr,
    parts: Sequence[Any],
    part_kept: Sequence[bool],
    buckets: frozenset[int] | None,
    collected: pa.Array,
    n_collected: int,
    kept_collected: pa.Array,
    row_counts: pa.Array,
    might_files: Callable[[Expr], pa.Array],
    might_parts: Callable[[Expr], list[bool]],
) -> tuple[SliceVerdict, ...]:
    """Every slice's verdict, in the snapshot's order.

    ``parts`` are the snapshot's partitions and ``part_kept`` their verdicts on values;
    ``buckets`` the buckets the predicate allows (None: all). The *collected* slices (of kept
    partitions, in allowed buckets, in the snapshot's order; ``n_collected`` of them) have their
    data files evaluated: ``collected`` gives each such file its collected slice,
    ``kept_collected`` the collected slices kept, ``row_counts`` each file's rows (null:
    unknown). ``might_files(term)`` and ``might_parts(term)`` evaluate one term on the files
    and on the partitions."""
    whole = to_sql(expr)
    part_index = pa.array(range(len(parts)), pa.int64())
    ruled_out = [i for i, k in enumerate(part_kept) if not k]
    part_reasons = (
        ruling_terms(expr, lambda t: might_parts(t), part_index, len(parts)) if ruled_out else []
    )
    kept = set(kept_collected.to_pylist())
    stat_reasons: list[str | None] = []
    empty_files: set[int] = set()
    if len(collected) and len(kept) < n_collected:
        stat_reasons = ruling_terms(expr, might_files, collected, n_collected)
        nonzero = pc.fill_null(pc.not_equal(row_counts, 0), True)
        grouped = pa.table({"owner": collected, "rows": nonzero}).group_by("owner")
        summary = grouped.aggregate([("rows", "any")])
        empty_files = {
            o
            for o, any_rows in zip(
                summary.column("owner").to_pylist(),
                summary.column("rows_any").to_pylist(),
                strict=True,
            )
            if not any_rows
        }
    verdicts = []
    position = 0  # the next collected slice
    for i, (part, part_ok) in enumerate(zip(parts, part_kept, strict=True)):
        for s in part.slices:
            n_data = len(s.original_files) + len(s.base_files) + len(s.delta_files)
            size = sum(f.file.size for f in s.files)
            if not part_ok:
                step, reason = PARTITION, part_reasons[i] or whole
            elif buckets is not None and s.bucket_id not in buckets:
                allowed = ", ".join(str(b) for b in sorted(buckets)) or "none"
                step = BUCKET
                reason = f"{whole}: its values hash to bucket(s) {allowed} only"
            else:
                index, position = position, position + 1
                if index in kept:
                    step, reason = KEPT, ""
                elif not n_data:
                    step, reason = EMPTY, "no data file (delete deltas only)"
                elif index in empty_files:
                    step, reason = STATISTICS, "every data file holds 0 rows"
                else:
                    step = STATISTICS
                    reason = (stat_reasons[index] if index < len(stat_reasons) else None) or whole
            verdicts.append(
                SliceVerdict(s.key, part.partition.path, s.bucket_id, n_data, size, step, reason)
            )
    return tuple(verdicts)
