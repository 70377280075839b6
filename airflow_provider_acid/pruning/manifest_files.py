"""The slice manifest as a value and as a file: what :mod:`.manifest` computes, readers read.

A :class:`SliceManifest` lists the kept slices (:class:`KeptSlice`, each with its files, as
:class:`ManifestFile` values), the write-id list, the normalised predicate and the
:class:`PruningMetrics`. :func:`write_manifest` writes it whole (JSON, JSON lines for
``.jsonl``, Parquet for ``.parquet``, never half-written); :func:`read_manifest` reads any of
them back, refusing a damaged or foreign file with a :class:`SliceManifestError` naming it;
:func:`manifest_checksum` is its content's digest.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from fsspec import AbstractFileSystem

from ..acid.listing import location_uri, resolve_filesystem
from ..acid.locations import check_outside_table
from ..acid.source import TableDefinition, TableSource
from ..acid.storage import naming, read_whole, write_whole
from .explain import SliceVerdict

FORMAT = "airflow-acid/slice-manifest"
VERSION = 1
GRANULARITIES = ("slice", "file")


@dataclass(frozen=True)
class PruningMetrics:
    """What pruning skipped, and what each step cost."""

    partitions_total: int
    partitions_kept: int
    slices_total: int
    slices_kept: int
    files_total: int
    files_candidate: int
    files_not_indexed: int
    bytes_total: int
    bytes_kept: int
    #: slices of the kept partitions whose bucket cannot hold a match (Hive's bucketing hash)
    slices_pruned_by_bucket: int = 0
    index_read_seconds: float = 0.0
    evaluate_seconds: float = 0.0
    manifest_seconds: float = 0.0

    @property
    def skipping_ratio(self) -> float:
        """Share of the snapshot's data files that cannot hold a matching row (Hudi's ratio)."""
        if not self.files_total:
            return 0.0
        return 1.0 - self.files_candidate / self.files_total

    def to_dict(self) -> dict[str, Any]:
        return {
            "partitions_total": self.partitions_total,
            "partitions_kept": self.partitions_kept,
            "slices_total": self.slices_total,
            "slices_kept": self.slices_kept,
            "slices_pruned_by_bucket": self.slices_pruned_by_bucket,
            "files_total": self.files_total,
            "files_candidate": self.files_candidate,
            "files_not_indexed": self.files_not_indexed,
            "bytes_total": self.bytes_total,
            "bytes_kept": self.bytes_kept,
            "skipping_ratio": round(self.skipping_ratio, 6),
            "index_read_seconds": round(self.index_read_seconds, 6),
            "evaluate_seconds": round(self.evaluate_seconds, 6),
            "manifest_seconds": round(self.manifest_seconds, 6),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PruningMetrics:
        names = [f for f in cls.__dataclass_fields__]
        return cls(**{k: data[k] for k in names if k in data})


@dataclass(frozen=True)
class ManifestFile:
    """One file of a kept slice, relative to the table root."""

    path: str
    size: int
    role: str
    candidate: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "size": self.size,
            "role": self.role,
            "candidate": self.candidate,
        }


@dataclass(frozen=True)
class KeptSlice:
    """A slice that may hold matching rows; ``key`` is the table model's slice key."""

    key: str
    partition: str
    partition_values: dict[str, str | None]
    bucket: int
    files: tuple[ManifestFile, ...]

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "partition": self.partition,
            "partition_values": self.partition_values,
            "bucket": self.bucket,
            "files": [f.to_dict() for f in self.files],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> KeptSlice:
        return cls(
            key=data["key"],
            partition=data["partition"],
            partition_values=dict(data["partition_values"]),
            bucket=int(data["bucket"]),
            files=tuple(ManifestFile(**f) for f in data["files"]),
        )


