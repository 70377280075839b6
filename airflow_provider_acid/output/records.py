"""The records of the output side: planned slices, per-bucket results, a snapshot's plan and
its committed manifest, and the errors of the commit.

Each is a frozen value object with ``to_dict``/``from_dict``: they cross process boundaries as
JSON (Airflow XCom, ``plan.json``, ``manifest.json``).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

MANIFEST_FORMAT = "airflow-acid/snapshot"
MANIFEST_VERSION = 1
#: ``part-<snapshot id>-<bucket>-<file number>.parquet``
DATA_FILE_NAME = re.compile(
    r"^part-(?P<snapshot>[0-9a-f]{16})-(?P<bucket>\d{5})-(?P<n>\d{4,})\.parquet$"
)


class CommitError(RuntimeError):
    """The bucket results cannot be committed (missing, unexpected or unverifiable parts)."""


class ReconciliationError(CommitError):
    """A bucket's row counts do not add up: rows written != rows read - dropped - deleted."""


def data_file_name(snapshot_id: str, bucket_id: int, number: int) -> str:
    """The name of a snapshot's ``number``-th data file of one bucket."""
    return f"part-{snapshot_id}-{bucket_id:05d}-{number:04d}.parquet"


def _checksum(body: Mapping[str, Any]) -> str:
    """sha256 of a JSON document's content, the same before and after a JSON round trip."""
    canonical = json.loads(json.dumps(body, default=str))
    text = json.dumps(canonical, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def utc_now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# -- value objects ---------------------------------------------------------------------------


@dataclass(frozen=True)
class OutputFile:
    """A Parquet file of a snapshot: path relative to the output folder, rows and bytes."""

    path: str
    rows: int
    size: int

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "rows": self.rows, "size": self.size}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> OutputFile:
        return cls(data["path"], int(data["rows"]), int(data["size"]))


