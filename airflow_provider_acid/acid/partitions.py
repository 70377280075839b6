"""Hive partition folders: ``k=v`` names, Hive's path escaping, the default partition."""

from __future__ import annotations

import re
from dataclasses import dataclass

#: The folder value Hive writes for a null partition value.
DEFAULT_PARTITION_NAME = "__HIVE_DEFAULT_PARTITION__"

# Characters Hive's FileUtils.escapePathName writes as %XX.
_ESCAPED = set("\"#%'*/:=?\\\x7f{[]^") | {chr(c) for c in range(1, 32)}
_PERCENT = re.compile(r"%([0-9A-Fa-f]{2})")


def unescape_path_name(text: str) -> str:
    """Decode Hive's ``%XX`` escapes (``%3A`` -> ``:``); a stray ``%`` stays as it is."""
    if "%" not in text:
        return text  # nearly every name: a partition is parsed once per partition
    return _PERCENT.sub(lambda m: chr(int(m.group(1), 16)), text)


def escape_path_name(text: str) -> str:
    """Encode a value as Hive does in partition folder names."""
    return "".join(f"%{ord(c):02X}" if c in _ESCAPED else c for c in text)


def parse_partition_component(name: str) -> tuple[str, str | None] | None:
    """``k=v`` -> (key, value), with escapes decoded and the default partition as None.

    None if ``name`` is not a partition folder name.
    """
    key, sep, value = name.partition("=")
    if not sep or not key or key.startswith(("_", ".")):
        return None
    decoded = unescape_path_name(value)
    return unescape_path_name(key), (None if decoded == DEFAULT_PARTITION_NAME else decoded)


@dataclass(frozen=True)
class Partition:
    """One partition: its folder path relative to the table root and its decoded values.

    The unpartitioned table is the partition with path ``""`` and no values.
    """

    path: str
    values: tuple[tuple[str, str | None], ...] = ()

    @classmethod
    def from_components(cls, components: list[str] | tuple[str, ...]) -> Partition:
        values = []
        for component in components:
            parsed = parse_partition_component(component)
            if parsed is None:
                raise ValueError(f"{component!r} is not a partition folder name (k=v)")
            values.append(parsed)
        return cls("/".join(components), tuple(values))

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(k for k, _ in self.values)

    def as_dict(self) -> dict[str, str | None]:
        return dict(self.values)

    def __str__(self) -> str:
        return self.path or "<unpartitioned>"
