"""Protobuf wire format, the little of it the readers need: varints and the fields of a message
(HFile trailers and file info, Lance file descriptors)."""

from __future__ import annotations

from typing import Iterator


def varint(buf: bytes, pos: int) -> tuple[int, int]:
    """Protobuf base-128 varint at ``pos``: (value, position after it)."""
    result = shift = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise ValueError("truncated varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def protobuf_fields(buf: bytes) -> Iterator[tuple[int, int | bytes]]:
    """(field number, value) of a protobuf message; length-delimited values come out as bytes."""
    pos = 0
    while pos < len(buf):
        tag, pos = varint(buf, pos)
        number, wire = tag >> 3, tag & 7
        if wire == 0:
            value, pos = varint(buf, pos)
            yield number, value
        elif wire == 2:
            length, pos = varint(buf, pos)
            if pos + length > len(buf):
                raise ValueError("length-delimited field runs past the message")
            yield number, bytes(buf[pos : pos + length])
            pos += length
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            yield number, int.from_bytes(buf[pos : pos + size], "little")
            pos += size
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")


__all__ = ["protobuf_fields", "varint"]
