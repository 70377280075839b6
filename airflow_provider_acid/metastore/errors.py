"""Errors of the metastore client: each names the metastore, database or table it is about."""

from __future__ import annotations


class MetastoreError(RuntimeError):
    """A Hive Metastore call failed (the message names the metastore and the call)."""


class MetastoreConnectionError(MetastoreError, ConnectionError):
    """The metastore could not be reached: refused, timed out, or the handshake failed.

    A ``ConnectionError``: Airflow's task retries apply as to any transient failure."""


class MetastoreAuthenticationError(MetastoreConnectionError):
    """The metastore refused the SASL handshake (wrong user or password, or another mechanism)."""


class TableNotFoundError(MetastoreError, LookupError):
    """The database or the table does not exist in the metastore."""


class NotTransactionalError(MetastoreError, ValueError):
    """The table exists but is not a Hive ACID (transactional) table."""


class WriteIdListMismatchError(MetastoreError, ValueError):
    """The metastore returned a write-id list for another table than the one asked for."""


class TableLocationMissingError(MetastoreError, FileNotFoundError):
    """The table's or a partition's location, as the metastore records it, does not exist."""


class NotificationLogError(MetastoreError):
    """The metastore's notification log is off, refused, or no longer holds the events asked
    for (the message names the metastore)."""


class NotificationEventsLostError(NotificationLogError):
    """The log no longer holds the events after a reader's cursor (its cleaner removed them, or
    the log was reset): what happened in between cannot be known from the log. The message
    names the metastore, the table, the cursor and what to do."""
