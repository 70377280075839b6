"""``DataFile`` keeps two of its fields in a record shared by the files of a folder, and is
still the frozen value object it was: made, compared, hashed, shown, copied and pickled by its
six fields."""

import copy
import pickle
from dataclasses import FrozenInstanceError

import pytest

from airflow_provider_acid.acid.listing import StoredFile
from airflow_provider_acid.acid.names import parse_acid_dir
from airflow_provider_acid.acid.read_view import DataFile, FileRole

STORED = StoredFile("/t/dt=1/delta_0000002_0000004/bucket_00001", 10, "v1")
FOLDER = parse_acid_dir("delta_0000002_0000004")


def test_a_data_file_has_its_six_fields_and_their_defaults():
    data_file = DataFile(STORED, FileRole.DELTA, 1, FOLDER, (3,), True)
    assert (data_file.file, data_file.role, data_file.bucket_id, data_file.folder) == (
        STORED,
        FileRole.DELTA,
        1,
        FOLDER,
    )
    assert (data_file.invalid_write_ids, data_file.acid_version_marked) == ((3,), True)
    assert data_file.path == STORED.path
    original = DataFile(file=STORED, role=FileRole.ORIGINAL, bucket_id=0)
    assert (original.folder, original.invalid_write_ids, original.acid_version_marked) == (
        None,
        (),
        False,
    )
    assert repr(data_file) == (
        f"DataFile(file={STORED!r}, role={FileRole.DELTA!r}, bucket_id=1, folder={FOLDER!r}, "
        "invalid_write_ids=(3,), acid_version_marked=True)"
    )
    match data_file:
        case DataFile(file, role, bucket_id):
            assert (file, role, bucket_id) == (STORED, FileRole.DELTA, 1)


def test_data_files_are_equal_by_their_fields_and_frozen():
    data_file = DataFile(STORED, FileRole.DELTA, 1, FOLDER, (3,), True)
    same = DataFile(StoredFile(STORED.path, 10, "v1"), FileRole.DELTA, 1, FOLDER, (3,), True)
    assert data_file == same and hash(data_file) == hash(same) and len({data_file, same}) == 1
    for other in (
        DataFile(STORED, FileRole.DELTA, 2, FOLDER, (3,), True),
        DataFile(STORED, FileRole.DELTA, 1, FOLDER, (), True),
        DataFile(STORED, FileRole.DELTA, 1, FOLDER, (3,), False),
        DataFile(STORED, FileRole.DELETE_DELTA, 1, FOLDER, (3,), True),
        DataFile(StoredFile(STORED.path, 11, "v1"), FileRole.DELTA, 1, FOLDER, (3,), True),
    ):
        assert data_file != other
    assert data_file != (STORED, FileRole.DELTA, 1, FOLDER, (3,), True)
    for copied in (pickle.loads(pickle.dumps(data_file)), copy.copy(data_file)):
        assert copied == data_file and copied.acid_version_marked
    with pytest.raises(FrozenInstanceError):
        data_file.bucket_id = 2  # type: ignore[misc]
    with pytest.raises(FrozenInstanceError):
        data_file.role = FileRole.BASE  # type: ignore[misc]
    with pytest.raises(FrozenInstanceError):
        del data_file.file
    with pytest.raises(TypeError):
        sorted([data_file, same])  # no order, as the dataclass had none
