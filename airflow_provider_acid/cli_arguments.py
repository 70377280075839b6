"""The CLI's table arguments, shared by its commands: a table by location or by name (with
``--metastore``), the read view's lists, and the warning for files left out by choice.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .cli_kerberos import add_kerberos_arguments

if TYPE_CHECKING:
    from .acid.source import TableSource


def source_of(
    args: argparse.Namespace,
    *,
    where: Any = None,
    partitions: Any = None,
    current_txn: int | None = None,
) -> TableSource:
    """The table the arguments name: by ``--table`` through ``--metastore``, or TABLE_URI.

    Storage-only without a write-id list: the warning goes to stderr (never to stdout, which
    scripts parse).

    :param args: the parsed arguments.
    :param where: a predicate choosing the partitions listed, by name.
    :param partitions: partition specs choosing them.
    :param current_txn: the command's own read transaction, if it opened one.
    """
    from .engine.sources import open_source

    source = open_source(
        args.table_uri,
        table=args.table,
        metastore=metastore_address(args),
        where=where,
        partitions=partitions,
        write_ids=args.valid_write_ids,
        txns=args.valid_txns,
        insert_only=getattr(args, "insert_only", False),
        current_txn=current_txn,
    )
    for warning in source.warnings:
        print(f"airflow-acid {args.command}: warning: {warning}", file=sys.stderr)
    return source


def print_warnings(args: argparse.Namespace, warnings: Sequence[str]) -> None:
    """The warnings of a plan or manifest (what ``--ignore-unrecognised`` left out, a write-id
    list of another table...), on stderr; the output records them too. The storage-only warning
    is left out: :func:`source_of` printed it already.

    :param args: the parsed arguments.
    :param warnings: the plan's or manifest's warnings.
    """
    from .acid.source import STORAGE_ONLY_WARNING

    for warning in warnings:
        if warning != STORAGE_ONLY_WARNING:
            print(f"airflow-acid {args.command}: warning: {warning}", file=sys.stderr)


def metastore_address(args: argparse.Namespace) -> Any:
    """The ``--metastore`` argument as an address (None without one), with the Kerberos
    arguments (``main`` has put the HDFS ones in the ``hdfs://`` filesystem's environment).

    :param args: the parsed arguments.
    """
    from .cli_kerberos import kerberos_settings

    if not args.metastore:
        return None
    kerberos = kerberos_settings(args)
    from .metastore.connection import MetastoreAddress

    return MetastoreAddress.parse(
        args.metastore, auth=args.metastore_auth, user=args.metastore_user, **kerberos
    )


def add_table_arguments(parser: argparse.ArgumentParser) -> None:
    """TABLE_URI, or ``--metastore`` and ``--table``; the write-id and transaction lists.

    :param parser: the command's parser.
    """
    parser.add_argument(
        "table_uri",
        nargs="?",
        metavar="TABLE_URI",
        help="table location (path or fsspec URL); or name it with --table and --metastore",
    )
    group = parser.add_argument_group("reading a table by name through its Hive Metastore")
    group.add_argument("--table", metavar="DB.TABLE", help="the table's name in the metastore")
    group.add_argument(
        "--metastore",
        metavar="URI",
        default=os.environ.get("ACID_METASTORE_URI"),
        help="thrift://HOST:PORT (default: $ACID_METASTORE_URI); the source of truth for "
        "committed writes, schema, partitions and bucketing",
    )
    group.add_argument(
        "--metastore-auth",
        choices=("NONE", "PLAIN", "NOSASL", "LDAP", "CONFIG", "GSSAPI", "KERBEROS"),
        help="SASL PLAIN (or LDAP/CONFIG, which are PLAIN on the wire) for metastores that ask, "
        "the password from $ACID_METASTORE_PASSWORD; or GSSAPI (Kerberos)",
    )
    group.add_argument("--metastore-user", metavar="USER", help="user for --metastore-auth PLAIN")
    add_kerberos_arguments(group)
    parser.add_argument(
        "--valid-write-ids",
        metavar="S",
        help="Hive write-id list, e.g. 'db.t:5:9223372036854775807::3' (default: the "
        "metastore's, or all committed without one)",
    )
    parser.add_argument(
        "--valid-txns", metavar="S", help="Hive transaction list, e.g. '20:9223372036854775807::'"
    )


#: The help of ``--ignore-unrecognised`` (compact, manifest).
IGNORE_UNRECOGNISED_HELP = (
    "go ahead although files of the table cannot be placed in any bucket slice (by default "
    "they fail the command, named); the output records each file so left out"
)


class UsageError(ValueError):
    """Arguments that do not go together: the hint is ``--help``, not ``--debug``."""


#: the extra that installs what an argument needs: (what needs it, module, extra)
EXTRAS = {
    "s3": ("s3fs", "s3"),
    "delta": ("deltalake", "delta"),
    "iceberg": ("pyiceberg", "iceberg"),
    "iceberg-sql": ("sqlalchemy", "iceberg"),
}


def check_extras(args: argparse.Namespace) -> None:
    """Before any work: the optional libraries the arguments need are installed, else one
    line naming the argument and the extra to install."""
    import importlib.util

    needs = []
    for name in ("table_uri", "out", "out_uri", "manifest", "index"):
        value = getattr(args, name, None)
        if isinstance(value, str) and value.startswith(("s3://", "s3a://")):
            needs.append((f"{value}", "s3"))
    fmt = getattr(args, "output_format", "parquet")
    if fmt in ("delta", "iceberg"):
        needs.append((f"--format {fmt}", fmt))
    if fmt == "iceberg" and not dict(getattr(args, "iceberg_catalog", None) or {}).get("type"):
        needs.append(("--format iceberg's default SQL catalog", "iceberg-sql"))
    for what, need in needs:
        module, extra = EXTRAS[need]
        if importlib.util.find_spec(module) is None:
            raise UsageError(
                f"{what} needs {module}, which is not installed: "
                f"pip install 'airflow-provider-acid[{extra}]'"
            )


def check_out_folder(out: str) -> None:
    """``--out`` is a folder (or nothing yet), checked before any work."""
    if "://" in out and not out.startswith("file://"):
        return
    path = out.removeprefix("file://")
    if os.path.exists(path) and not os.path.isdir(path):
        raise UsageError(f"--out {out} is a file, not a folder: give a folder for the snapshots")
