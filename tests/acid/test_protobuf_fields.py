"""The protobuf wire format's fields as ``acid/protobuf_fields.py`` reads and writes them: one-
byte and longer varints (keys, values, sizes) alike."""

from __future__ import annotations

import pytest

from airflow_provider_acid.acid.protobuf_fields import (
    ProtobufError,
    encoded,
    message_fields,
    varint,
)


@pytest.mark.parametrize("value", [0, 1, 127, 128, 300, 16_383, 16_384, 2**35, 2**63 - 1])
def test_a_varint_reads_back(value):
    data = encoded([(1, value)])
    assert varint(data, 1) == (value, len(data))
    assert message_fields(data) == [(1, value)]


def test_fields_of_every_size_read_back():
    fields = [
        (1, 5), (2, b"x"), (15, 127), (16, 128), (2047, b"y" * 127), (3, b"z" * 128),
        (4, b""), (5, b"w" * 70_000), (6, 2**40),
    ]  # fmt: skip
    data = encoded(fields)
    assert message_fields(data) == fields
    assert encoded(message_fields(data)) == data


def test_a_truncated_message_is_an_error():
    first = encoded([(1, b"abc")])
    data = first + encoded([(2, 300)])
    for cut in range(1, len(data)):
        if cut == len(first):
            assert message_fields(data[:cut]) == [(1, b"abc")]  # a whole message
            continue
        with pytest.raises(ProtobufError):
            message_fields(data[:cut])
