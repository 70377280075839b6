"""AcidHook: storage access for Hive ACID tables from an Airflow connection of type ``acid``."""

from __future__ import annotations

import json
from typing import Any

from airflow.sdk import BaseHook
from fsspec import AbstractFileSystem

from ..acid.hdfs import parse_namenodes
from ..acid.listing import resolve_filesystem

#: Connection extras that carry secrets; never logged, never returned in XCom or manifests.
SENSITIVE_FIELDS = ("secret", "token")


def _extra_value(extra: dict[str, Any], name: str) -> Any:
    for key in (name, f"extra__acid__{name}"):
        value = extra.get(key)
        if value not in (None, ""):
            return value
    return None


#: botocore retry modes (``retries.mode`` of its client config).
RETRY_MODES = ("standard", "adaptive", "legacy")


def _number(extra: dict[str, Any], name: str, kind: type, minimum: float) -> Any:
    value = _extra_value(extra, name)
    if value is None:
        return None
    try:
        number = kind(value)
    except (TypeError, ValueError):
        number = None
    if number is None or number < minimum or (kind is int and float(value) != number):
        raise ValueError(
            f"connection extra {name!r}: expected a {kind.__name__} of at least {minimum}, "
            f"got {value!r}"
        )
    return number


def retry_config_from_extra(extra: dict[str, Any]) -> dict[str, Any]:
    """botocore client settings for s3fs's ``config_kwargs`` from an ``acid`` connection.

    ``retry_mode`` (``standard``, ``adaptive`` or ``legacy``) and ``max_attempts`` (attempts
    of one request in all, the first included, as ``AWS_MAX_ATTEMPTS`` counts them: botocore's
    ``total_max_attempts``) set botocore's ``retries``; ``connect_timeout`` and
    ``read_timeout`` (seconds) its timeouts. Unset extras keep botocore's defaults (legacy
    mode, 5 attempts, 60 s timeouts; ``AWS_RETRY_MODE`` / ``AWS_MAX_ATTEMPTS`` apply)."""
    config: dict[str, Any] = {}
    retries: dict[str, Any] = {}
    if (mode := _extra_value(extra, "retry_mode")) is not None:
        if str(mode) not in RETRY_MODES:
            raise ValueError(
                f"connection extra 'retry_mode': expected one of {RETRY_MODES}, got {mode!r}"
            )
        retries["mode"] = str(mode)
    if (attempts := _number(extra, "max_attempts", int, 1)) is not None:
        retries["total_max_attempts"] = attempts
    if retries:
        config["retries"] = retries
    for name in ("connect_timeout", "read_timeout"):
        if (seconds := _number(extra, name, float, 0.001)) is not None:
            config[name] = seconds
    return config


#: Options whose dictionaries the ``storage_options`` extra merges into those the other extras
#: built (the endpoint, the retry settings) instead of replacing them.
_MERGED = ("client_kwargs", "config_kwargs")


