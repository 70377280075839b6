"""Micro-benchmark of the pruning core: stats pivot and vectorised might_match.

    python benchmarks/evaluator.py --files 100000

Builds synthetic per-file statistics (sorted int ranges, dates, strings, doubles with
unknown NaN counts) for N files, pivots them into the stats table the index returns and
times :func:`might_match` for a few predicates, reporting how many files each keeps.
"""

from __future__ import annotations

import argparse
import datetime as dt
import random
import time

import pyarrow as pa

from airflow_provider_acid.pruning import (
    ColumnStats,
    FileStats,
    bind,
    might_match,
    parse_sql_where,
    read_file_stats_table,
    referenced_columns,
)

SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("day", pa.date32()),
        ("country", pa.string()),
        ("amount", pa.float64()),
    ]
)
PREDICATES = [
    "id = 123456",
    "id BETWEEN 5000 AND 7000 AND country = 'FR'",
    "day >= '2024-03-01' AND amount > 100",
    "country LIKE 'D%' OR id IN (1, 2, 3, 99999)",
    "NOT (day < '2024-06-01') AND amount IS NOT NULL",
    "id IN (" + ", ".join(str(v) for v in range(0, 2_000_000, 7_000)) + ")",
]


def synthetic_stats(n: int, seed: int = 1) -> list[FileStats]:
    rng = random.Random(seed)
    countries = ["AT", "BE", "DE", "DK", "ES", "FR", "IT", "NL", "PL", "SE"]
    out = []
    for i in range(n):
        rows = rng.randint(0, 50_000)
        day = dt.date(2024, 1, 1) + dt.timedelta(days=i * 365 // n)
        lo_c, hi_c = sorted(rng.sample(countries, 2))
        amount = sorted(rng.uniform(0, 500) for _ in range(2))
        cols = {
            "id": ColumnStats("id", i * 20, i * 20 + 19, 0, rows, None, pa.int64()),
            "day": ColumnStats("day", day, day + dt.timedelta(days=2), 0, rows, None, pa.date32()),
            "country": ColumnStats("country", lo_c, hi_c, 0, rows, None, pa.string()),
            "amount": ColumnStats(
                "amount", amount[0], amount[1], rng.randint(0, 5), rows, None, pa.float64()
            ),
        }
        out.append(FileStats(f"s3://bucket/t/delta_{i}/bucket_00000", "orc", rows, cols))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=100_000)
    args = parser.parse_args()

    t0 = time.perf_counter()
    stats = synthetic_stats(args.files)
    t1 = time.perf_counter()
    table = read_file_stats_table(stats, SCHEMA.names)
    t2 = time.perf_counter()
    print(f"{args.files} files: synthetic stats {t1 - t0:.2f}s, pivot {t2 - t1:.2f}s")
    for text in PREDICATES:
        expr = bind(parse_sql_where(text), SCHEMA)
        sub = table.select(
            ["path", "row_count"]
            + [
                f"{c}__{k}"
                for c in referenced_columns(expr)
                for k in ("min", "max", "nulls", "values", "nans")
            ]
        )
        start = time.perf_counter()
        keep = might_match(expr, sub, SCHEMA)
        took = time.perf_counter() - start
        label = text if len(text) < 60 else text[:57] + "..."
        print(f"{took * 1000:8.1f} ms  keeps {keep.true_count:>7}/{len(keep)}  {label}")


if __name__ == "__main__":
    main()
