"""Hive's bucketing hash: the bucket Hive writes a row of a ``CLUSTERED BY`` table to.

Hive (``serde2.objectinspector.ObjectInspectorUtils``) hashes each bucketing column, combines
the hashes as ``h = 31 * h + hash(column)`` (Java ``int`` arithmetic) and maps the result to a
bucket with ``getBucketNumber``: ``(h & Integer.MAX_VALUE) % numBuckets``.

The column hash depends on the table's ``bucketing_version``:

* **2** (Hive 3's default): ``getBucketHashCode`` / ``hashCodeMurmur``, Hive's
  ``Murmur3.hash32`` (seed 104729) over the value's big-endian bytes: ``smallint`` 2 bytes,
  ``int`` and ``date`` (days since 1970-01-01) 4, ``bigint`` 8; ``float``/``double`` the bytes
  of ``(float) floatToIntBits(v)`` / ``(double) doubleToLongBits(v)`` (the bit pattern converted
  *numerically*, as Hive's ``ByteBuffer.putFloat(int)`` does); ``string``/``varchar`` their
  UTF-8 bytes, ``char`` without its trailing spaces; ``timestamp`` the bytes of its
  ``TimestampWritableV2`` serialisation (4 bytes of epoch seconds with a flag bit, then the
  reversed nanoseconds and the high bits of the seconds as Hadoop VLongs); ``decimal`` the
  ``BigInteger.toByteArray()`` of the unscaled value of the decimal without trailing
  fractional zeros (``HiveDecimalWritable.getInternalStorage``). ``boolean`` is 1/0 and
  ``tinyint`` the value itself, unhashed.
* **1**: ``getBucketHashCodeOld`` / ``hashCode``, Java's hash codes: ``boolean`` 1/0,
  ``tinyint``/``smallint``/``int`` the value, ``bigint`` ``(int) (v >>> 32 ^ v)``, ``float``
  ``floatToIntBits``, ``double`` as ``Double.hashCode``, ``date`` the day number, ``string``
  ``r = 31 * r + byte`` over the UTF-8 bytes (signed) from 0, ``varchar`` (and ``char``,
  stripped) the same from 1 (Hadoop's ``Text.hashCode``); ``decimal``
  ``BigDecimal.hashCode`` of the decimal without trailing fractional zeros
  (``31 * unscaled.hashCode() + scale``).

Both versions: NULL hashes to 0 and ``array<T>`` to ``r = 31 * r + hash(element)``.

What is *not* hashed (:class:`UnsupportedBucketingType`, so a pruner keeps every bucket):
``timestamp`` in version 1 (Hive goes through ``java.sql.Timestamp.valueOf`` in the writer's
JVM time zone, so the hash depends on a setting of the writer no table records), ``binary``
(Hive hashes ``BytesWritable``'s whole backing array, whose length is not the value's), ``map``,
``struct``, intervals and local-time-zone timestamps.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import struct
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from .hive_types import HiveType

__all__ = [
    "BUCKETING_VERSIONS",
    "MURMUR_SEED",
    "UnsupportedBucketingType",
    "bucket_hash_code",
    "bucket_number",
    "bucket_of",
    "field_hash",
    "hive_bucket_ids",
    "murmur3_32",
]

BUCKETING_VERSIONS = (1, 2)
MURMUR_SEED = 104729  # Murmur3.DEFAULT_SEED
_EPOCH_DATE = dt.date(1970, 1, 1)
_MASK32 = 0xFFFFFFFF
_C1, _C2 = 0xCC9E2D51, 0x1B873593
_INT_RANGES = {
    "tinyint": (-(2**7), 2**7 - 1),
    "smallint": (-(2**15), 2**15 - 1),
    "int": (-(2**31), 2**31 - 1),
    "bigint": (-(2**63), 2**63 - 1),
}
_STRINGS = ("string", "varchar", "char")
_CANONICAL_FLOAT_NAN = 0x7FC00000  # Float.floatToIntBits(NaN)
_CANONICAL_DOUBLE_NAN = 0x7FF8000000000000  # Double.doubleToLongBits(NaN)


class UnsupportedBucketingType(ValueError):
    """A type, version or value whose Hive bucketing hash this module cannot compute exactly."""


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _MASK32


def _signed32(x: int) -> int:
    x &= _MASK32
    return x - (1 << 32) if x >= 1 << 31 else x


def murmur3_32(data: bytes, seed: int = MURMUR_SEED) -> int:
    """Hive's ``Murmur3.hash32(byte[], ...)`` (signed result).

    As in Hive, the tail bytes (the last ``len % 4``) are sign-extended before mixing, which
    differs from the reference MurmurHash3 for tail bytes >= 0x80.
    """
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


def _java_bytes_hash(data: bytes, initial: int) -> int:
    """``r = 31 * r + b`` over signed bytes (Hive's string hash: from 0; ``Text.hashCode``: 1)."""
    r = initial
    for b in data:
        r = (r * 31 + (b - 256 if b >= 128 else b)) & _MASK32
    return _signed32(r)


def _float_bits(value: float) -> int:
    """``Float.floatToIntBits`` (NaN canonical), as a signed int."""
    if math.isnan(value):
        return _CANONICAL_FLOAT_NAN
    return struct.unpack(">i", struct.pack(">f", value))[0]


def _double_bits(value: float) -> int:
    """``Double.doubleToLongBits`` (NaN canonical), as a signed long."""
    if math.isnan(value):
        return _CANONICAL_DOUBLE_NAN
    return struct.unpack(">q", struct.pack(">d", value))[0]


def _integer(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise UnsupportedBucketingType(f"{value!r} is not a {name} value")
    lo, hi = _INT_RANGES[name]
    if not lo <= value <= hi:
        raise UnsupportedBucketingType(f"{value} is out of range for {name}")
    return value


def _days(value: Any) -> int:
    if isinstance(value, dt.datetime) or not isinstance(value, (dt.date, int)):
        raise UnsupportedBucketingType(f"{value!r} is not a date value")
    if isinstance(value, bool):
        raise UnsupportedBucketingType(f"{value!r} is not a date value")
    return value if isinstance(value, int) else (value - _EPOCH_DATE).days


def _string_bytes(value: Any, name: str) -> bytes:
    if isinstance(value, str):
        data = value.encode("utf-8")
    else:
        raise UnsupportedBucketingType(f"{value!r} is not a {name} value")
    if name == "char":
        data = data.rstrip(b" ")  # HiveCharWritable.getStrippedValue
    return data


def _float(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UnsupportedBucketingType(f"{value!r} is not a {name} value")
    value = float(value)
    if name == "float" and not math.isnan(value):
        try:
            narrowed = struct.unpack(">f", struct.pack(">f", value))[0]
        except OverflowError:
            raise UnsupportedBucketingType(f"{value!r} is not a float value") from None
        if narrowed != value:  # not a float32: which stored value it stands for is unclear
            raise UnsupportedBucketingType(f"{value!r} is not exactly a float value")
    return value


def _vlong(value: int) -> bytes:
    """Hadoop's ``WritableUtils.writeVLong`` (``LazyBinaryUtils.writeVLongToByteArray``)."""
    if -112 <= value <= 127:
        return struct.pack(">b", value)
    first = -112
    if value < 0:
        value ^= -1
        first = -120
    tmp = value
    while tmp:
        tmp >>= 8
        first -= 1
    n = -(first + 120) if first < -120 else -(first + 112)
    return struct.pack(">b", first) + value.to_bytes(n, "big")


def timestamp_bytes(value: dt.datetime) -> bytes:
    """``TimestampWritableV2.getBytes()`` of a wall-clock time (``convertTimestampToBytes``)."""
    td = value - dt.datetime(1970, 1, 1)
    seconds = td.days * 86400 + td.seconds
    nanos = td.microseconds * 1000
    has_second_vint = seconds < 0 or seconds > 0x7FFFFFFF
    reversed_nanos = int(f"{nanos:09d}"[::-1]) if nanos else 0
    tail = b""
    if has_second_vint or reversed_nanos:
        tail = _vlong(-reversed_nanos - 1 if has_second_vint else reversed_nanos)
    first = seconds & _MASK32
    first = first | 0x80000000 if reversed_nanos or has_second_vint else first & 0x7FFFFFFF
    if has_second_vint:
        tail += _vlong(seconds >> 31)
    return first.to_bytes(4, "big") + tail


def _decimal_parts(value: Any) -> tuple[int, int]:
    """``(unscaled, scale)`` of a decimal without trailing fractional zeros (as Hive keeps it)."""
    if isinstance(value, bool) or not isinstance(value, (int, decimal.Decimal)):
        raise UnsupportedBucketingType(f"{value!r} is not a decimal value")
    d = decimal.Decimal(value)
    if not d.is_finite():
        raise UnsupportedBucketingType(f"{value!r} is not a finite decimal")
    sign, digits, exponent = d.as_tuple()
    unscaled = int("".join(map(str, digits)) or "0") * (-1 if sign else 1)
    scale = -int(exponent)
    if scale < 0:
        unscaled *= 10**-scale
        scale = 0
    while scale > 0 and unscaled % 10 == 0:
        unscaled //= 10
        scale -= 1
    return unscaled, scale


def _big_integer_bytes(n: int) -> bytes:
    """``BigInteger.toByteArray()``: minimal big-endian two's complement."""
    return n.to_bytes(
        (n.bit_length() if n >= 0 else (~n).bit_length()) // 8 + 1, "big", signed=True
    )


def _big_integer_hash(n: int) -> int:
    """``BigInteger.hashCode()``: ``h = 31 * h + word`` over |n|'s 32-bit words, times signum."""
    words = []
    a = abs(n)
    while a:
        words.append(a & _MASK32)
        a >>= 32
    h = 0
    for w in reversed(words):
        h = (31 * h + w) & _MASK32
    return _signed32(h * (1 if n > 0 else -1 if n < 0 else 0))


def field_hash(value: Any, hive_type: HiveType | str, version: int = 2) -> int:
    """Hive's bucketing hash of one column value (``bucketing_version`` 1 or 2).

    Raises :class:`UnsupportedBucketingType` when the type, the version or the value cannot
    be hashed exactly as Hive does (see the module docstring).
    """
    if version not in BUCKETING_VERSIONS:
        raise UnsupportedBucketingType(f"unknown bucketing_version {version!r}")
    t = HiveType.parse(hive_type)
    if value is None:
        return 0
    name = t.name
    if name == "boolean":
        if not isinstance(value, bool):
            raise UnsupportedBucketingType(f"{value!r} is not a boolean value")
        return 1 if value else 0
    if name in _INT_RANGES:
        v = _integer(value, name)
        if name == "tinyint" or version == 1 and name in ("smallint", "int"):
            return v
        if version == 1:  # bigint: Long.hashCode
            return _signed32((v >> 32) ^ v)
        fmt = {"smallint": ">h", "int": ">i", "bigint": ">q"}[name]
        return murmur3_32(struct.pack(fmt, v))
    if name == "date":
        days = _days(value)
        if not -(2**31) <= days < 2**31:
            raise UnsupportedBucketingType(f"{value!r} is out of range for date")
        return days if version == 1 else murmur3_32(struct.pack(">i", days))
    if name == "float":
        bits = _float_bits(_float(value, name))
        # v2: byteBuffer.putFloat(Float.floatToIntBits(v)): the int converted to a float
        return bits if version == 1 else murmur3_32(struct.pack(">f", float(bits)))
    if name == "double":
        bits = _double_bits(_float(value, name))
        if version == 1:
            return _signed32((bits >> 32) ^ bits)
        # v2: byteBuffer.putDouble(Double.doubleToLongBits(v)): the long converted to a double
        return murmur3_32(struct.pack(">d", float(bits)))
    if name in _STRINGS:
        data = _string_bytes(value, name)
        if version == 2:
            return murmur3_32(data)
        return _java_bytes_hash(data, 0 if name == "string" else 1)
    if name == "timestamp" and version == 2:
        if not isinstance(value, dt.datetime) or value.tzinfo is not None:
            raise UnsupportedBucketingType(f"{value!r} is not a wall-clock timestamp")
        return murmur3_32(timestamp_bytes(value))
    if name == "decimal":
        unscaled, scale = _decimal_parts(value)
        if version == 1:  # HiveDecimal.hashCode: BigDecimal's
            return _signed32(31 * _big_integer_hash(unscaled) + scale)
        return murmur3_32(_big_integer_bytes(unscaled))
    if name == "array":
        if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
            raise UnsupportedBucketingType(f"{value!r} is not an array value")
        result = 0
        for item in value:
            result = (result * 31 + field_hash(item, t.children[0], version)) & _MASK32
        return _signed32(result)
    raise UnsupportedBucketingType(
        f"the bucketing hash of {t} (bucketing_version {version}) is not computed here"
    )


def bucket_hash_code(
    values: Sequence[Any], types: Sequence[HiveType | str], version: int = 2
) -> int:
    """The combined hash of a row's bucketing columns: ``h = 31 * h + field_hash(v)``."""
    if not types or len(values) != len(types):
        raise ValueError("one value per bucketing column is needed")
    h = 0
    for value, t in zip(values, types, strict=True):
        h = (h * 31 + field_hash(value, t, version)) & _MASK32
    return _signed32(h)


def bucket_number(hash_code: int, num_buckets: int) -> int:
    """``ObjectInspectorUtils.getBucketNumber``: ``(hashCode & Integer.MAX_VALUE) % n``."""
    if num_buckets <= 0:
        raise ValueError("the number of buckets must be > 0")
    return (hash_code & 0x7FFFFFFF) % num_buckets


def bucket_of(
    values: Sequence[Any], types: Sequence[HiveType | str], num_buckets: int, version: int = 2
) -> int:
    """The bucket Hive writes a row with bucketing column values ``values`` to."""
    return bucket_number(bucket_hash_code(values, types, version), num_buckets)


# -- vectorised, for writing whole columns -----------------------------------------------------


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
    h: pa.Array | pa.Scalar = _u32(MURMUR_SEED)
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


def _as_u32(array: pa.Array, via: pa.DataType) -> pa.Array:
    return pc.cast(pc.cast(array, via), pa.uint32(), safe=False)


def _vec_hash(array: pa.Array, hive_type: HiveType, version: int) -> pa.Array | None:
    """uint32 bucketing hashes of a whole column, or None when not vectorised for the type."""
    name = hive_type.name
    if name == "boolean":
        return pc.cast(array, pa.uint32())
    if name == "tinyint" or version == 1 and name in ("smallint", "int", "date"):
        return _as_u32(array, pa.int32())
    if name in ("int", "date"):
        return _vec_murmur_blocks([_vec_bswap(_as_u32(array, pa.int32()))], 4)
    if name == "bigint":
        array = pc.cast(array, pa.int64())
        high = pc.cast(pc.shift_right(array, pa.scalar(32, pa.int64())), pa.uint32(), safe=False)
        low = pc.cast(array, pa.uint32(), safe=False)
        if version == 1:
            return pc.bit_wise_xor(high, low)
        return _vec_murmur_blocks([_vec_bswap(high), _vec_bswap(low)], 8)
    return None


def hive_bucket_ids(
    columns: Sequence[pa.Array | pa.ChunkedArray],
    types: Sequence[HiveType | str],
    num_buckets: int,
    version: int = 2,
) -> pa.Array:
    """The bucket id (int32) Hive assigns each row for bucketing columns ``columns``.

    Integer, date and boolean columns are hashed vectorised, other types row by row
    (:func:`field_hash`, which raises :class:`UnsupportedBucketingType` for what it cannot hash).
    """
    if not columns:
        raise ValueError("at least one bucketing column is needed")
    if num_buckets <= 0:
        raise ValueError("the number of buckets must be > 0")
    if version not in BUCKETING_VERSIONS:
        raise UnsupportedBucketingType(f"unknown bucketing_version {version!r}")
    total: pa.Array | pa.Scalar = _u32(0)
    for column, t in zip(columns, types, strict=True):
        t = HiveType.parse(t)
        array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
        hashed = _vec_hash(array, t, version)
        if hashed is None:
            hashed = pa.array(
                [field_hash(v, t, version) & _MASK32 for v in array.to_pylist()], pa.uint32()
            )
        hashed = pc.fill_null(hashed, _u32(0))
        total = pc.add(pc.multiply(total, _u32(31)), hashed)
    positive = pc.bit_wise_and(total, _u32(0x7FFFFFFF))
    quotient = pc.divide(positive, _u32(num_buckets))
    return pc.cast(pc.subtract(positive, pc.multiply(quotient, _u32(num_buckets))), pa.int32())
