"""Just enough of the protobuf wire format to read ORC's tail messages: a message's fields.

ORC's postscript, footer and metadata are protobuf messages; the few fields read from them
(lengths, stripe row counts, integer statistics) do not need a protobuf library.
"""

from __future__ import annotations


class ProtobufError(ValueError):
    """A message that is not well-formed protobuf (truncated, or of an unknown wire type)."""


def varint(data: bytes, at: int) -> tuple[int, int]:
    """The varint at ``data[at]`` and the position after it.

    :param data: the message's bytes.
    :param at: where the varint starts.
    """
    value = shift = 0
    while True:
        if at >= len(data):
            raise ProtobufError("truncated varint")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, at
        shift += 7
        if shift > 63:
            raise ProtobufError("varint too long")


def message_fields(data: bytes) -> list[tuple[int, int | bytes]]:
    """A message's ``(field number, value)`` in order: varints as ints, length-delimited
    fields as bytes; fixed-width fields are skipped.

    :param data: the message's bytes.
    """
    fields: list[tuple[int, int | bytes]] = []
    at, end = 0, len(data)
    while at < end:
        key = data[at]  # one byte, as most keys, values and sizes here: read in place
        if key < 0x80:
            at += 1
        else:
            key, at = varint(data, at)
        number, wire = key >> 3, key & 7
        if wire == 0:
            if at < end and data[at] < 0x80:
                fields.append((number, data[at]))
                at += 1
            else:
                value, at = varint(data, at)
                fields.append((number, value))
        elif wire == 2:
            if at < end and data[at] < 0x80:
                size = data[at]
                at += 1
            else:
                size, at = varint(data, at)
            if at + size > len(data):
                raise ProtobufError("truncated field")
            fields.append((number, data[at : at + size]))
            at += size
        elif wire == 1:
            at += 8
        elif wire == 5:
            at += 4
        else:
            raise ProtobufError(f"unexpected protobuf wire type {wire}")
    if at != len(data):
        raise ProtobufError("truncated message")
    return fields


def repeated_ints(value: int | bytes) -> list[int]:
    """A repeated integer field's values as :func:`message_fields` gives it: one varint, or a
    packed run of them (length-delimited).

    :param value: the field's value.
    """
    if isinstance(value, int):
        return [value]
    found, at = [], 0
    while at < len(value):
        number, at = varint(value, at)
        found.append(number)
    return found


_ONE_BYTE = [bytes((i,)) for i in range(0x80)]


def _varint_bytes(value: int) -> bytes:
    if 0 <= value < 0x80:
        return _ONE_BYTE[value]
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        if not value:
            out.append(byte)
            return bytes(out)
        out.append(byte | 0x80)


def encoded(fields: list[tuple[int, int | bytes]]) -> bytes:
    """A message of ``(field number, value)``: ints as varints, bytes length-delimited (what
    :func:`message_fields` reads back).

    :param fields: the fields, in order.
    """
    out = bytearray()
    for number, value in fields:
        if isinstance(value, int):
            out += _varint_bytes(number << 3)
            out += _varint_bytes(value)
        else:
            out += _varint_bytes(number << 3 | 2)
            out += _varint_bytes(len(value))
            out += value
    return bytes(out)


__all__ = ["ProtobufError", "encoded", "message_fields", "repeated_ints", "varint"]