@dataclass(frozen=True)
class SliceManifest:
    """The kept slices of one snapshot for one predicate."""

    table: str
    write_ids: str | None
    txns: str | None
    predicate: str
    granularity: str
    index_uri: str | None
    slices: tuple[KeptSlice, ...]
    metrics: PruningMetrics
    created_at: str = field(
        default_factory=lambda: dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    )
    #: the metastore's definition of the table (``TableDefinition``), when read by name
    definition: TableDefinition | None = None
    #: what a reader of the manifest should know (e.g. that it was read storage-only)
    warnings: tuple[str, ...] = ()
    #: every slice's verdict, kept or why pruned (``explain=True``; None otherwise)
    verdicts: tuple[SliceVerdict, ...] | None = None

    @property
    def slice_keys(self) -> list[str]:
        return [s.key for s in self.slices]

    @property
    def source(self) -> TableSource:
        """The pinned source the manifest was computed from: compacting it reads the same
        view (write-id and transaction lists) and, by name, only the kept partitions."""
        definition = self.definition
        if definition is not None and definition.partitions is not None:
            kept = list(dict.fromkeys(s.partition for s in self.slices))
            definition = definition.with_partitions(kept)
        insert_only = definition.insert_only if definition is not None else False
        return TableSource(
            self.table, self.write_ids, self.txns, insert_only, definition, self.warnings
        )

    def header(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "version": VERSION,
            "table": self.table,
            "write_ids": self.write_ids,
            "txns": self.txns,
            "predicate": self.predicate,
            "granularity": self.granularity,
            "index_uri": self.index_uri,
            "created_at": self.created_at,
            "metrics": self.metrics.to_dict(),
            "definition": self.definition.to_dict() if self.definition else None,
            "warnings": list(self.warnings),
            **(
                {"verdicts": [v.to_dict() for v in self.verdicts]}
                if self.verdicts is not None
                else {}
            ),
        }

    def to_dict(self) -> dict[str, Any]:
        return {**self.header(), "slices": [s.to_dict() for s in self.slices]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SliceManifest:
        if data.get("format") != FORMAT:
            raise ValueError(f"not a slice manifest (format {data.get('format')!r})")
        return cls(
            table=data["table"],
            write_ids=data["write_ids"],
            txns=data.get("txns"),
            predicate=data["predicate"],
            granularity=data["granularity"],
            index_uri=data.get("index_uri"),
            slices=tuple(KeptSlice.from_dict(s) for s in data["slices"]),
            metrics=PruningMetrics.from_dict(data["metrics"]),
            created_at=data["created_at"],
            definition=(
                TableDefinition.from_dict(data["definition"]) if data.get("definition") else None
            ),
            warnings=tuple(data.get("warnings", ())),
            verdicts=(
                tuple(SliceVerdict.from_dict(v) for v in data["verdicts"])
                if data.get("verdicts") is not None
                else None
            ),
        )


def write_manifest(
    manifest: SliceManifest, uri: str, storage_options: dict[str, Any] | None = None
) -> str:
    """Write as JSON, JSON lines (``.jsonl``: header line, then a slice a line) or Parquet
    (``.parquet``: a row per file, the header in the schema metadata). Returns its URI
    (``s3://...`` on S3, a plain path locally)."""
    fs, path = resolve_filesystem(uri, storage_options=storage_options)
    check_outside_table(location_uri(fs, path), manifest.table, "manifest location")
    checksum = manifest_checksum(manifest)  # read_manifest refuses a damaged copy
    if path.endswith(".parquet"):
        rows = [
            {"slice": s.key, "partition": s.partition, "bucket": s.bucket, **f.to_dict()}
            for s in manifest.slices
            for f in s.files
        ]
        table = pa.Table.from_pylist(rows, schema=_PARQUET_SCHEMA).replace_schema_metadata(
            {
                "airflow_acid_manifest": json.dumps(
                    {
                        **manifest.header(),
                        "slices": [
                            {k: v for k, v in s.to_dict().items() if k != "files"}
                            for s in manifest.slices
                        ],
                        "checksum": checksum,
                    }
                )
            }
        )
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink, compression="zstd")
        data = sink.getvalue().to_pybytes()
    elif path.endswith(".jsonl"):
        lines = [
            {**manifest.header(), "checksum": checksum},
            *(s.to_dict() for s in manifest.slices),
        ]
        data = "".join(json.dumps(line) + "\n" for line in lines).encode()
    else:
        data = json.dumps({**manifest.to_dict(), "checksum": checksum}, indent=1).encode()
    write_whole(fs, path, data)  # a reader never opens half a manifest
    return location_uri(fs, path)


_PARQUET_SCHEMA = pa.schema(
    [
        ("slice", pa.string()),
        ("partition", pa.string()),
        ("bucket", pa.int32()),
        ("path", pa.string()),
        ("size", pa.int64()),
        ("role", pa.string()),
        ("candidate", pa.bool_()),
    ]
)


class SliceManifestError(ValueError):
    """A slice manifest file that cannot be read (damaged, or not a manifest); names it."""


def read_manifest(uri: str, storage_options: dict[str, Any] | None = None) -> SliceManifest:
    """Read a manifest written by :func:`write_manifest`, in any of its three forms; a file
    that does not parse as one is a :class:`SliceManifestError` naming it."""
    fs, path = resolve_filesystem(uri, storage_options=storage_options)
    try:
        return _read_manifest(fs, path)
    except (
        pa.ArrowException,
        ValueError,
        KeyError,
        TypeError,
        AttributeError,
        IndexError,
    ) as exc:
        raise SliceManifestError(
            f"{uri}: not a readable slice manifest ({type(exc).__name__}: {exc})"
        ) from None


def manifest_checksum(manifest: SliceManifest) -> str:
    """sha256 of a manifest's content (its JSON form), stored with it by write_manifest."""
    canonical = json.loads(json.dumps(manifest.to_dict(), default=str))
    text = json.dumps(canonical, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def _read_manifest(fs: AbstractFileSystem, path: str) -> SliceManifest:
    with naming(path):
        raw = read_whole(fs, path)  # storage errors are raised here, the rest is parsing
    try:
        data = _parse_manifest(path, raw)
    except OSError as exc:  # pyarrow's for a damaged Parquet file
        raise ValueError(str(exc)) from None
    checksum = data.pop("checksum", None)
    manifest = SliceManifest.from_dict(data)
    if checksum is not None and checksum != manifest_checksum(manifest):
        raise ValueError("its checksum does not match its content")
    return manifest


def _parse_manifest(path: str, raw: bytes) -> dict[str, Any]:
    if path.endswith(".parquet"):
        table = pq.read_table(pa.BufferReader(raw))
        data = json.loads(table.schema.metadata[b"airflow_acid_manifest"])
        files: dict[str, list[dict[str, Any]]] = {}
        for row in table.to_pylist():
            files.setdefault(row["slice"], []).append(
                {k: row[k] for k in ("path", "size", "role", "candidate")}
            )
        for s in data["slices"]:
            s["files"] = files.get(s["key"], [])
        return data
    text = raw.decode("utf-8")
    if path.endswith(".jsonl"):
        lines = [json.loads(line) for line in text.splitlines() if line.strip()]
        return {**lines[0], "slices": lines[1:]}
    return dict(json.loads(text))
