"""Writing ORC files as Hive does: plain files and ACID event files with their metadata.

Two engines: pyarrow's ORC writer (fast; the ``hive.acid.*`` user metadata is appended to its
footer afterwards) and pyorc (needed for char/varchar, and for stripes too small for pyarrow to
cut exactly). Both write with Hive's defaults (zlib, 256 KiB compression blocks, a row index
every 10,000 rows) and cut a stripe after every ``stripe_rows`` rows.
"""

from __future__ import annotations

import io
import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyorc
from pyarrow import orc

from ..acid.hive_types import HiveType
from .acid_format import ACID_COLUMN_NAMES, acid_event_type, acid_user_metadata
from .orc_footer import append_user_metadata
from .orc_types import has_char_types, orc_arrow_type, orc_type
from .orc_values import PYORC_CONVERTERS, pyorc_rows

#: Compression names accepted, with pyorc's kind and pyarrow's name for each.
_COMPRESSION = {
    "none": (pyorc.CompressionKind.NONE, "uncompressed"),
    "zlib": (pyorc.CompressionKind.ZLIB, "zlib"),
    "snappy": (pyorc.CompressionKind.SNAPPY, "snappy"),
    "lz4": (pyorc.CompressionKind.LZ4, "lz4"),
    "zstd": (pyorc.CompressionKind.ZSTD, "zstd"),
}
_ENGINES = ("auto", "pyarrow", "pyorc")
_ROW_INDEX_STRIDE = 10_000  # Hive's default
_COMPRESSION_BLOCK_SIZE = 256 * 1024  # Hive's default
_DICTIONARY_KEY_THRESHOLD = 0.8  # Hive's default


def _compression(compression: str) -> tuple[pyorc.CompressionKind, str]:
    try:
        return _COMPRESSION[compression.lower()]
    except KeyError:
        raise ValueError(
            f"unknown compression {compression!r}; use one of {list(_COMPRESSION)}"
        ) from None


def _engine(engine: str, hive_type: HiveType) -> str:
    """``pyarrow`` (fast) unless the type needs pyorc: Arrow has no char/varchar."""
    if engine not in _ENGINES:
        raise ValueError(f"engine must be one of {_ENGINES}, got {engine!r}")
    if engine == "auto":
        return "pyorc" if has_char_types(hive_type) else "pyarrow"
    if engine == "pyarrow" and has_char_types(hive_type):
        raise ValueError("pyarrow cannot write char/varchar columns; use the pyorc engine")
    return engine


@dataclass(frozen=True)
class WrittenFile:
    """What was written to one ORC file."""

    path: str
    rows: int
    stripes: int
    #: ORC user metadata (empty for plain files).
    user_metadata: Mapping[str, bytes] = field(default_factory=dict)


def _makedirs_for(fs: Any, path: str) -> None:
    parent = path.rsplit("/", 1)[0]
    if parent:
        fs.makedirs(parent, exist_ok=True)


def _stripe_lengths(orc_bytes: bytes) -> list[int]:
    """Rows per stripe of an ORC file (read from its footer only)."""
    reader = pyorc.Reader(io.BytesIO(orc_bytes))
    return [len(reader.read_stripe(i)) for i in range(reader.num_of_stripes)]


@dataclass(frozen=True)
class OrcOptions:
    """How a file is written: ``stripe_rows`` rows per stripe, ``compression`` (``zlib`` like
    Hive, ``snappy``, ``lz4``, ``zstd``, ``none``) and ``engine``: ``pyarrow`` (fast), ``pyorc``
    (needed for char/varchar) or ``auto`` (pyarrow when possible)."""

    stripe_rows: int = 100_000
    compression: str = "zlib"
    engine: str = "auto"


