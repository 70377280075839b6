"""Hive's bucketing hash (``bucketing_version=2``: Murmur3 with seed 104729).

A bucketed table the simulator writes puts every row in the bucket Hive would:
:func:`hive_bucket_ids` (vectorised for integer, date and boolean columns),
:func:`hive_bucket_hash` for one value.
"""

from __future__ import annotations

import datetime as dt
import struct
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..acid.hive_types import HiveType

_EPOCH_DATE = dt.date(1970, 1, 1)
_MASK32 = 0xFFFFFFFF
_C1, _C2 = 0xCC9E2D51, 0x1B873593
_MURMUR_SEED = 104729


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _MASK32


def _signed32(x: int) -> int:
    x &= _MASK32
    return x - (1 << 32) if x >= 1 << 31 else x


def murmur3_32(data: bytes, seed: int = _MURMUR_SEED) -> int:
    """Hive's ``Murmur3.hash32`` (signed result; tail bytes are sign-extended as Hive does)."""
    h = seed & _MASK32
    blocks = len(data) // 4
    for i in range(blocks):
        k = int.from_bytes(data[4 * i : 4 * i + 4], "little")
        k = _rotl((k * _C1) & _MASK32, 15) * _C2 & _MASK32
        h = (_rotl(h ^ k, 13) * 5 + 0xE6546B64) & _MASK32
    tail = data[4 * blocks :]
    if tail:
        k1 = 0
        for i in reversed(range(len(tail))):
            byte = tail[i] - 256 if tail[i] >= 128 else tail[i]
            k1 ^= (byte << (8 * i)) & _MASK32
        k1 = _rotl((k1 * _C1) & _MASK32, 15) * _C2 & _MASK32
        h ^= k1
    h ^= len(data)
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _MASK32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _MASK32
    h ^= h >> 16
    return _signed32(h)


def hive_bucket_hash(value: Any, hive_type: HiveType | str) -> int:
    """Hive's bucketing hash (``bucketing_version=2``) of one value; ``None`` hashes to 0."""
    t = HiveType.parse(hive_type)
    if value is None:
        return 0
    name = t.name
    if name == "boolean":
        return 1 if value else 0
    if name == "tinyint":
        return int(value)
    if name == "smallint":
        return murmur3_32(struct.pack(">h", value))
    if name == "int":
        return murmur3_32(struct.pack(">i", value))
    if name == "bigint":
        return murmur3_32(struct.pack(">q", value))
    if name == "date":
        days = value if isinstance(value, int) else (value - _EPOCH_DATE).days
        return murmur3_32(struct.pack(">i", days))
    if name == "float":
        # Hive: byteBuffer.putFloat(Float.floatToIntBits(v)), i.e. the bit pattern (an int)
        # converted to a float *numerically* before hashing its bytes.
        bits = 0x7FC00000 if value != value else struct.unpack(">i", struct.pack(">f", value))[0]
        return murmur3_32(struct.pack(">f", float(bits)))
    if name == "double":
        # Hive: byteBuffer.putDouble(Double.doubleToLongBits(v)), the same numeric conversion.
        if value != value:
            bits = 0x7FF8000000000000
        else:
            bits = struct.unpack(">q", struct.pack(">d", value))[0]
        return murmur3_32(struct.pack(">d", float(bits)))
    if name in ("string", "varchar", "char", "binary"):
        data = value.encode("utf-8") if isinstance(value, str) else bytes(value)
        if name == "char":
            data = data.rstrip(b" ")  # Hive hashes the stripped value of a char
        return murmur3_32(data)
    if name == "array":
        result = 0
        for item in value:
            result = (result * 31 + hive_bucket_hash(item, t.children[0])) & _MASK32
        return _signed32(result)
    raise TypeError(f"Hive cannot bucket by a column of type {t}")


def _u32(x: Any) -> pa.Scalar:
    return pa.scalar(x, pa.uint32())


def _vec_rotl(x: pa.Array, r: int) -> pa.Array:
    return pc.bit_wise_or(pc.shift_left(x, _u32(r)), pc.shift_right(x, _u32(32 - r)))


