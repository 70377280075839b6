"""A read transaction: opened, kept alive by heartbeats, committed (or aborted on error).

Hive's rule for its Cleaner: files made obsolete by a compaction are deleted only once no
transaction that could still need them is open. A reader that holds an open transaction for as
long as it reads therefore keeps the files of its view on storage, as Hive's own queries do.
The metastore aborts a transaction it hears nothing of for ``metastore.txn.timeout`` (300 s by
default): a background thread heartbeats every ``interval`` seconds, on its own connection.
"""

from __future__ import annotations

import logging
import threading
from types import TracebackType

from .client import MetastoreClient
from .connection import MetastoreAddress
from .errors import MetastoreError

log = logging.getLogger(__name__)


class ReadTransaction:
    """``with ReadTransaction(address) as txn:`` holds a read-only transaction open.

    :param interval: seconds between heartbeats (well below the metastore's txn timeout).
    """

    def __init__(
        self, address: str | MetastoreAddress, *, interval: float = 60.0, api: str = "auto"
    ) -> None:
        self.address = MetastoreAddress.parse(address)
        self.interval = interval
        self.api = api
        self.txn_id: int | None = None
        self.heartbeats = 0
        self.heartbeat_error: Exception | None = None
        self._client: MetastoreClient | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def open(self) -> int:
        self._client = MetastoreClient(self.address, api=self.api).open()
        try:
            self.txn_id = self._client.open_txns(1, read_only=True)[0]
        except BaseException:
            self._client.close()
            raise
        self._thread = threading.Thread(
            target=self._beat, name=f"metastore-heartbeat-{self.txn_id}", daemon=True
        )
        self._thread.start()
        return self.txn_id

    def _beat(self) -> None:
        assert self.txn_id is not None
        with MetastoreClient(self.address, api=self.api) as client:
            while not self._stop.wait(self.interval):
                try:
                    client.heartbeat(self.txn_id)
                    self.heartbeats += 1
                except Exception as exc:  # reported when the transaction ends
                    self.heartbeat_error = exc
                    log.warning("heartbeat of read transaction %s failed: %s", self.txn_id, exc)
                    return

    def _finish(self, commit: bool) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        try:
            if self._client is not None and self.txn_id is not None:
                if commit:
                    self._client.commit_txn(self.txn_id)
                else:
                    self._client.abort_txn(self.txn_id)
        finally:
            if self._client is not None:
                self._client.close()

    def commit(self) -> None:
        self._finish(True)
        if self.heartbeat_error is not None:
            raise MetastoreError(
                f"read transaction {self.txn_id} lost its heartbeat ({self.heartbeat_error}); "
                "the metastore may have aborted it and the Cleaner may have removed files"
            )

    def abort(self) -> None:
        self._finish(False)

    def __enter__(self) -> ReadTransaction:
        self.open()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.abort()


__all__ = ["ReadTransaction"]
