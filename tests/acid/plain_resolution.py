"""What the plain way resolves, for tests that compare resolution's shortcuts against it.

The plain way is the resolver's own walk: ``group_listing`` and ``resolve_partition`` over the
whole listing (checked file by file in test_snapshot_reference.py), with no template.
"""

from airflow_provider_acid.acid.acid_state import resolve_partition
from airflow_provider_acid.acid.listing_groups import group_listing
from airflow_provider_acid.acid.read_view import AcidLayoutError, NotEnoughHistoryError
from airflow_provider_acid.acid.resolution import resolve_files
from airflow_provider_acid.acid.writeids import ValidWriteIdList

ROOT = "/t"


def plainly(files, write_ids=None, txns=None, insert_only=False):
    """(partitions, unrecognised) as the plain way resolves them, or the error it raises."""
    write_ids = write_ids or ValidWriteIdList.all_committed()
    try:
        listings, unrecognised = group_listing(ROOT, files, insert_only)
        partitions = tuple(resolve_partition(p, write_ids, txns, {}) for p in listings)
    except (AcidLayoutError, NotEnoughHistoryError) as error:
        return type(error), str(error)
    return partitions, tuple(unrecognised)


def resolved(files, write_ids=None, txns=None, insert_only=False):
    """(partitions, unrecognised) as ``resolve_files`` resolves them, or the error it raises."""
    try:
        snapshot = resolve_files(ROOT, files, write_ids, txns, insert_only=insert_only)
    except (AcidLayoutError, NotEnoughHistoryError) as error:
        return type(error), str(error)
    return snapshot.partitions, snapshot.unrecognised