def _vec_bswap(x: pa.Array) -> pa.Array:
    b0 = pc.bit_wise_and(x, _u32(0xFF))
    b1 = pc.bit_wise_and(pc.shift_right(x, _u32(8)), _u32(0xFF))
    b2 = pc.bit_wise_and(pc.shift_right(x, _u32(16)), _u32(0xFF))
    b3 = pc.shift_right(x, _u32(24))
    out = pc.bit_wise_or(pc.shift_left(b0, _u32(24)), pc.shift_left(b1, _u32(16)))
    return pc.bit_wise_or(out, pc.bit_wise_or(pc.shift_left(b2, _u32(8)), b3))


def _vec_murmur_blocks(blocks: Sequence[pa.Array], length: int) -> pa.Array:
    """Vectorised Murmur3 of inputs made of whole little-endian 4-byte ``blocks`` (uint32)."""
    h: pa.Array | pa.Scalar = _u32(_MURMUR_SEED)
    for k in blocks:
        k = pc.multiply(_vec_rotl(pc.multiply(k, _u32(_C1)), 15), _u32(_C2))
        h = pc.bit_wise_xor(h, k)
        h = pc.add(pc.multiply(_vec_rotl(h, 13), _u32(5)), _u32(0xE6546B64))
    h = pc.bit_wise_xor(h, _u32(length))
    h = pc.bit_wise_xor(h, pc.shift_right(h, _u32(16)))
    h = pc.multiply(h, _u32(0x85EBCA6B))
    h = pc.bit_wise_xor(h, pc.shift_right(h, _u32(13)))
    h = pc.multiply(h, _u32(0xC2B2AE35))
    return pc.bit_wise_xor(h, pc.shift_right(h, _u32(16)))


def _vec_hash(array: pa.Array, hive_type: HiveType) -> pa.Array | None:
    """uint32 bucketing hashes of a whole column, or None when not vectorised for the type."""
    name = hive_type.name
    if name in ("int", "date"):
        x = pc.cast(pc.cast(array, pa.int32()), pa.uint32(), safe=False)
        return _vec_murmur_blocks([_vec_bswap(x)], 4)
    if name == "bigint":
        high = pc.cast(pc.shift_right(array, pa.scalar(32, pa.int64())), pa.uint32(), safe=False)
        low = pc.cast(array, pa.uint32(), safe=False)
        return _vec_murmur_blocks([_vec_bswap(high), _vec_bswap(low)], 8)
    if name == "tinyint":
        return pc.cast(pc.cast(array, pa.int32()), pa.uint32(), safe=False)
    if name == "boolean":
        return pc.cast(array, pa.uint32())
    return None


def hive_bucket_ids(
    columns: Sequence[pa.Array | pa.ChunkedArray],
    types: Sequence[HiveType | str],
    num_buckets: int,
) -> pa.Array:
    """The bucket id (int32) Hive assigns each row for bucketing columns ``columns``.

    Combines the per-column hashes as ``h = 31 * h + hash(col)`` and maps the result with
    ``(h & Integer.MAX_VALUE) % num_buckets``, as Hive's ``ObjectInspectorUtils`` does.
    Integer, date and boolean columns are hashed vectorised; other types row by row.
    """
    if not columns:
        raise ValueError("at least one bucketing column is needed")
    total: pa.Array | pa.Scalar = _u32(0)
    for column, t in zip(columns, types, strict=True):
        t = HiveType.parse(t)
        array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
        hashed = _vec_hash(array, t)
        if hashed is None:
            hashed = pa.array(
                [hive_bucket_hash(v, t) & _MASK32 for v in array.to_pylist()], pa.uint32()
            )
        hashed = pc.fill_null(hashed, _u32(0))
        total = pc.add(pc.multiply(total, _u32(31)), hashed)
    positive = pc.bit_wise_and(total, _u32(0x7FFFFFFF))
    quotient = pc.divide(positive, _u32(num_buckets))
    return pc.cast(pc.subtract(positive, pc.multiply(quotient, _u32(num_buckets))), pa.int32())
