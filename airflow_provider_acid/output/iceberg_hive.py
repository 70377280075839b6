"""pyiceberg's Hive catalog for Hive 4 metastores.

Hive 4.0 removed the metastore's ``get_table`` call (only ``get_table_req`` remains), which
pyiceberg 0.12's ``HiveCatalog`` still uses to load and commit tables (apache/iceberg-python
issue 1222; Iceberg's Java HiveCatalog has had the same gap, apache/iceberg issue 12878).
:class:`Hive4Catalog` is that catalog with ``get_table`` answered by ``get_table_req`` (and by
``get_table`` itself on a metastore that does not know ``get_table_req``, as Hive 2 does).

The Iceberg sink uses it for ``type=hive`` catalogs: its ``--json`` block names it as
``py-catalog-impl``, so ``load_catalog(name, **block["catalog"])`` opens the same catalog.
"""

from __future__ import annotations

from typing import Any

from hive_metastore.ThriftHiveMetastore import Client
from hive_metastore.ttypes import GetTableRequest
from pyiceberg.catalog.hive import (
    HIVE_KERBEROS_AUTH,
    HIVE_KERBEROS_AUTH_DEFAULT,
    HIVE_KERBEROS_SERVICE_NAME,
    HIVE_KERBEROS_SERVICE_NAME_DEFAULT,
    URI,
    HiveCatalog,
    _HiveClient,
)
from pyiceberg.utils.properties import property_as_bool
from thrift.Thrift import TApplicationException

#: The ``py-catalog-impl`` value naming :class:`Hive4Catalog`.
HIVE4_CATALOG_IMPL = f"{__name__}.Hive4Catalog"


class _Hive4ThriftClient(Client):
    """The metastore's Thrift client, with ``get_table`` through ``get_table_req``."""

    _request_form = True

    def get_table(self, dbname: str, tbl_name: str) -> Any:
        if self._request_form:
            try:
                return self.get_table_req(GetTableRequest(dbName=dbname, tblName=tbl_name)).table
            except TApplicationException as exc:
                if exc.type != TApplicationException.UNKNOWN_METHOD:
                    raise
                self._request_form = False
        return super().get_table(dbname, tbl_name)


class _Hive4Client(_HiveClient):
    def _client(self) -> Client:
        from thrift.protocol import TBinaryProtocol

        client = _Hive4ThriftClient(TBinaryProtocol.TBinaryProtocol(self._transport))
        if self._ugi:
            client.set_ugi(*self._ugi)
        return client


class Hive4Catalog(HiveCatalog):
    """pyiceberg's ``HiveCatalog`` that also works with Hive 4 metastores."""

    @staticmethod
    def _create_hive_client(properties: dict[str, str]) -> _HiveClient:
        last_exception: BaseException | None = None
        for uri in properties[URI].split(","):
            try:
                return _Hive4Client(
                    uri,
                    properties.get("ugi"),
                    property_as_bool(properties, HIVE_KERBEROS_AUTH, HIVE_KERBEROS_AUTH_DEFAULT),
                    properties.get(HIVE_KERBEROS_SERVICE_NAME, HIVE_KERBEROS_SERVICE_NAME_DEFAULT),
                )
            except BaseException as exc:  # noqa: BLE001 - as pyiceberg: try the next URI
                last_exception = exc
        if last_exception is not None:
            raise last_exception
        raise ValueError(f"Unable to connect to hive using uri: {properties[URI]}")


def hive4_properties(properties: dict[str, str]) -> dict[str, str]:
    """``type=hive`` catalog properties as :class:`Hive4Catalog`'s (others unchanged)."""
    if str(properties.get("type", "")).lower() != "hive" or properties.get("py-catalog-impl"):
        return dict(properties)
    return {
        **{k: v for k, v in properties.items() if k != "type"},
        "py-catalog-impl": HIVE4_CATALOG_IMPL,
    }


__all__ = ["HIVE4_CATALOG_IMPL", "Hive4Catalog", "hive4_properties"]
