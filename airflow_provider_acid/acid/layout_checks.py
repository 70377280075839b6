"""Read views that would make a snapshot silently wrong, refused with one line naming them.

* A folder with no Hive ACID folder (``base_N``, ``delta_A_B``, ``delete_delta_A_B``) and no
  file named as Hive names table files (``N_M``, ``N_M_copy_K``, ``bucket_N``): Hive would read
  its files as "original" files, but a folder of Parquet or CSV files is not a Hive table.
* A write-id list under which no file of the table is visible although the table has files: a
  warning (:func:`nothing_visible_warning`). The snapshot is empty, which is right when every
  write so far is open or aborted, and wrong when the list is another table's or older than
  the table's base.
* Read by location, a write-id list of another table than the folder's name: a warning
  (:func:`table_name_warning`; a folder may be named otherwise on purpose). Read by name, a list
  of another table is refused before resolution (``metastore.WriteIdListMismatchError``).
"""

from __future__ import annotations

import posixpath

from .names import parse_bucket_file, parse_original_file
from .read_view import FileRole, TableReadView

_ACID_ROLES = (FileRole.BASE, FileRole.DELTA, FileRole.DELETE_DELTA)


class NotAnAcidTableError(ValueError):
    """The location holds files, none of them laid out as a Hive table's."""


def check_read_view(view: TableReadView) -> None:
    """Raise when ``view`` is no Hive table at all (see the module's doc).

    :param view: the resolved read view.
    """
    files = view.files
    if files and not any(f.role in _ACID_ROLES for f in files) and not view.excluded:
        names = [posixpath.basename(f.path) for f in files]
        if not any(parse_original_file(n) or parse_bucket_file(n) for n in names):
            raise NotAnAcidTableError(
                f"{view.root} is not a Hive ACID table: it holds no base_N, delta_A_B or "
                f"delete_delta_A_B folder and no Hive table file (N_M, bucket_N), only files "
                f"such as {names[0]!r} ({len(names)} file(s))"
            )


def read_view_warnings(view: TableReadView) -> tuple[str, ...]:
    """The warnings of this module's checks that apply to ``view``, for a plan or a manifest.

    :param view: the resolved read view.
    """
    found = (nothing_visible_warning(view), table_name_warning(view))
    return tuple(w for w in found if w)


def nothing_visible_warning(view: TableReadView) -> str | None:
    """A warning when the read view's write-id list sees none of the table's files, else None.

    :param view: the resolved read view.
    """
    if view.files or not view.excluded or view.write_ids.is_all_committed:
        return None
    reasons = ", ".join(sorted({e.reason.value for e in view.excluded}))
    return (
        f"no file of {view.root} is visible under the write-id list {view.write_ids}: "
        f"{len(view.excluded)} folder(s) or file(s) left out as {reasons}, so the snapshot is "
        f"empty; is the list {view.write_ids.table!r}'s, and current?"
    )


def table_name_warning(view: TableReadView) -> str | None:
    """A warning when a table read by location has a write-id list whose table name is not the
    folder's name (Hive names a table's folder after the table), else None.

    :param view: the resolved read view.
    """
    listed = view.write_ids.table
    if not listed or view.definition is not None:
        return None
    folder = posixpath.basename(str(view.root).rstrip("/"))
    if folder.lower() == listed.rsplit(".", 1)[-1].lower():
        return None
    return (
        f"the write-id list is table {listed!r}'s, but the folder read is {folder!r} "
        f"({view.root}): check that the list is this table's"
    )
