"""The CLI's Kerberos and HDFS arguments: the metastore's GSSAPI settings, the client's login,
and where ``hdfs://`` authorities' namenodes answer WebHDFS.

The HDFS settings are handed to the ``hdfs://`` filesystem through the environment
(``$ACID_HDFS_NAMENODES``, ``$ACID_HDFS_KERBEROS``, ``$ACID_KERBEROS_PRINCIPAL``,
``$ACID_KERBEROS_KEYTAB``), so that worker processes the command starts see them too."""

from __future__ import annotations

import argparse
import os
from typing import Any

from .acid.hdfs import KERBEROS_ENV, KEYTAB_ENV, NAMENODES_ENV, PRINCIPAL_ENV, parse_namenodes


def add_kerberos_arguments(group: Any) -> None:
    """``--kerberos-*`` (the metastore's GSSAPI and the client's login) and ``--hdfs-*``.

    :param group: the parser's argument group for reading a table by name.
    """
    group.add_argument(
        "--kerberos-principal",
        metavar="P",
        default=os.environ.get(PRINCIPAL_ENV),
        help="GSSAPI/SPNEGO: the client principal user@REALM, logged in from --kerberos-keytab "
        f"(default ${PRINCIPAL_ENV}; none: the ticket cache KRB5CCNAME)",
    )
    group.add_argument(
        "--kerberos-keytab",
        metavar="FILE",
        default=os.environ.get(KEYTAB_ENV),
        help=f"the keytab of --kerberos-principal (default ${KEYTAB_ENV})",
    )
    group.add_argument(
        "--kerberos-service-name",
        metavar="NAME",
        help="GSSAPI: the metastore principal's service part (default hive)",
    )
    group.add_argument(
        "--metastore-principal",
        metavar="P",
        help="GSSAPI: the metastore's principal, hive/_HOST@REALM (_HOST: each URI's host)",
    )
    group.add_argument(
        "--kerberos-principal-host",
        metavar="HOST",
        help="GSSAPI: put for _HOST instead of each URI's host (a load balancer in front)",
    )
    group.add_argument(
        "--hdfs-namenodes",
        metavar="MAP",
        help="where hdfs:// authorities answer WebHDFS: AUTHORITY=http://NN:9870[,URL...][;...] "
        f"or a JSON object; several URLs: an HA nameservice (default ${NAMENODES_ENV})",
    )
    group.add_argument(
        "--hdfs-kerberos",
        action="store_true",
        help="WebHDFS with SPNEGO, logged in as --kerberos-principal (or the ticket cache)",
    )


def apply_hdfs_settings(args: argparse.Namespace) -> None:
    """``--hdfs-*`` and the client's ``--kerberos-principal``/``--kerberos-keytab`` into the
    environment the ``hdfs://`` filesystem reads, before a command touches any location (its
    table, ``--manifest``, ``--out``); a bad namenode mapping fails here, naming itself.

    :param args: the parsed arguments (of any command: those without these options are left
        as they are).
    """
    if getattr(args, "hdfs_namenodes", None):
        parse_namenodes(args.hdfs_namenodes)
        os.environ[NAMENODES_ENV] = args.hdfs_namenodes
    if getattr(args, "hdfs_kerberos", False):
        os.environ[KERBEROS_ENV] = "1"
    if principal := getattr(args, "kerberos_principal", None):
        os.environ[PRINCIPAL_ENV] = principal
    if keytab := getattr(args, "kerberos_keytab", None):
        os.environ[KEYTAB_ENV] = keytab


def kerberos_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The metastore address's GSSAPI keywords from the arguments.

    :param args: the parsed arguments.
    """
    from .kerberos.login import KerberosLogin

    principal = getattr(args, "kerberos_principal", None)
    keytab = getattr(args, "kerberos_keytab", None)
    settings: dict[str, Any] = {
        "kerberos_service_name": getattr(args, "kerberos_service_name", None),
        "server_principal": getattr(args, "metastore_principal", None),
        "kerberos_principal_host": getattr(args, "kerberos_principal_host", None),
    }
    if principal or keytab:
        settings["kerberos"] = KerberosLogin(principal, keytab)
    return settings
