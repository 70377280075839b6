"""Which storage locations a request may touch: allowed URI prefixes, checked strictly.

Runs triggered from a UI form take URIs typed by a person. A URI is allowed only when, once
normalised, it lies below one of the allowed prefixes: same scheme, no ``..`` escaping the
prefix, and for local paths no symbolic link leading elsewhere.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Iterable


class LocationNotAllowedError(ValueError):
    """A URI outside the allowed prefixes (the message names the URI and the prefixes)."""


def parse_prefixes(text: str | Iterable[str] | None) -> list[str]:
    """``"s3://a/,/data/"`` or a list -> cleaned prefixes (empty entries dropped)."""
    if text is None:
        return []
    items = text.split(",") if isinstance(text, str) else list(text)
    return [item.strip() for item in items if item and item.strip()]


def _split(uri: str) -> tuple[str, str]:
    scheme, sep, rest = uri.partition("://")
    if not sep:
        return "file", uri
    if scheme == "file":
        return "file", rest
    return scheme.lower(), rest


def _normalise(scheme: str, path: str) -> str:
    if scheme == "file":
        if not os.path.isabs(path):
            raise LocationNotAllowedError(f"{path!r} is a relative path: give an absolute one")
        return os.path.realpath(path)  # follows symbolic links: where the data really is
    if ".." in path.split("/"):
        raise LocationNotAllowedError(f"'..' is not allowed in {scheme}://{path}")
    return posixpath.normpath("/" + path)[1:] if path else ""


def _below(path: str, prefix: str) -> bool:
    prefix = prefix.rstrip("/")
    return path == prefix or path.startswith(prefix + "/")


def check_location(
    uri: str, allowed_prefixes: str | Iterable[str] | None, what: str = "uri"
) -> str:
    """Return ``uri`` if it lies below an allowed prefix, else raise a clear error.

    ``what`` names the argument in the message (``table_uri``, ``output_uri``, ...).
    """
    prefixes = parse_prefixes(allowed_prefixes)
    if not uri or not uri.strip():
        raise LocationNotAllowedError(f"{what} is empty")
    if not prefixes:
        raise LocationNotAllowedError(
            f"{what} {uri!r} is not allowed: no allowed URI prefixes are configured "
            "([acid] allowed_uri_prefixes)"
        )
    scheme, path = _split(uri.strip())
    try:
        normalised = _normalise(scheme, path)
    except LocationNotAllowedError as exc:
        raise LocationNotAllowedError(f"{what}: {exc}") from None
    for prefix in prefixes:
        prefix_scheme, prefix_path = _split(prefix)
        if prefix_scheme != scheme:
            continue
        if _below(normalised, _normalise(prefix_scheme, prefix_path)):
            return uri
    raise LocationNotAllowedError(
        f"{what} {uri!r} is outside the allowed prefixes {prefixes} ([acid] allowed_uri_prefixes)"
    )


class OutputInsideTableError(ValueError):
    """An output location at or below the Hive table's: writing there would add files to it."""


def is_within(uri: str, root_uri: str) -> bool:
    """Whether ``uri`` is ``root_uri`` or lies below it: same scheme, normalised paths (local
    ones with symbolic links followed, ``..`` resolved everywhere)."""
    scheme, path = _split(uri.strip())
    root_scheme, root_path = _split(root_uri.strip())
    if scheme != root_scheme:
        return False
    if scheme == "file":
        return _below(os.path.realpath(path), os.path.realpath(root_path))
    return _below(posixpath.normpath("/" + path), posixpath.normpath("/" + root_path))


def check_outside_table(uri: str, table_uri: str, what: str = "output_uri") -> str:
    """Return ``uri`` unless it is the table's location or inside it (the message names both):
    snapshots, indexes and manifests never go into the Hive table, which is only ever read."""
    if is_within(uri, table_uri):
        raise OutputInsideTableError(
            f"{what} {uri!r} is inside the Hive table {table_uri!r}: choose a location outside "
            "it (the table is only ever read)"
        )
    return uri
