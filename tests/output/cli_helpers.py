"""What the Iceberg tests that drive ``airflow-acid compact`` share: its ``--json`` answer,
and the nation fixture published under a given high watermark."""

from __future__ import annotations

import json

from airflow_provider_acid.cli import main

NATION_IDS = "default.nation:{hwm}:9223372036854775807::"


def compact_json(capsys, *args: str) -> dict:
    assert main(["compact", *args, "--json", "--quiet"]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def compact_nation_iceberg(capsys, table: str, out: str, hwm: int, *extra: str) -> dict:
    """``compact TABLE --out OUT --valid-write-ids <nation at hwm> --format iceberg EXTRA``."""
    ids = NATION_IDS.format(hwm=hwm)
    return compact_json(
        capsys, table, "--out", out, "--valid-write-ids", ids, "--format", "iceberg", *extra
    )