@dataclass(frozen=True)
class BucketResult:
    """What compacting one bucket slice produced, with its row accounting.

    ``rows_read`` counts the data rows in the slice's files (from their footers),
    ``rows_invalid`` those of writes the write-id list does not show, ``rows_deleted`` those a
    delete key matched, ``rows_filtered`` those the row filter dropped. ``reused_from`` names the
    snapshot whose files are reused unchanged (None: written for this snapshot).
    """

    snapshot_id: str
    slice_key: str
    partition: str
    bucket: int
    fingerprint: str
    files: tuple[OutputFile, ...]
    rows_read: int
    rows_invalid: int
    rows_deleted: int
    rows_filtered: int
    rows_written: int
    delete_keys: int
    reused_from: str | None = None

    @property
    def rows_expected(self) -> int:
        return self.rows_read - self.rows_invalid - self.rows_deleted - self.rows_filtered

    def check_reconciled(self) -> None:
        """Raise :class:`ReconciliationError` unless the counts and the files add up."""
        in_files = sum(f.rows for f in self.files)
        if self.rows_written != self.rows_expected or in_files != self.rows_written:
            raise ReconciliationError(
                f"slice {self.slice_key}: {self.rows_read} rows read - {self.rows_invalid} of "
                f"invalid writes - {self.rows_deleted} deleted - {self.rows_filtered} filtered = "
                f"{self.rows_expected}, but {self.rows_written} written ({in_files} in its files)"
            )

    def to_dict(self) -> dict[str, Any]:
        return {
            "snapshot_id": self.snapshot_id,
            "slice_key": self.slice_key,
            "partition": self.partition,
            "bucket": self.bucket,
            "fingerprint": self.fingerprint,
            "files": [f.to_dict() for f in self.files],
            "rows_read": self.rows_read,
            "rows_invalid": self.rows_invalid,
            "rows_deleted": self.rows_deleted,
            "rows_filtered": self.rows_filtered,
            "rows_written": self.rows_written,
            "delete_keys": self.delete_keys,
            "reused_from": self.reused_from,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BucketResult:
        return cls(
            snapshot_id=data["snapshot_id"],
            slice_key=data["slice_key"],
            partition=data["partition"],
            bucket=int(data["bucket"]),
            fingerprint=data["fingerprint"],
            files=tuple(OutputFile.from_dict(f) for f in data["files"]),
            rows_read=int(data["rows_read"]),
            rows_invalid=int(data["rows_invalid"]),
            rows_deleted=int(data["rows_deleted"]),
            rows_filtered=int(data["rows_filtered"]),
            rows_written=int(data["rows_written"]),
            delete_keys=int(data["delete_keys"]),
            reused_from=data.get("reused_from"),
        )


@dataclass(frozen=True)
class PlannedSlice:
    """A slice the snapshot holds; ``reused`` is set when an earlier snapshot's files serve."""

    key: str
    partition: str
    bucket: int
    fingerprint: str
    reused: BucketResult | None = None
    #: The slice's source files at planning (relative to the table root where below it), so
    #: that a worker can name a file that vanished since (Hive's Cleaner removes obsolete ones).
    files: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "partition": self.partition,
            "bucket": self.bucket,
            "fingerprint": self.fingerprint,
            "reused": self.reused.to_dict() if self.reused else None,
            "files": list(self.files),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PlannedSlice:
        reused = data.get("reused")
        return cls(
            data["key"],
            data["partition"],
            int(data["bucket"]),
            data["fingerprint"],
            BucketResult.from_dict(reused) if reused else None,
            tuple(data.get("files", ())),
        )


@dataclass(frozen=True)
class SnapshotPlan:
    """Everything the workers of one snapshot share, stored as ``plan.json`` before any data.

    ``settings`` is the JSON form of what shapes the output: columns, partition columns and
    their types, identity columns, compression, file and row-group sizes, the row filter key.
    """

    snapshot_id: str
    out: str
    table: str
    write_ids: str | None
    txns: str | None
    insert_only: bool
    settings: Mapping[str, Any]
    slices: tuple[PlannedSlice, ...]
    previous_snapshot_id: str | None = None
    created_at: str = field(default_factory=utc_now)
    #: the highest write id among the source folders the table snapshot read
    max_write_id: int = 0
    #: the metastore's definition of the table (``TableDefinition.to_dict()``), when read by name
    definition: Mapping[str, Any] | None = None
    #: what the reader should know of how this snapshot was read (e.g. storage-only mode)
    warnings: tuple[str, ...] = ()

    @property
    def slice_keys(self) -> tuple[str, ...]:
        return tuple(s.key for s in self.slices)

    @property
    def keys_to_compute(self) -> tuple[str, ...]:
        """The slices a worker must compact (the others reuse earlier files)."""
        return tuple(s.key for s in self.slices if s.reused is None)

    def planned(self, slice_key: str) -> PlannedSlice:
        for planned in self.slices:
            if planned.key == slice_key:
                return planned
        raise KeyError(
            f"slice {slice_key!r} is not part of snapshot {self.snapshot_id} "
            f"(planned: {', '.join(self.slice_keys) or 'none'})"
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON form stored as ``plan.json``, with a checksum of its content (workers
        trust what the plan says: :meth:`from_dict` refuses a damaged one)."""
        body = self._body()
        return {**body, "checksum": _checksum(body)}

    def _body(self) -> dict[str, Any]:
        return {
            "format": MANIFEST_FORMAT + "-plan",
            "version": MANIFEST_VERSION,
            "snapshot_id": self.snapshot_id,
            "out": self.out,
            "table": self.table,
            "write_ids": self.write_ids,
            "txns": self.txns,
            "insert_only": self.insert_only,
            "settings": dict(self.settings),
            "slices": [s.to_dict() for s in self.slices],
            "previous_snapshot_id": self.previous_snapshot_id,
            "created_at": self.created_at,
            "max_write_id": self.max_write_id,
            "definition": dict(self.definition) if self.definition else None,
            "warnings": list(self.warnings),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SnapshotPlan:
        """From :meth:`to_dict`; ValueError if its checksum (when it has one) disagrees."""
        stored = data.get("checksum")
        if stored is not None:
            body = {k: v for k, v in data.items() if k != "checksum"}
            if stored != _checksum(body):
                raise ValueError("its checksum does not match its content")
        return cls(
            snapshot_id=data["snapshot_id"],
            out=data["out"],
            table=data["table"],
            write_ids=data["write_ids"],
            txns=data["txns"],
            insert_only=bool(data["insert_only"]),
            settings=data["settings"],
            slices=tuple(PlannedSlice.from_dict(s) for s in data["slices"]),
            previous_snapshot_id=data.get("previous_snapshot_id"),
            created_at=data["created_at"],
            max_write_id=int(data.get("max_write_id", 0)),
            definition=data.get("definition"),
            warnings=tuple(data.get("warnings", ())),
        )


@dataclass(frozen=True)
class SnapshotResult:
    """A committed snapshot, as its manifest records it.

    ``newly_committed`` is False when the snapshot had been committed before (a re-run).
    """

    snapshot_id: str
    out: str
    manifest_path: str
    sequence: int
    committed_at: str
    table: str
    write_ids: str | None
    txns: str | None
    insert_only: bool
    settings: Mapping[str, Any]
    buckets: tuple[BucketResult, ...]
    previous_snapshot_id: str | None = None
    newly_committed: bool = True
    #: the highest write id among the source folders (the watermark for the next run)
    max_write_id: int = 0
    #: the metastore's definition of the source table, when it was read by name
    definition: Mapping[str, Any] | None = None
    warnings: tuple[str, ...] = ()

    @property
    def table_name(self) -> str | None:
        return self.definition["name"] if self.definition else None

    @property
    def files(self) -> tuple[OutputFile, ...]:
        return tuple(f for b in self.buckets for f in b.files)

    @property
    def rows_written(self) -> int:
        return sum(b.rows_written for b in self.buckets)

    def file_paths(self) -> list[str]:
        """Full paths of the snapshot's data files (for ``pyarrow.dataset`` and the like)."""
        return [posixpath.join(self.out, f.path) for f in self.files]

    def totals(self) -> dict[str, int]:
        return {
            "slices": len(self.buckets),
            "slices_reused": sum(1 for b in self.buckets if b.reused_from),
            "files": len(self.files),
            "bytes": sum(f.size for f in self.files),
            "rows_read": sum(b.rows_read for b in self.buckets),
            "rows_invalid": sum(b.rows_invalid for b in self.buckets),
            "rows_deleted": sum(b.rows_deleted for b in self.buckets),
            "rows_filtered": sum(b.rows_filtered for b in self.buckets),
            "rows_written": self.rows_written,
        }

    def to_dict(self) -> dict[str, Any]:
        """The manifest's JSON form (stable; see the README)."""
        return {
            "format": MANIFEST_FORMAT,
            "version": MANIFEST_VERSION,
            "snapshot_id": self.snapshot_id,
            "sequence": self.sequence,
            "previous_snapshot_id": self.previous_snapshot_id,
            "committed_at": self.committed_at,
            "source": {
                "table": self.table,
                "write_ids": self.write_ids,
                "txns": self.txns,
                "insert_only": self.insert_only,
                "max_write_id": self.max_write_id,
                "definition": dict(self.definition) if self.definition else None,
                "warnings": list(self.warnings),
            },
            "settings": dict(self.settings),
            "files": [{**f.to_dict(), "slice": b.slice_key} for b in self.buckets for f in b.files],
            "slices": [
                {k: v for k, v in b.to_dict().items() if k not in ("snapshot_id",)}
                for b in self.buckets
            ],
            "totals": self.totals(),
        }

    @classmethod
    def from_manifest(
        cls, data: Mapping[str, Any], out: str, manifest_path: str, *, newly_committed: bool
    ) -> SnapshotResult:
        if data.get("format") != MANIFEST_FORMAT:
            raise CommitError(f"{manifest_path}: not an {MANIFEST_FORMAT} manifest")
        source = data["source"]
        sid = data["snapshot_id"]
        result = cls(
            snapshot_id=sid,
            out=out,
            manifest_path=manifest_path,
            sequence=int(data["sequence"]),
            committed_at=data["committed_at"],
            table=source["table"],
            write_ids=source["write_ids"],
            txns=source["txns"],
            insert_only=bool(source["insert_only"]),
            max_write_id=int(source.get("max_write_id", 0)),
            definition=source.get("definition"),
            warnings=tuple(source.get("warnings", ())),
            settings=data["settings"],
            buckets=tuple(
                BucketResult.from_dict({**s, "snapshot_id": sid}) for s in data["slices"]
            ),
            previous_snapshot_id=data.get("previous_snapshot_id"),
            newly_committed=newly_committed,
        )
        result._check_stored(data, manifest_path)
        return result

    def _check_stored(self, data: Mapping[str, Any], manifest_path: str) -> None:
        """A manifest repeats its files and totals beside its slices: a damaged one (a changed
        row count, path or size) disagrees with itself, or its slices do not reconcile."""
        stored = self.to_dict()
        for part in ("files", "totals"):
            if data.get(part) != stored[part]:
                raise CommitError(f"{manifest_path}: damaged manifest, its {part} disagree")
        for bucket in self.buckets:
            try:
                bucket.check_reconciled()
            except ReconciliationError as exc:
                raise CommitError(f"{manifest_path}: damaged manifest ({exc})") from None
            for file in bucket.files:
                match = DATA_FILE_NAME.match(file.path.rsplit("/", 1)[-1])
                owner = bucket.reused_from or self.snapshot_id
                if match is None or match["snapshot"] not in (owner, self.snapshot_id):
                    raise CommitError(
                        f"{manifest_path}: damaged manifest, {file.path} is not a data file "
                        f"of snapshot {owner}"
                    )


@dataclass(frozen=True)
class ExpireResult:
    """What :func:`expire_snapshots` removed."""

    kept: tuple[str, ...]
    removed_snapshots: tuple[str, ...]
    removed_files: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "kept": list(self.kept),
            "removed_snapshots": list(self.removed_snapshots),
            "removed_files": list(self.removed_files),
        }
