"""The operators' shared argument parsing: a mapped task's results, whole numbers."""

from __future__ import annotations

import pytest

from airflow_provider_acid.operators.task_arguments import mapped_results, whole_number_or_none


class CountingResults(list):
    """A sequence that counts how it is read: by item, or by slice (one request each)."""

    def __init__(self, items):
        super().__init__(items)
        self.items_read = self.slices_read = 0

    def __getitem__(self, key):
        if isinstance(key, slice):
            self.slices_read += 1
        else:
            self.items_read += 1
        return super().__getitem__(key)

    def __iter__(self):  # what a for loop over Airflow's lazy sequence does: item by item
        index = 0
        while True:
            try:
                yield self[index]
            except IndexError:
                return
            index += 1


def test_mapped_results_are_read_as_one_slice():
    results = CountingResults([{"bucket": 0}, {"bucket": 1}, '{"bucket": 2}'])
    assert mapped_results(results, "bucket_results") == [
        {"bucket": 0},
        {"bucket": 1},
        '{"bucket": 2}',
    ]
    assert (results.slices_read, results.items_read) == (1, 0)


def test_mapped_results_of_none_a_list_or_its_json_text():
    assert mapped_results(None, "bucket_results") == []
    assert mapped_results([], "bucket_results") == []
    assert mapped_results('[{"bucket": 0}]', "bucket_results") == [{"bucket": 0}]
    assert mapped_results(iter([1, 2]), "bucket_results") == [1, 2]


@pytest.mark.parametrize("value", ['{"bucket": 0}', "not json", {"bucket": 0}, b"[]"])
def test_mapped_results_that_are_not_a_list_name_the_argument(value):
    with pytest.raises(ValueError, match="^bucket_results must be a list of the mapped task"):
        mapped_results(value, "bucket_results")


@pytest.mark.parametrize(
    "value, expected", [(None, None), ("", None), ("  ", None), ("7", 7), (7, 7)]
)
def test_whole_number_or_none(value, expected):
    assert whole_number_or_none(value, "above_write_id") == expected


def test_a_whole_number_that_is_not_one_names_the_argument():
    with pytest.raises(ValueError, match="above_write_id must be a whole number, got '3.5'"):
        whole_number_or_none("3.5", "above_write_id")
