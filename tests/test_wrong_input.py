"""Wrong input never succeeds silently: each mistake exits non-zero (CLI) or fails the task
(operator) with one line naming the thing, before any work where it can be known then."""

from __future__ import annotations

import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_provider_acid.cli import main

NATION_NOTHING_VISIBLE = "default.nation:1:9223372036854775807::"  # its delta is write 2


def run_cli(capsys, *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "storage-only mode" not in line]
    return code, "\n".join(lines)


def error_line(err: str) -> str:
    (line,) = [x for x in err.splitlines() if ": error: " in x]
    return line


def plain_parquet_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "plain"
    folder.mkdir()
    pq.write_table(pa.table({"a": [1, 2, 3]}), folder / "part-0.parquet")
    return folder


def test_a_folder_of_plain_parquet_files_is_not_a_hive_table(tmp_path, capsys):
    folder = plain_parquet_folder(tmp_path)
    code, err = run_cli(capsys, "compact", str(folder), "--out", str(tmp_path / "out"), "-q")
    assert code == 2
    line = error_line(err)
    assert f"{folder} is not a Hive ACID table" in line and "'part-0.parquet'" in line
    assert not (tmp_path / "out" / "_snapshots").exists()  # nothing committed


def test_the_operator_refuses_a_plain_folder_too(tmp_path):
    from airflow_provider_acid.acid.layout_checks import NotAnAcidTableError
    from airflow_provider_acid.operators.acid import AcidCompactOperator

    folder = plain_parquet_folder(tmp_path)
    task = AcidCompactOperator(task_id="c", table_uri=str(folder), output_uri=str(tmp_path / "o"))
    with pytest.raises(NotAnAcidTableError, match="is not a Hive ACID table"):
        task.execute({})


def test_hive_original_files_are_still_a_table(hive_table, tmp_path, capsys):
    table = hive_table("nation_originals")
    code, _ = run_cli(capsys, "compact", str(table), "--out", str(tmp_path / "out"), "-q")
    assert code == 0


def test_a_write_id_list_seeing_no_file_warns(hive_table, tmp_path, capsys):
    # An empty snapshot is right when every write so far is open or aborted, so this warns (in
    # one line naming the table and the list) rather than refusing; the plan records it too.
    table = hive_table("nation")
    out = tmp_path / "out"
    code, err = run_cli(
        capsys,
        "compact",
        str(table),
        "--out",
        str(out),
        "--valid-write-ids",
        NATION_NOTHING_VISIBLE,
        "-q",
    )
    assert code == 0
    (line,) = [x for x in err.splitlines() if "is visible under the write-id list" in x]
    assert line.startswith(f"airflow-acid compact: warning: no file of {table} is visible")
    assert "the snapshot is empty" in line and "'default.nation'" in line


@pytest.mark.parametrize("command", ["compact", "manifest"])
def test_a_write_id_list_of_another_table_warns_by_location(command, hive_table, tmp_path, capsys):
    table = hive_table("nation")  # its folder is named after the table, as Hive names it
    out = ["--out", str(tmp_path / "out")] if command == "compact" else ["--where", "true"]
    other = "default.orders:2:9223372036854775807::"
    code, err = run_cli(capsys, command, str(table), *out, "--valid-write-ids", other, "-q")
    assert code == 0
    (line,) = [x for x in err.splitlines() if "write-id list is table" in x]
    assert line == (
        f"airflow-acid {command}: warning: the write-id list is table 'default.orders''s, but "
        f"the folder read is 'nation' ({table}): check that the list is this table's"
    )
    own = "default.nation:2:9223372036854775807::"
    code, err = run_cli(capsys, command, str(table), *out, "--valid-write-ids", own, "-q")
    assert code == 0 and "write-id list is table" not in err


def test_a_bucket_the_table_lacks_is_refused(hive_table, tmp_path, capsys):
    table = hive_table("nation")
    code, err = run_cli(
        capsys, "compact", str(table), "--out", str(tmp_path / "o"), "--bucket", "7", "-q"
    )
    assert code == 2
    assert error_line(err).endswith(f"buckets: [7] not in {table}; its buckets are [0]")


