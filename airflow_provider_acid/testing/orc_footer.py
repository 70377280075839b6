"""Adding user metadata to a finished ORC file, by appending to its protobuf footer.

pyarrow's ORC writer cannot write user metadata, which Hive's ACID files carry
(``hive.acid.*``); :func:`append_user_metadata` adds it afterwards without moving a byte of the
stripes.
"""

from __future__ import annotations

from collections.abc import Mapping


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, pos


def _protobuf_fields(buf: bytes) -> list[tuple[int, int, bytes]]:
    """``(field number, value if varint else 0, raw bytes of the field)`` of a message."""
    fields, pos = [], 0
    while pos < len(buf):
        start = pos
        key, pos = _read_varint(buf, pos)
        wire_type, value = key & 7, 0
        if wire_type == 0:
            value, pos = _read_varint(buf, pos)
        elif wire_type == 2:
            length, pos = _read_varint(buf, pos)
            pos += length
        elif wire_type in (1, 5):
            pos += 8 if wire_type == 1 else 4
        else:
            raise ValueError(f"unexpected protobuf wire type {wire_type} in the ORC postscript")
        fields.append((key >> 3, value, buf[start:pos]))
    return fields


def append_user_metadata(orc_bytes: bytes, metadata: Mapping[str, bytes]) -> bytes:
    """Add user metadata to a finished ORC file (what pyarrow's ORC writer cannot do).

    ORC ends with ``footer, postscript, 1 byte postscript length``; the footer is a protobuf
    message stored as a stream of compression chunks (3-byte header ``length << 1 | original``).
    Protobuf merges concatenated messages and repeats repeated fields, so appending the
    ``metadata`` entries (Footer field 5, ``UserMetadataItem{name=1, value=2}``) as one more,
    uncompressed ("original") chunk and enlarging ``footerLength`` (PostScript field 1) yields a
    valid footer that holds them. Nothing before the footer moves.
    """
    ps_length = orc_bytes[-1]
    postscript = orc_bytes[-1 - ps_length : -1]
    fields = _protobuf_fields(postscript)
    values = {number: value for number, value, _ in fields}
    footer_length, compression = values[1], values.get(2, 0)
    extra = b""
    for name, value in metadata.items():
        key = name.encode()
        item = b"\x0a" + _varint(len(key)) + key + b"\x12" + _varint(len(value)) + bytes(value)
        extra += b"\x2a" + _varint(len(item)) + item
    if compression != 0:  # CompressionKind NONE has no chunk headers
        if len(extra) >= 1 << 23:
            raise ValueError("user metadata too large")
        extra = ((len(extra) << 1) | 1).to_bytes(3, "little") + extra
    new_postscript = b"".join(
        b"\x08" + _varint(footer_length + len(extra)) if number == 1 else raw
        for number, _, raw in fields
    )
    if len(new_postscript) > 255:
        raise ValueError("ORC postscript too long")
    footer_end = len(orc_bytes) - 1 - ps_length
    return orc_bytes[:footer_end] + extra + new_postscript + bytes([len(new_postscript)])
