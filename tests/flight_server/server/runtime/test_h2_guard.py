"""Request bodies bounded before they are buffered (issue 20: 8 x 200 MB commands took a server
to 6.7 GiB): the relay's front check cuts a cleartext connection whose gRPC message declares more
than the bound, before the body reaches the serving process."""

from __future__ import annotations

import json
import random
import struct

import pyarrow.flight as flight
import pytest

from flight_server.server.config import ServerConfig
from flight_server.server.registry import Registry
from flight_server.server.runtime.h2_guard import H2Guard, MessageTooLarge
from flight_server.server.runtime.relay import Relay
from flight_server.server.security.limits import RelayLimits
from tests.support.servers import running_server

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
SIMPLE = "sample_table/cow/v6_nonpartitioned"


def _frame(kind: int, stream: int, payload: bytes, flags: int = 0) -> bytes:
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def _message(size: int, declared: int | None = None) -> bytes:
    return b"\x00" + struct.pack(">I", size if declared is None else declared) + b"x" * size


def test_guard_follows_frames_split_anywhere():
    wire = PREFACE + _frame(4, 0, b"") + _frame(1, 1, b"h" * 30, flags=4)
    wire += _frame(0, 1, _message(100)[:50]) + _frame(0, 3, _message(10)) + _frame(0, 1, _message(100)[50:])
    wire += _frame(0, 5, b"\x02" + _message(20) + b"\x00\x00", flags=0x8)  # padded
    guard = H2Guard(100)
    for i in range(len(wire)):  # byte by byte: every boundary falls somewhere
        guard.feed(wire[i:i + 1])
    assert guard.active
    with pytest.raises(MessageTooLarge):
        guard.feed(_frame(0, 7, _message(0, declared=101)))


def _reads(wire: bytes, rnd: random.Random, most: int = 40):
    """``wire`` cut in reads of random sizes, each a view of one reused buffer (as the relay
    reads); yields where each read ends and the read."""
    buffer, at = bytearray(most), 0
    while at < len(wire):
        chunk = wire[at:at + rnd.randint(1, most)]
        buffer[:len(chunk)] = chunk
        at += len(chunk)
        yield at, memoryview(buffer)[:len(chunk)]


def test_guard_raises_in_the_read_that_completes_an_oversized_prefix():
    """Reads of any size: a message over the bound is refused in the read holding the last byte
    of its 5-byte prefix (so no byte of its body is sent on), wherever frame headers, pad lengths
    and prefixes fall; messages up to the bound pass."""
    ok = PREFACE + _frame(4, 0, b"s" * 6) + _frame(1, 1, b"h" * 20, flags=4)
    ok += _frame(0, 1, _message(64)[:3]) + _frame(0, 3, b"\x01" + _message(64) + b"\x00", flags=0x8)
    ok += _frame(0, 1, _message(64)[3:] + _message(100)) + _frame(8, 0, b"w" * 4)
    wire = ok + _frame(0, 5, b"\x00" + _message(0, declared=101) + b"body", flags=0x8)
    prefix_end = len(ok) + 9 + 1 + 5  # frame header, pad length, gRPC prefix
    rnd = random.Random(5)
    for _ in range(200):
        passing = H2Guard(100)
        for _, read in _reads(ok, rnd):
            passing.feed(read)
        assert passing.active
        guard, fed = H2Guard(100), 0
        with pytest.raises(MessageTooLarge):
            for fed, read in _reads(wire, rnd):  # noqa: B007 - where the refusal came is checked below
                guard.feed(read)
        assert fed - len(read) < prefix_end <= fed


def test_guard_steps_aside_for_tls():
    guard = H2Guard(10)
    guard.feed(b"\x16\x03\x01\x02\x00")  # a TLS client hello
    guard.feed(_frame(0, 1, _message(0, declared=1 << 30)))
    assert not guard.active


def test_relay_cuts_an_oversized_command_before_the_server_buffers_it(tmp_path, fixture_table):
    registry = Registry("sqlite://")
    registry.register_table("a.b", fixture_table(SIMPLE))
    with running_server(ServerConfig(port=0, state_dir=str(tmp_path / "s")), registry=registry) as srv:
        seen: list[str] = []
        handler = srv.get_flight_info

        def counted(context, descriptor):
            seen.append("path" if descriptor.descriptor_type == flight.DescriptorType.PATH else "command")
            return handler(context, descriptor)

        srv.get_flight_info = counted
        relay = Relay("127.0.0.1", 0, RelayLimits(max_message_bytes=64 << 10))
        relay.set_backend(0, srv.port)
        relay.start()
        try:
            with flight.connect(f"grpc://127.0.0.1:{relay.port}") as client:
                info = client.get_flight_info(flight.FlightDescriptor.for_path("a", "b"))
                assert client.do_get(info.endpoints[0].ticket).read_all().num_rows > 0
                huge = json.dumps({"table": "a.b", "pad": "x" * (4 << 20)}).encode()
                with pytest.raises(flight.FlightUnavailableError):
                    client.get_flight_info(flight.FlightDescriptor.for_command(huge))
            with flight.connect(f"grpc://127.0.0.1:{relay.port}") as again:  # the port still serves
                assert again.get_flight_info(flight.FlightDescriptor.for_path("a", "b")).endpoints
            assert seen == ["path", "path"]  # the oversized command never reached the server's handler
        finally:
            relay.close()
