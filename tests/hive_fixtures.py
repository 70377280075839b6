"""The real Hive-written ORC fixture files, and how to lay them out as table folders.

The files in ``../shared/fixtures/hive-acid`` are read-only inputs; every test works on a copy
laid out in its own temporary folder (``ACID_FIXTURES`` overrides where they are found).
Import this module by name (``from hive_fixtures import ...``), never ``conftest``.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FIXTURES = Path(os.environ.get("ACID_FIXTURES", REPO.parent / "shared" / "fixtures" / "hive-acid"))

_TRINO = "trino"
_HIVE3 = "hive3"
_NATION_FILE = f"{_TRINO}/nationFile25kRowsSortedOnNationKey/bucket_00000"
_NATION_DELETES = f"{_TRINO}/nation_delete_deltas"

#: Each fixture table: (source below FIXTURES, destination below the table folder).
#: A source folder is copied whole. The layouts follow the fixtures' README.
FIXTURE_TABLES: dict[str, list[tuple[str, str]]] = {
    "nation": [
        (_NATION_FILE, "delta_0000002_0000002_0000/bucket_00000"),
        (
            f"{_NATION_DELETES}/delete_delta_0000003_0000003_0000",
            "delete_delta_0000003_0000003_0000",
        ),
        (
            f"{_NATION_DELETES}/delete_delta_0000004_0000004_0000",
            "delete_delta_0000004_0000004_0000",
        ),
    ],
    "nation_originals": [
        (f"{_TRINO}/fullacidNationTableWithOriginalFiles", ""),
    ],
    "dummy_id_data": [
        (f"{_TRINO}/dummy_id_data_orc", ""),
    ],
    "delete_deltas_only": [
        (f"{_TRINO}/fullacid_delete_delta_test", ""),
    ],
    "acid_version_hive_3": [
        (
            f"{_TRINO}/acid_version_validation/acid_version_hive_3/00000_0",
            "delta_0000001_0000001_0000/bucket_00002",
        ),
    ],
    "plain_file_as_original": [
        (f"{_TRINO}/acid_version_validation/no_orc_acid_version_in_metadata/00000_0", "000000_0"),
    ],
    "plain_file_in_delta": [
        (
            f"{_TRINO}/acid_version_validation/no_orc_acid_version_in_metadata/00000_0",
            "delta_0000001_0000001_0000/000000_0",
        ),
    ],
    "load_data": [
        (f"{_HIVE3}/load_data_job_acid", "delta_0000001_0000001_0000"),
    ],
    "hcube_tbl6_partitioned": [
        (f"{_HIVE3}/repl_dump/hive/test_hcube_2/tbl6/fld1=1/data", "fld1=1"),
        (f"{_HIVE3}/repl_dump/hive/test_hcube_2/tbl6/fld1=2/data", "fld1=2"),
    ],
}
for _name in ("tbl", "tbl1", "tbl2", "tbl3", "tbl4", "tbl5", "tbl6"):
    FIXTURE_TABLES[f"hcube_{_name}"] = [(f"{_HIVE3}/test_hcube_2.db/{_name}", "")]

#: Rows each fixture table's snapshot holds, per the fixtures' README.
FIXTURE_ROW_COUNTS = {
    "nation": 23_000,
    "nation_originals": 24,
    "dummy_id_data": 19,
    "acid_version_hive_3": 1,
    "plain_file_as_original": 4,
    "plain_file_in_delta": 4,
    "load_data": 3,
    "hcube_tbl6_partitioned": 2,
    "hcube_tbl": 1,
    "hcube_tbl1": 3,
    "hcube_tbl2": 2,
    "hcube_tbl3": 1,
    "hcube_tbl4": 1,
    "hcube_tbl5": 1,
    "hcube_tbl6": 1,
}


def arrange_fixture_table(name: str, destination: Path) -> Path:
    """Copy the files of fixture table ``name`` into ``destination`` (made writable)."""
    if not FIXTURES.is_dir():
        pytest.fail(f"fixture folder {FIXTURES} is missing (set ACID_FIXTURES)")
    for source, target in FIXTURE_TABLES[name]:
        src = FIXTURES / source
        dst = destination / target if target else destination
        if src.is_dir():
            shutil.copytree(src, dst, dirs_exist_ok=True)
        else:
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dst)
    for path in [destination, *destination.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return destination
