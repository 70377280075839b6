"""A Hive Metastore client: tables, partitions, the reader's view of writes, transactions.

A plain library (no Airflow imports), over the Thrift bindings of Hive's
``hive_metastore.thrift`` that pyiceberg ships. Modules, one idea each:

* ``connection``: the address (``thrift://HOST:PORT``), plain Thrift or SASL PLAIN;
* ``client``: the Thrift calls, in their Hive 3.1 and Hive 4 forms;
* ``tables``: a Thrift table and its partitions as an ``acid.source.TableDefinition``;
* ``view``: the reader's view (transaction list, then the table's write-id list);
* ``transactions``: a read transaction kept open with heartbeats;
* ``source``: :func:`open_table`, a table by name as a pinned ``acid.source.TableSource``;
* ``notifications``: the notification log, and a table's commits read from it.
"""

from .client import MetastoreClient, split_table_name
from .connection import MetastoreAddress
from .errors import (
    MetastoreAuthenticationError,
    MetastoreConnectionError,
    MetastoreError,
    NotificationEventsLostError,
    NotificationLogError,
    NotTransactionalError,
    TableLocationMissingError,
    TableNotFoundError,
    WriteIdListMismatchError,
)
from .source import open_table
from .transactions import ReadTransaction
from .view import ReadView, read_view

__all__ = [
    "MetastoreAddress",
    "MetastoreAuthenticationError",
    "MetastoreClient",
    "MetastoreConnectionError",
    "MetastoreError",
    "NotTransactionalError",
    "NotificationEventsLostError",
    "NotificationLogError",
    "ReadTransaction",
    "ReadView",
    "TableLocationMissingError",
    "TableNotFoundError",
    "WriteIdListMismatchError",
    "open_table",
    "read_view",
    "split_table_name",
]
