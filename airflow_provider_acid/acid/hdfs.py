"""``hdfs://`` locations read and written through WebHDFS, with SPNEGO when Kerberos is on.

A Hive metastore on a Hadoop cluster records table locations as ``hdfs://NAMENODE:8020/...``
or ``hdfs://NAMESERVICE/...`` (HA). Neither names an HTTP endpoint, so where each authority's
namenodes answer WebHDFS is a setting (``namenodes``: the acid connection's
``hdfs_namenodes``, the CLI's ``--hdfs-namenodes``, or ``$ACID_HDFS_NAMENODES``)::

    {"nn1.example.com:8020": "http://nn1.example.com:9870",
     "prod": ["https://nn1.example.com:9871", "https://nn2.example.com:9871"]}

or as text, ``AUTHORITY=URL[,URL...][;AUTHORITY=...]``. An HA nameservice lists its namenodes;
the active one is the first that answers a status call (a standby answers with Hadoop's
``StandbyException``), and it is found again when, after a failover, it answers a call as the
standby. With ``kerberos`` on (``hdfs_kerberos``, ``--hdfs-kerberos``,
``$ACID_HDFS_KERBEROS=1``) every request negotiates SPNEGO with the login
(:class:`~airflow_provider_acid.kerberos.KerberosLogin`: ``kerberos_principal`` and
``kerberos_keytab``, or the ticket cache), renewed before it expires.

Whole-file writes (:meth:`HdfsFileSystem.pipe_file`) go to a hidden temporary in the same
folder, written in one request, then renamed: HDFS renames are atomic and refuse an existing
target, so ``mode="create"`` is exclusive (the commit lock) and no reader sees half a file.

Importing this module makes it fsspec's ``hdfs`` protocol (instead of pyarrow's libhdfs one).
"""

from __future__ import annotations

import getpass
import json
import logging
import os
import posixpath
import threading
import uuid
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

import fsspec
import requests
from fsspec.implementations.webhdfs import WebHDFS
from fsspec.utils import infer_storage_options

from ..kerberos.errors import KerberosUnavailableError
from ..kerberos.login import KerberosLogin

NAMENODES_ENV = "ACID_HDFS_NAMENODES"
KERBEROS_ENV = "ACID_HDFS_KERBEROS"
PRINCIPAL_ENV = "ACID_KERBEROS_PRINCIPAL"
KEYTAB_ENV = "ACID_KERBEROS_KEYTAB"


class HdfsEndpointError(ConnectionError):
    """No namenode HTTP endpoint is configured for an ``hdfs://`` authority, or none answers."""


def parse_namenodes(value: Any) -> dict[str, list[str]]:
    """The authority -> namenode HTTP URLs mapping from a dict, JSON or
    ``AUTHORITY=URL[,URL][;...]`` text.

    :param value: the setting as given (None: empty).
    """
    if value in (None, ""):
        return {}
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("{"):
            try:
                value = json.loads(text)
            except ValueError as exc:
                raise ValueError(f"hdfs namenodes {text!r} is not a JSON object: {exc}") from None
        else:
            value = {}
            for entry in filter(None, (e.strip() for e in text.split(";"))):
                authority, sep, urls = entry.partition("=")
                if not sep or not urls.strip():
                    raise ValueError(
                        f"hdfs namenodes entry {entry!r}: expected AUTHORITY=http://HOST:PORT"
                    )
                value[authority.strip()] = [u.strip() for u in urls.split(",") if u.strip()]
    if not isinstance(value, Mapping):
        raise ValueError(f"hdfs namenodes: expected a mapping, got {type(value).__name__}")
    mapping: dict[str, list[str]] = {}
    for authority, urls in value.items():
        listed = [urls] if isinstance(urls, str) else list(urls)
        for url in listed:
            if urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).hostname:
                raise ValueError(
                    f"hdfs namenodes {authority!r}: {url!r} is not http(s)://HOST:PORT"
                )
        mapping[str(authority).lower()] = [u.rstrip("/") for u in listed]
    return mapping


