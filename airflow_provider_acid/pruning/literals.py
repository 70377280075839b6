"""Reading literal values from text: numbers, floats, booleans, dates and timestamps.

Used by the SQL parser (typed literals, casts) and by literal coercion (a string compared
with a number, date or timestamp column). Every reader raises ``ValueError`` for text it
cannot read (:func:`parse_number` raises what its ``fail`` callable returns).
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import re
from collections.abc import Callable
from typing import Any

__all__ = ["parse_bool", "parse_date", "parse_float", "parse_number", "parse_timestamp"]


def parse_number(text: str, fail: Callable[[], Exception]) -> int | decimal.Decimal:
    """An integer as int, any other number as Decimal; raises ``fail()`` otherwise."""
    text = str(text)
    try:
        if re.fullmatch(r"[+-]?\d+", text):
            return int(text)
        return decimal.Decimal(text)
    except (ValueError, decimal.InvalidOperation) as exc:
        raise fail() from exc


def parse_float(value: Any) -> float:
    """A float, also from ``NaN`` / ``Infinity`` / ``-inf`` text in any case."""
    if isinstance(value, str):
        text = value.strip().lower()
        if text in ("nan", "+nan", "-nan"):
            return math.nan
        if text in ("infinity", "+infinity", "inf", "+inf"):
            return math.inf
        if text in ("-infinity", "-inf"):
            return -math.inf
    return float(value)


def parse_bool(value: Any) -> bool:
    """A bool, or ``true`` / ``false`` text in any case."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ValueError(f"not a boolean: {value!r}")


_DATE_RE = re.compile(r"^(\d{4})-(\d{1,2})-(\d{1,2})$")
_TS_RE = re.compile(
    r"^(\d{4})-(\d{1,2})-(\d{1,2})(?:[ T](\d{1,2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?)?"
    r"\s*(Z|[+-]\d{2}:?\d{2})?$"
)


def parse_date(value: Any) -> dt.date:
    """A date, or ``YYYY-MM-DD`` text (a datetime is not a date)."""
    if isinstance(value, dt.datetime):
        raise ValueError(f"not a date: {value!r}")
    if isinstance(value, dt.date):
        return value
    m = _DATE_RE.match(str(value).strip())
    if not m:
        raise ValueError(f"not a date (YYYY-MM-DD): {value!r}")
    return dt.date(int(m.group(1)), int(m.group(2)), int(m.group(3)))


def parse_timestamp(value: Any) -> dt.datetime:
    """A datetime (a date is its midnight), or ``YYYY-MM-DD[ HH:MM[:SS[.f]]][zone]`` text."""
    if isinstance(value, dt.datetime):
        return value
    if isinstance(value, dt.date):
        return dt.datetime(value.year, value.month, value.day)
    m = _TS_RE.match(str(value).strip())
    if not m:
        raise ValueError(f"not a timestamp (YYYY-MM-DD HH:MM:SS[.ffffff]): {value!r}")
    year, month, day, hh, mm, ss, frac, zone = m.groups()
    micro = 0
    if frac:
        digits = frac.ljust(9, "0")
        if int(digits[6:]) != 0:
            raise ValueError(f"sub-microsecond timestamp literals are not supported: {value!r}")
        micro = int(digits[:6])
    tz = None
    if zone:
        if zone == "Z":
            tz = dt.timezone.utc
        else:
            sign = -1 if zone[0] == "-" else 1
            z = zone[1:].replace(":", "")
            tz = dt.timezone(sign * dt.timedelta(hours=int(z[:2]), minutes=int(z[2:])))
    return dt.datetime(
        int(year), int(month), int(day), int(hh or 0), int(mm or 0), int(ss or 0), micro, tz
    )
