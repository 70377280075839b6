"""Resolution's shortcuts give what the plain way gives."""

import pickle
from dataclasses import FrozenInstanceError

import pytest

from airflow_provider_acid.acid.listing import StoredFile
from airflow_provider_acid.acid.names import parse_acid_dir
from airflow_provider_acid.acid.snapshot import DataFile, FileRole, _new_data_file


def test_a_data_file_made_through_its_slots_is_the_one_its_init_makes():
    stored = StoredFile("/t/delta_0000002_0000004/bucket_00001", 10, "v1")
    folder = parse_acid_dir("delta_0000002_0000004")
    made = _new_data_file(stored, FileRole.DELTA, 1, folder, (3,), True)
    expected = DataFile(stored, FileRole.DELTA, 1, folder, (3,), True)
    assert made == expected and hash(made) == hash(expected) and repr(made) == repr(expected)
    assert pickle.loads(pickle.dumps(made)) == expected
    with pytest.raises(FrozenInstanceError):
        made.bucket_id = 2  # type: ignore[misc]