def _write_orc(
    fs: Any,
    path: str,
    table: pa.Table,
    file_type: HiveType,
    options: OrcOptions,
    user_metadata: Callable[[list[int]], Mapping[str, bytes]] | None = None,
) -> list[int]:
    """Write ``table`` (columns of the struct ``file_type``) as one ORC file.

    ``user_metadata`` receives the rows per stripe and returns the file's user metadata.
    Returns the rows per stripe.

    Stripes: the pyorc engine cuts one after exactly every ``stripe_rows`` rows (by flushing
    an intermediate footer, as streaming writers do; readers use only the final footer). The
    pyarrow engine adds ``stripe_rows`` rows at a time with a one-byte stripe size: the ORC
    writer then cuts a stripe at the first such boundary where the stripe's compressed streams
    are non-empty, which for realistic sizes (a compression block of data per ``stripe_rows``
    rows) is every boundary. ``auto`` tries pyarrow and falls back to pyorc when the stripes
    did not come out exact. The metadata is computed from the stripes actually written.
    """
    stripe_rows, engine = options.stripe_rows, options.engine
    if stripe_rows < 1:
        raise ValueError("stripe_rows must be positive")
    kind, arrow_compression = _compression(options.compression)
    n = table.num_rows
    exact = [min(stripe_rows, n - start) for start in range(0, n, stripe_rows)]
    chosen = _engine(engine, file_type)
    data = b""
    if chosen == "pyarrow":
        sink = pa.BufferOutputStream()
        # One chunk: otherwise the writer also adds (and may cut a stripe after) every chunk.
        schema = pa.schema([pa.field(n, orc_arrow_type(t)) for n, t in file_type.fields])
        orc.write_table(
            table.cast(schema).combine_chunks(),
            sink,
            file_version="0.12",
            batch_size=stripe_rows,
            stripe_size=1,
            compression=arrow_compression,
            compression_block_size=_COMPRESSION_BLOCK_SIZE,
            row_index_stride=_ROW_INDEX_STRIDE,
            dictionary_key_size_threshold=_DICTIONARY_KEY_THRESHOLD,
        )
        data = sink.getvalue().to_pybytes()
        lengths = _stripe_lengths(data)
        if engine == "auto" and lengths != exact:
            chosen = "pyorc"  # stripes too small for pyarrow's cuts to be exact
        elif user_metadata is not None:
            data = append_user_metadata(data, user_metadata(lengths))
    if chosen == "pyorc":
        lengths = exact
        buffer = io.BytesIO()
        writer = pyorc.Writer(
            buffer,
            orc_type(file_type),
            batch_size=min(stripe_rows, 10_000),
            row_index_stride=_ROW_INDEX_STRIDE,
            compression=kind,
            compression_block_size=_COMPRESSION_BLOCK_SIZE,
            converters=PYORC_CONVERTERS,
            dict_key_size_threshold=_DICTIONARY_KEY_THRESHOLD,
        )
        rows = pyorc_rows(table, file_type)
        for length in lengths:
            writer.writerows(itertools.islice(rows, length))
            if length == stripe_rows:
                writer.write_intermediate_footer()  # cuts the stripe here
        if user_metadata is not None:
            writer.set_user_metadata(**user_metadata(lengths))
        writer.close()
        data = buffer.getvalue()
    _makedirs_for(fs, path)
    fs.pipe_file(path, data)
    return lengths


def write_plain_file(
    fs: Any, path: str, rows: pa.Table, row_type: HiveType, **options: Any
) -> WrittenFile:
    """Write ``rows`` as a plain-schema ORC file (pre-ACID originals, insert-only tables).

    ``rows`` must have the columns of the struct ``row_type``. ``options``: the fields of
    :class:`OrcOptions` (``stripe_rows``, ``compression``, ``engine``).
    """
    lengths = _write_orc(fs, path, rows, row_type, OrcOptions(**options))
    return WrittenFile(path, rows.num_rows, len(lengths))


def _is_sorted(events: pa.Table) -> bool:
    """Cheap check for the usual case: one (originalTransaction, bucket), rowIds ascending."""
    for name in ("originalTransaction", "bucket"):
        bounds = pc.min_max(events[name])
        if bounds["min"] != bounds["max"]:
            return False
    row_ids = events["rowId"].combine_chunks()
    n = len(row_ids)
    return not pc.any(pc.less(row_ids.slice(1), row_ids.slice(0, n - 1))).as_py()


def write_acid_file(
    fs: Any, path: str, events: pa.Table, row_type: HiveType, *, sort: bool = True, **options: Any
) -> WrittenFile:
    """Write ACID events as Hive 3 does, with the ``hive.acid.*`` user metadata.

    ``events`` has the columns ``operation``, ``originalTransaction``, ``bucket``, ``rowId``,
    ``currentTransaction`` and ``row`` (a struct column of ``orc_arrow_type(row_type)``, null for
    delete events). With ``sort`` (the default) events are sorted by
    ``(originalTransaction, bucket, rowId)`` as Hive keeps them. ``options``: the fields of
    :class:`OrcOptions`.
    """
    orc_options = OrcOptions(**options)
    missing = [c for c in ACID_COLUMN_NAMES if c not in events.column_names]
    if missing:
        raise ValueError(f"ACID events lack columns {missing}")
    events = events.select(list(ACID_COLUMN_NAMES))
    for name in ACID_COLUMN_NAMES[:5]:
        if events[name].null_count:
            raise ValueError(f"ACID column {name} must not contain nulls")
    if sort and events.num_rows > 1 and not _is_sorted(events):
        events = events.sort_by(
            [("originalTransaction", "ascending"), ("bucket", "ascending"), ("rowId", "ascending")]
        )
    written: dict[str, bytes] = {}

    def metadata(lengths: list[int]) -> dict[str, bytes]:
        written.update(acid_user_metadata(events, lengths))
        return written

    lengths = _write_orc(fs, path, events, acid_event_type(row_type), orc_options, metadata)
    return WrittenFile(path, events.num_rows, len(lengths), written)