def _truthy(value: Any) -> bool:
    return str(value).strip().lower() in ("1", "true", "yes", "on", "kerberos")


class _NotFoundIsNoAuthError(logging.Filter):
    """requests_gssapi logs an ERROR for every 4xx answer (a path that does not exist, a
    refusal: ordinary answers, raised as errors here) saying mutual authentication is missing
    from it."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not ("Mutual authentication unavailable on" in message and " 4" in message)


logging.getLogger("requests_gssapi.gssapi_").addFilter(_NotFoundIsNoAuthError())


class _SpnegoAuth(requests.auth.AuthBase):
    """SPNEGO (``requests_gssapi``) with the login's current credentials on each new
    negotiation, so a renewed ticket is the one presented."""

    def __init__(self, login: KerberosLogin) -> None:
        self.login = login
        self._local = threading.local()

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        from requests_gssapi import OPTIONAL, HTTPSPNEGOAuth

        # One negotiation per thread: HTTPSPNEGOAuth keeps each host's security context and
        # credentials between a request and its 401 answer, which threads listing partitions
        # side by side would otherwise overwrite (a refused listing, seen as a missing folder).
        auth = getattr(self._local, "auth", None)
        if auth is None:
            auth = self._local.auth = HTTPSPNEGOAuth(mutual_authentication=OPTIONAL)
        host = urlsplit(request.url).hostname or ""
        auth.creds = self.login.credentials(service=f"HTTP/{host}")
        return auth(request)


def _raise_unless_gone(error: Exception) -> None:
    if not isinstance(error, FileNotFoundError):
        raise error


class HdfsFileSystem(WebHDFS):
    """fsspec's WebHDFS for ``hdfs://AUTHORITY/path`` URLs, the namenode found from the
    authority (see the module's description).

    :param host: the URL's host (the namenode's RPC host or the nameservice).
    :param port: the URL's port, if any.
    :param namenodes: authority -> namenode HTTP URLs (default ``$ACID_HDFS_NAMENODES``).
    :param kerberos: SPNEGO on (default ``$ACID_HDFS_KERBEROS``; on when a principal is given).
    :param kerberos_principal: the client principal (default ``$ACID_KERBEROS_PRINCIPAL``).
    :param kerberos_keytab: its keytab (default ``$ACID_KERBEROS_KEYTAB``).
    :param kerberos_ccache: a ticket cache instead of a keytab (default ``KRB5CCNAME``).
    :param user: the simple-auth user name (unsecured clusters; default ``$HADOOP_USER_NAME``,
        else the OS user, as Hadoop's own client).
    """

    protocol = "hdfs"

    def __init__(
        self,
        host: str = "",
        port: int | None = None,
        namenodes: Any = None,
        kerberos: Any = None,
        kerberos_principal: str | None = None,
        kerberos_keytab: str | None = None,
        kerberos_ccache: str | None = None,
        user: str | None = None,
        **kwargs: Any,
    ) -> None:
        if self._cached:
            return
        self.authority = f"{host}:{port}" if port else str(host)
        mapping = parse_namenodes(
            namenodes if namenodes is not None else os.environ.get(NAMENODES_ENV)
        )
        urls = mapping.get(self.authority.lower()) or mapping.get(str(host).lower())
        if not urls:
            raise HdfsEndpointError(
                f"hdfs://{self.authority}: no namenode HTTP endpoint is configured for it; set "
                f"the acid connection's hdfs_namenodes (CLI --hdfs-namenodes, or "
                f"${NAMENODES_ENV}) to {self.authority}=http://NAMENODE:9870"
            )
        principal = kerberos_principal or os.environ.get(PRINCIPAL_ENV) or None
        keytab = kerberos_keytab or os.environ.get(KEYTAB_ENV) or None
        if kerberos is None:
            kerberos = _truthy(os.environ.get(KERBEROS_ENV, "")) or bool(kerberos_principal)
        self.login = (
            KerberosLogin(principal, keytab, kerberos_ccache) if _truthy(kerberos) else None
        )
        self.namenodes = urls
        if user is None and self.login is None:  # simple auth: as Hadoop's own client does
            user = os.environ.get("HADOOP_USER_NAME") or getpass.getuser()
        active = self._active(urls, user)
        parts = urlsplit(active)
        kwargs.pop("kerb_kwargs", None)
        super().__init__(
            host=parts.hostname,
            port=parts.port or (9871 if parts.scheme == "https" else 9870),
            use_https=parts.scheme == "https",
            user=None if self.login else user,
            **kwargs,
        )

    def _connect(self) -> None:
        super()._connect()
        if getattr(self, "login", None) is not None:
            self.session.auth = _SpnegoAuth(self.login)

    def _active(self, urls: Sequence[str], user: str | None) -> str:
        """The first namenode that answers a status call as active."""
        if len(urls) == 1:
            return urls[0]
        session = requests.Session()
        if self.login is not None:
            session.auth = _SpnegoAuth(self.login)
        params = {"op": "GETFILESTATUS"} | ({"user.name": user} if user and not self.login else {})
        problems = []
        for url in urls:
            try:
                answer = session.get(f"{url}/webhdfs/v1/", params=params, timeout=30)
            except requests.RequestException as exc:
                problems.append(f"{url} ({type(exc).__name__})")
                continue
            if answer.status_code == 200:
                return url
            standby = "StandbyException" in answer.text
            problems.append(f"{url} ({'standby' if standby else answer.status_code})")
        raise HdfsEndpointError(
            f"hdfs://{self.authority}: no active namenode among {', '.join(problems)}"
        )

    def walk(self, path: str, maxdepth: int | None = None, topdown: bool = True,
             on_error: Any = None, **kwargs: Any) -> Any:  # fmt: skip
        """fsspec's walk (under ``find``), a folder whose listing fails raised instead of
        left out: only a folder gone since its parent was listed is empty. A table's listing
        must never drop files silently.

        :param path: the folder.
        :param maxdepth: how deep to go (None: all the way).
        :param topdown: parents before their children.
        :param on_error: as fsspec's; by default every error but a vanished folder raises.
        :param kwargs: passed on to ``ls``.
        """
        return super().walk(
            path, maxdepth=maxdepth, topdown=topdown, on_error=on_error or _raise_unless_gone,
            **kwargs,
        )  # fmt: skip

    @classmethod
    def _strip_protocol(cls, path: str) -> str:
        return infer_storage_options(path)["path"] if "://" in path else path

    def unstrip_protocol(self, name: str) -> str:
        """``hdfs://AUTHORITY/path``: the authority kept, so another process finds the same
        namenodes."""
        return f"hdfs://{self.authority}{self._strip_protocol(name)}"

    def _who(self) -> str:
        return self.login.describe() if self.login else f"user {self.user}"

    def _refused(self, op: str, path: str | None, words: str) -> PermissionError:
        return PermissionError(
            13,
            f"HDFS refused {op} to {self._who()}: {words}; ask for access (an HDFS ACL or a "
            "Ranger HDFS policy) or use a principal that has it",
            self.unstrip_protocol(path or "/"),
        )

    def _call(self, op, method="get", path=None, data=None, redirect=True, **kwargs):  # noqa: ANN001, ANN202
        """One WebHDFS call; when the namenode has become the standby of an HA nameservice (a
        failover since it was found active), the active one is found again and the call made
        there, once."""
        try:
            return self._call_once(op, method, path, data, redirect, **kwargs)
        except RuntimeError as exc:  # fsspec's error for a RemoteException it has no class for
            if "in state standby" not in str(exc) or len(self.namenodes) < 2:
                raise
        active = self._active(self.namenodes, self.user)
        parts = urlsplit(active)
        self.url = f"{parts.scheme}://{parts.netloc}/webhdfs/v1"
        return self._call_once(op, method, path, data, redirect, **kwargs)

    def _call_once(self, op, method, path, data, redirect, **kwargs):  # noqa: ANN001, ANN202
        try:
            return super()._call(op, method, path, data, redirect, **kwargs)
        except PermissionError as exc:
            raise self._refused(op, path, str(exc)) from None
        except requests.HTTPError as exc:
            if exc.response is not None and exc.response.status_code == 401:
                raise KerberosUnavailableError(
                    f"WebHDFS at {self.url} refused the login of {self._who()} (401): check the "
                    "principal's ticket and that the namenode's HTTP principal is "
                    f"HTTP/{urlsplit(self.url).hostname}@REALM"
                ) from None
            raise
        except requests.ConnectionError as exc:
            raise HdfsEndpointError(f"WebHDFS at {self.url} does not answer: {exc}") from None

    def mv(self, path1: str, path2: str, **kwargs: Any) -> None:
        """Rename; HDFS refuses (and this raises ``FileExistsError``) an existing target.

        :param path1: the file or folder to move.
        :param path2: its new name.
        """
        if not self._rename(path1, path2):
            if self.exists(path2):
                raise FileExistsError(17, "HDFS rename: the target exists", path2)
            raise FileNotFoundError(2, "HDFS rename failed", path1)

    def replace(self, source: str, target: str) -> None:
        """Rename the complete file ``source`` to ``target``, replacing a file there: HDFS
        renames never replace, so an existing ``target`` is removed first (a reader between
        the two steps finds no file, never half of one).

        :param source: the complete file, usually a hidden temporary beside ``target``.
        :param target: its name.
        """
        source, target = self._strip_protocol(source), self._strip_protocol(target)
        if self._rename(source, target):
            return
        if self.isdir(target):
            raise IsADirectoryError(21, "HDFS: a folder has the file's name", target)
        self.rm(target)
        if not self._rename(source, target):
            raise FileExistsError(17, "HDFS: written by another writer meanwhile", target)

    def _rename(self, source: str, target: str) -> bool:
        answer = self._call(
            "RENAME", method="put", path=source, destination=self._strip_protocol(target)
        )
        return bool(answer.json().get("boolean"))

    def _create(self, path: str, data: bytes) -> None:
        """One new file holding ``data``, in one upload (the namenode's redirect, one PUT)."""
        answer = self._call("CREATE", method="put", path=path, redirect=False, overwrite="false")
        location = self._apply_proxy(answer.headers["Location"])
        put = self.session.put(
            location, data=data, headers={"content-type": "application/octet-stream"}
        )
        if put.status_code == 403 and "FileAlreadyExists" in put.text:
            raise FileExistsError(17, "HDFS: the file exists", path)
        if put.status_code == 403:  # the DataNode's refusal (AccessControlException, ...)
            try:
                words = put.json()["RemoteException"]["message"]
            except (ValueError, KeyError, TypeError):
                words = put.text[:300]
            raise self._refused("CREATE", path, words)
        put.raise_for_status()

    def pipe_file(self, path: str, value: bytes, mode: str = "overwrite", **kwargs: Any) -> None:
        """Store ``value`` at ``path`` whole: a hidden temporary renamed over it; with
        ``mode="create"`` only if ``path`` does not exist (``FileExistsError`` otherwise).

        :param path: where.
        :param value: the whole content.
        :param mode: ``"overwrite"`` or ``"create"``.
        """
        path = self._strip_protocol(path)
        parent, name = posixpath.split(path)
        temporary = posixpath.join(parent, f".{name}.{uuid.uuid4().hex}.tmp")
        self._create(temporary, bytes(value))
        try:
            if mode == "create":
                if not self._rename(temporary, path):
                    raise FileExistsError(17, "HDFS: the file exists", path)
            else:
                self.replace(temporary, path)
        except BaseException:
            try:
                self.rm(temporary)
            except (OSError, RuntimeError):
                pass
            raise


fsspec.register_implementation("hdfs", HdfsFileSystem, clobber=True)

__all__ = ["HdfsEndpointError", "HdfsFileSystem", "parse_namenodes"]