def storage_options_from_extra(extra: dict[str, Any]) -> dict[str, Any]:
    """fsspec storage options from an ``acid`` connection's extra fields.

    ``endpoint_url``, ``key``, ``secret``, ``token`` and ``region_name`` map to s3fs options;
    the retry settings (:func:`retry_config_from_extra`) to its ``config_kwargs``;
    ``hdfs_namenodes`` (``AUTHORITY=http://NN:9870[,URL][;...]`` or JSON), ``hdfs_kerberos``
    and ``kerberos_principal``/``kerberos_keytab``/``kerberos_ccache`` to the ``hdfs://``
    filesystem's (WebHDFS, SPNEGO);
    ``storage_options`` (a JSON object) is merged last for anything else fsspec accepts (its
    ``client_kwargs`` and ``config_kwargs`` merged into those the other extras built, key by
    key, so ``{"config_kwargs": {"s3": {"payload_signing_enabled": false}}}`` keeps the retry
    settings).
    """
    options: dict[str, Any] = {}
    for name in ("key", "secret", "token"):
        if (value := _extra_value(extra, name)) is not None:
            options[name] = value
    client_kwargs: dict[str, Any] = {}
    if (endpoint := _extra_value(extra, "endpoint_url")) is not None:
        client_kwargs["endpoint_url"] = endpoint
    if (region := _extra_value(extra, "region_name")) is not None:
        client_kwargs["region_name"] = region
    if client_kwargs:
        options["client_kwargs"] = client_kwargs
    if config := retry_config_from_extra(extra):
        options["config_kwargs"] = config
    # hdfs:// locations (acid/hdfs.py): where each authority's namenodes answer WebHDFS, SPNEGO
    if (namenodes := _extra_value(extra, "hdfs_namenodes")) is not None:
        options["namenodes"] = parse_namenodes(namenodes)
    if (spnego := _extra_value(extra, "hdfs_kerberos")) is not None:
        options["kerberos"] = str(spnego).strip().lower() in ("1", "true", "yes", "on")
    for name in ("kerberos_principal", "kerberos_keytab", "kerberos_ccache"):
        if (value := _extra_value(extra, name)) is not None:
            options[name] = value
    raw = _extra_value(extra, "storage_options")
    if raw is not None:
        try:
            more = json.loads(raw) if isinstance(raw, str) else dict(raw)
        except (ValueError, TypeError) as exc:
            raise ValueError(
                f"connection extra 'storage_options' is not a JSON object: {exc}"
            ) from None
        for name, value in more.items():
            given = options.get(name)
            if name in _MERGED and isinstance(given, dict) and isinstance(value, dict):
                options[name] = {**given, **value}  # its keys win; the extras' others stay
            else:
                options[name] = value
    return options


class AcidHook(BaseHook):
    """Builds the fsspec filesystem for table and output URIs from an ``acid`` connection.

    With no connection id, URIs are opened with fsspec's defaults (local paths, ``memory://``,
    or the environment's credentials).

    :param acid_conn_id: the ``acid`` connection holding the storage URI prefix and options.
    """

    conn_name_attr = "acid_conn_id"
    default_conn_name = "acid_default"
    conn_type = "acid"
    hook_name = "Hive ACID storage"

    def __init__(self, acid_conn_id: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.acid_conn_id = acid_conn_id
        self._options: dict[str, Any] | None = None
        self._prefix: str | None = None

    def _load(self) -> None:
        if self._options is not None:
            return
        if not self.acid_conn_id:
            self._options, self._prefix = {}, None
            return
        conn = self.get_connection(self.acid_conn_id)
        extra = conn.extra_dejson or {}
        self._options = storage_options_from_extra(extra)
        self._prefix = _extra_value(extra, "uri_prefix") or conn.host or None

    @property
    def storage_options(self) -> dict[str, Any]:
        """fsspec storage options (with secrets: do not log or return them)."""
        self._load()
        return dict(self._options or {})

    @property
    def uri_prefix(self) -> str | None:
        """The storage URI prefix the connection names (e.g. ``s3://warehouse``), if any."""
        self._load()
        return self._prefix

    def resolve_uri(self, uri: str) -> str:
        """A relative URI is taken below the connection's prefix; others are used as given."""
        prefix = self.uri_prefix
        if prefix and "://" not in uri and not uri.startswith("/"):
            return prefix.rstrip("/") + "/" + uri
        return uri

    def get_filesystem(self, uri: str) -> tuple[AbstractFileSystem, str]:
        """The filesystem and path for ``uri``."""
        return resolve_filesystem(self.resolve_uri(uri), storage_options=self.storage_options)

    def test_connection(self) -> tuple[bool, str]:
        """Lists the prefix once (the UI's Test button)."""
        if not self.uri_prefix:
            return False, "the connection names no storage URI prefix"
        try:
            fs, path = self.get_filesystem(self.uri_prefix)
            fs.ls(path)
        except Exception as exc:  # the UI shows the message
            return False, f"cannot list {self.uri_prefix}: {exc}"
        return True, f"listed {self.uri_prefix}"

    def __repr__(self) -> str:
        return f"AcidHook(acid_conn_id={self.acid_conn_id!r})"
