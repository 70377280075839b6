"""AcidMetastoreHook: a Hive Metastore from an Airflow connection of type ``acid_metastore``.

The provider's own connection type is ``acid_metastore``, so that it registers beside the
apache-hive provider, whose type is ``hive_metastore``. A connection of either type is read the
same way (the hook does not look at the type, and that provider is not needed): host (several,
comma-separated, are tried in order), port (9083 by default), and the extra ``auth_mechanism``:
``NOSASL`` (the default, plain Thrift), ``PLAIN`` (SASL PLAIN with the connection's login and
password; ``LDAP`` and ``CONFIG`` are the same on the wire) or ``GSSAPI`` (Kerberos). For
``GSSAPI`` the extras are ``kerberos_service_name`` (default ``hive``), ``principal`` (the
metastore's, ``hive/_HOST@REALM``; ``_HOST`` is each host's name), ``kerberos_principal_host``
(put for ``_HOST`` instead, behind a load balancer), and the client's ``kerberos_principal``
with ``kerberos_keytab`` (the provider logs in itself and renews the login) or
``kerberos_ccache`` (default ``KRB5CCNAME``, as ``airflow kerberos`` keeps it).
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseHook

from ..kerberos.login import KerberosLogin
from ..metastore.client import MetastoreClient
from ..metastore.connection import DEFAULT_PORT, MetastoreAddress, normalise_auth


def address_from_connection(conn: Any, conn_id: str = "") -> MetastoreAddress:
    """The metastore address a metastore connection (sync or async lookup) names."""
    extra = conn.extra_dejson or {}
    if not conn.host:
        raise ValueError(f"connection {conn_id or conn.conn_id!r} names no metastore host")
    port = int(conn.port or DEFAULT_PORT)
    hosts = [h.strip() for h in str(conn.host).split(",") if h.strip()]
    auth = normalise_auth(extra.get("auth_mechanism") or "NOSASL")
    return MetastoreAddress.parse(
        ",".join(f"thrift://{h}" if ":" in h else f"thrift://{h}:{port}" for h in hosts),
        auth=auth,
        user=(conn.login or None) if auth == "PLAIN" else None,
        password=conn.password or None,
        timeout=float(extra.get("timeout") or 60),
        kerberos=kerberos_login_from_extra(extra) if auth == "GSSAPI" else None,
        server_principal=extra.get("principal") or None,
        kerberos_service_name=extra.get("kerberos_service_name") or None,
        kerberos_principal_host=extra.get("kerberos_principal_host") or None,
    )


def kerberos_login_from_extra(extra: dict[str, Any]) -> KerberosLogin:
    """The client's Kerberos login a connection's extras name (``kerberos_principal`` and
    ``kerberos_keytab``, or ``kerberos_ccache``; none: the ticket cache ``KRB5CCNAME``).

    :param extra: the connection's extra fields.
    """
    return KerberosLogin(
        principal=extra.get("kerberos_principal") or None,
        keytab=extra.get("kerberos_keytab") or None,
        ccache=extra.get("kerberos_ccache") or None,
    )


class AcidMetastoreHook(BaseHook):
    """The metastore a connection names, as a library address or client.

    :param metastore_conn_id: an ``acid_metastore`` (or ``hive_metastore``) connection.
    """

    conn_name_attr = "metastore_conn_id"
    default_conn_name = "metastore_default"
    conn_type = "acid_metastore"
    hook_name = "Hive Metastore (ACID)"

    def __init__(self, metastore_conn_id: str = default_conn_name, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.metastore_conn_id = metastore_conn_id
        self._address: MetastoreAddress | None = None

    @property
    def address(self) -> MetastoreAddress:
        """Endpoints and auth (the password is kept out of ``repr`` and of ``uri``)."""
        if self._address is None:
            conn = self.get_connection(self.metastore_conn_id)
            self._address = address_from_connection(conn, self.metastore_conn_id)
        return self._address

    @property
    def uri(self) -> str:
        """``thrift://HOST:PORT`` without credentials (what manifests and lineage record)."""
        return self.address.uri

    def get_conn(self) -> MetastoreClient:
        """An open client; close it (or use it as a context manager) when done."""
        return MetastoreClient(self.address).open()

    def test_connection(self) -> tuple[bool, str]:
        """Lists the databases once (the UI's Test button)."""
        try:
            with MetastoreClient(self.address) as client:
                databases = client.databases()
        except Exception as exc:  # the UI shows the message
            return False, str(exc)
        return True, f"{self.uri}: {len(databases)} database(s)"

    def __repr__(self) -> str:
        return f"{type(self).__name__}(metastore_conn_id={self.metastore_conn_id!r})"


class AcidHiveMetastoreHook(AcidMetastoreHook):
    """The same hook for ``hive_metastore`` connections, registered only where the apache-hive
    provider (which owns that type) is not installed.

    :param metastore_conn_id: a ``hive_metastore`` connection.
    """

    conn_type = "hive_metastore"
    hook_name = "Hive Metastore Thrift"