def test_out_pointing_at_a_file_fails_before_any_work(hive_table, tmp_path, capsys):
    table = hive_table("nation")
    target = tmp_path / "afile"
    target.write_text("keep me")
    code, err = run_cli(capsys, "compact", str(table), "--out", str(target), "-q")
    assert code == 2
    assert error_line(err).endswith(
        f"--out {target} is a file, not a folder: give a folder for the snapshots"
    )
    assert "see airflow-acid compact --help" in err and "--debug" not in err
    assert target.read_text() == "keep me"


@pytest.mark.parametrize(
    ("module", "argv", "extra"),
    [
        ("deltalake", ["--format", "delta"], "delta"),
        ("sqlalchemy", ["--format", "iceberg"], "iceberg"),
        ("s3fs", [], "s3"),
    ],
)
def test_a_missing_optional_library_names_its_extra_before_any_work(
    module, argv, extra, hive_table, tmp_path, capsys, monkeypatch
):
    table = hive_table("nation")
    monkeypatch.setitem(sys.modules, module, None)  # as if not installed
    out = "s3://bucket/out" if module == "s3fs" else str(tmp_path / "out")
    code, err = run_cli(capsys, "compact", str(table), "--out", out, *argv, "-q")
    assert code == 2
    line = error_line(err)
    assert f"needs {module}, which is not installed" in line
    assert f"pip install 'airflow-provider-acid[{extra}]'" in line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("where", "said"),
    [
        ("n_nationkey >>> 3", "an operand is missing near column 15"),
        ("n_nationkey = ", "an operand is missing near column 13"),
        ("n_nationkey IN (1,", "Expecting ) near column 18"),
    ],
)
def test_where_parse_errors_do_not_leak_the_parser(where, said, hive_table, capsys):
    table = hive_table("nation")
    code, err = run_cli(capsys, "manifest", str(table), "--where", where)
    assert code == 2
    line = error_line(err)
    assert line.endswith(f"cannot parse WHERE text {where!r}: {said}")
    assert "sqlglot" not in err and "<class" not in err and "Required keyword" not in err
    assert "see airflow-acid manifest --help" in err and "--debug" not in err


@pytest.mark.parametrize(
    "argv",
    [
        ["compact", "--out", "OUT"],
        ["compact", "TABLE", "--out", "OUT", "--delta-uri", "/x"],
        ["manifest", "TABLE", "--where", "n_nationkey = 1", "--buckets", "4"],
    ],
)
def test_usage_errors_point_at_help_not_debug(argv, hive_table, tmp_path, capsys):
    table = str(hive_table("nation"))
    argv = [table if a == "TABLE" else str(tmp_path / "o") if a == "OUT" else a for a in argv]
    code, err = run_cli(capsys, *argv, "-q")
    assert code == 2
    assert f"hint: see airflow-acid {argv[0]} --help" in err and "--debug" not in err


def test_a_column_the_table_lacks_is_named(hive_table, capsys):
    code, err = run_cli(capsys, "manifest", str(hive_table("nation")), "--where", "nokey = 3")
    assert code == 2
    assert "unknown column 'nokey'; available columns: n_nationkey" in error_line(err)


def test_refresh_without_an_index_is_a_usage_error(hive_table, capsys):
    argv = ["manifest", str(hive_table("nation")), "--where", "n_nationkey = 1", "--refresh"]
    code, err = run_cli(capsys, *argv)
    assert code == 2
    assert error_line(err).endswith("--refresh refreshes the index at --index: give --index URI")


def test_zero_workers_is_refused_by_the_parser(hive_table, tmp_path, capsys):
    with pytest.raises(SystemExit) as exited:
        main(["compact", str(hive_table("nation")), "--out", str(tmp_path / "o"), "--workers", "0"])
    assert exited.value.code == 2
    assert "argument --workers: '0' is not a whole number of at least 1" in capsys.readouterr().err


def test_a_manifest_of_a_plain_folder_is_refused(tmp_path, capsys):
    folder = plain_parquet_folder(tmp_path)
    code, err = run_cli(capsys, "manifest", str(folder), "--where", "a = 1")
    assert code == 2
    assert f"{folder} is not a Hive ACID table" in error_line(err)
