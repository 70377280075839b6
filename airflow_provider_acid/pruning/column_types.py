"""Column type families: how predicates and statistics group pyarrow types."""

from __future__ import annotations

import pyarrow as pa

__all__ = ["type_family"]


def type_family(t: pa.DataType) -> str | None:
    """Group a pyarrow type: int, float, decimal, string, date, timestamp, bool or None."""
    if pa.types.is_dictionary(t):
        return type_family(t.value_type)
    if pa.types.is_boolean(t):
        return "bool"
    if pa.types.is_integer(t):
        return "int"
    if pa.types.is_floating(t):
        return "float"
    if pa.types.is_decimal(t):
        return "decimal"
    if pa.types.is_string(t) or pa.types.is_large_string(t) or _is_string_view(t):
        return "string"
    if pa.types.is_date(t):
        return "date"
    if pa.types.is_timestamp(t):
        return "timestamp"
    return None


def _is_string_view(t: pa.DataType) -> bool:
    check = getattr(pa.types, "is_string_view", None)
    return bool(check and check(t))
