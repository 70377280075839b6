"""Byte-level mutations of the real Hive-written ORC fixture files, compacted.

One file of a fixture table (a copy) is truncated, has bits flipped, is emptied or gets wrong
magic; the table is then compacted. Each example must end one of two ways:

* the compaction commits, and the snapshot holds exactly the rows an independent read of the
  (mutated) files gives: every file read whole with ``pyarrow.orc``, row identities taken as
  Hive takes them, delete events applied (ORC has no checksums: a flipped bit in a value is a
  different value, which is what the file now says). A zero-length file is an empty file, as
  Hive reads it;
* or it fails with one of the provider's errors, naming the mutated file, and nothing is
  committed. Never another exception, a message-less one, or a hang (``conftest._no_hang``).
"""

from __future__ import annotations

import shutil
import tempfile
from collections import Counter
from pathlib import Path

import pyarrow.dataset as ds
import pyarrow.orc as pa_orc
import pytest
from hive_fixtures import arrange_fixture_table
from hypothesis import given
from hypothesis import strategies as st
from mutations import Mutation, fuzz_settings, mutate_file, mutations

from airflow_provider_acid.acid.evolution import EvolutionError
from airflow_provider_acid.acid.hive_types import HiveTypeError
from airflow_provider_acid.acid.read_view import AcidLayoutError, UnplacedFilesError
from airflow_provider_acid.acid.rows import AcidFormatError
from airflow_provider_acid.engine.compaction import compact_table
from airflow_provider_acid.output import CommitError, latest_snapshot

#: The provider's errors for bad table data.
CLEAR_ERRORS = (
    AcidFormatError,
    AcidLayoutError,
    UnplacedFilesError,
    EvolutionError,
    HiveTypeError,
    CommitError,
)
ACID = ("operation", "originaltransaction", "bucket", "rowid", "currenttransaction", "row")
TABLES = ("nation_originals", "dummy_id_data", "nation")


def v1(bucket: int) -> int:
    return (1 << 29) | (bucket << 16)


class Unreadable(Exception):
    """The independent read cannot read a file either."""


def _copy_number(name: str) -> int:
    return int(name.rsplit("_copy_", 1)[1]) if "_copy_" in name else 0


def independent_rows(table: Path) -> list[tuple]:
    """The snapshot's rows from a plain read of every file (the fixtures' layouts: original
    files at the root, one ACID insert delta, delete deltas), sorted."""
    rows: dict[tuple[int, int, int], tuple] = {}
    deleted: set[tuple[int, int, int]] = set()
    originals = sorted(
        (p for p in table.iterdir() if p.is_file()),
        key=lambda p: (p.name.split("_")[0], _copy_number(p.name)),
    )
    next_row: Counter = Counter()
    for path in originals:
        bucket = int(path.name.split("_")[0])
        for values in _read(path):
            rows[(0, v1(bucket), next_row[bucket])] = values
            next_row[bucket] += 1
    for folder in sorted(p for p in table.iterdir() if p.is_dir()):
        for path in sorted(folder.iterdir()):
            if path.name.startswith("_") or path.stat().st_size == 0:
                continue
            # delete events are keys: their (null) row is not read, by Hive nor the provider
            events = _read_events(path, keys_only=folder.name.startswith("delete_delta_"))
            for op, otx, bucket, row_id, values in events:
                if folder.name.startswith("delete_delta_"):
                    if op != 2:
                        raise Unreadable(f"{path}: operation {op} in a delete delta")
                    deleted.add((otx, bucket, row_id))
                else:
                    if op != 0:
                        raise Unreadable(f"{path}: operation {op} in an insert delta")
                    rows[(otx, bucket, row_id)] = values
    return sorted((v for k, v in rows.items() if k not in deleted), key=repr)


def _table(path: Path, columns: list[str] | None = None):
    if path.stat().st_size == 0:
        return None
    try:
        file = pa_orc.ORCFile(str(path))
        if columns is not None:
            names = file.schema.names
            if [n.lower() for n in names] != list(ACID):
                raise Unreadable(f"{path}: not ACID events")
            return file.read(columns=names[:5])
        return file.read()
    except Exception as exc:  # noqa: BLE001 - any failure: the file is unreadable
        raise Unreadable(f"{path}: {exc}") from None


def _read(path: Path) -> list[tuple]:
    table = _table(path)
    if table is None:
        return []
    if [n.lower() for n in table.column_names] == list(ACID):
        raise Unreadable(f"{path}: ACID events where an original file was expected")
    return [tuple(r.values()) for r in table.to_pylist()]


def _read_events(path: Path, keys_only: bool = False) -> list[tuple]:
    table = _table(path, ACID[:5] if keys_only else None)
    if table is None:
        return []
    if not keys_only and [n.lower() for n in table.column_names] != list(ACID):
        raise Unreadable(f"{path}: not ACID events")
    out = []
    for r in table.to_pylist():
        op, otx, bucket, row_id, *rest = r.values()
        row = rest[1] if len(rest) > 1 else None
        out.append((op, otx, bucket, row_id, tuple(row.values()) if row else None))
    return out


def read_snapshot(out: Path) -> list[tuple]:
    table = ds.dataset(str(out), format="parquet").to_table()
    return sorted((tuple(r.values()) for r in table.to_pylist()), key=repr)


@pytest.mark.parametrize("name", TABLES)
def test_a_mutated_fixture_file_is_read_exactly_or_refused_naming_it(name, tmp_path):
    pristine = arrange_fixture_table(name, tmp_path / "pristine" / name)
    files = sorted(
        p.relative_to(pristine).as_posix()
        for p in pristine.rglob("*")
        if p.is_file() and not p.name.startswith("_")
    )
    sizes = {f: (pristine / f).stat().st_size for f in files}
    outcomes: Counter = Counter()

    @fuzz_settings
    @given(
        st.sampled_from(files).flatmap(
            lambda f: st.tuples(st.just(f), mutations((pristine / f).read_bytes()))
        )
    )
    def run(case: tuple[str, Mutation]) -> None:
        relative, mutation = case
        work = Path(tempfile.mkdtemp(dir=tmp_path))
        try:
            table, out = work / name, work / "out"
            shutil.copytree(pristine, table)
            mutate_file(table / relative, mutation)
            try:
                expected: list[tuple] | None = independent_rows(table)
            except Unreadable:
                expected = None
            try:
                result = compact_table(str(table), str(out))
            except CLEAR_ERRORS as exc:
                message = str(exc)
                assert Path(relative).name in message, (mutation, relative, message)
                assert latest_snapshot(str(out)) is None
                outcomes[f"refused ({type(exc).__name__})"] += 1
                return
            assert expected is not None, (mutation, relative, "read a file nothing can read")
            assert read_snapshot(out) == expected, (mutation, relative)
            assert result.rows_written == len(expected)
            assert latest_snapshot(str(out)).snapshot_id == result.snapshot_id
            outcomes["read exactly"] += 1
        finally:
            shutil.rmtree(work, ignore_errors=True)

    run()
    print(
        f"\n[fuzz] ORC {name} ({', '.join(f'{f}: {sizes[f]} B' for f in files)}): "
        f"{sum(outcomes.values())} examples, {dict(outcomes)}"
    )
    assert sum(outcomes.values()) >= 10
