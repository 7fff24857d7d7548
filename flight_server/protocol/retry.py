"""The retry hint of a refusal for load ("server busy"), shared by the server and the clients.

A server past one of its budgets (streams, planning, logins) should answer gRPC
RESOURCE_EXHAUSTED, but pyarrow's Python server cannot send that code: its error mapping turns
only the ``Flight*Error`` classes into Flight status codes (Internal, TimedOut, Cancelled,
Unauthenticated, Unauthorized, Unavailable, Failed), and a ``MemoryError`` becomes UNKNOWN with
the server's traceback. So a refusal for load is sent as UNAVAILABLE (the code gRPC clients
treat as "transient, retry with backoff") and carries, as the status details
(``grpc-status-details-bin``, pyarrow's ``extra_info``), a ``google.rpc.Status`` with

* a ``google.rpc.RetryInfo``: how long to wait before trying again, and
* a ``google.rpc.ErrorInfo`` with reason ``RESOURCE_EXHAUSTED``, domain ``hudi-flight`` and
  the bound that refused (``metadata["limit"]``).

Those are the standard machine-readable messages of Google's error model, so any gRPC client
can read them; the message text also says ``retry in N s``. Only these few fields are encoded,
by hand (the googleapis protos are not a dependency).
"""

from __future__ import annotations

from dataclasses import dataclass

REASON = "RESOURCE_EXHAUSTED"
DOMAIN = "hudi-flight"
_UNAVAILABLE = 14  # google.rpc.Code
_RETRY_INFO = "type.googleapis.com/google.rpc.RetryInfo"
_ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"


@dataclass(frozen=True)
class RetryHint:
    """What a refusal for load says: which bound refused and when to try again."""

    limit: str
    retry_after: float  # seconds


# -- a minimal protobuf encoding (varints and length-delimited fields only) ------------------
def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        out.append(low | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _field(number: int, payload: bytes | int) -> bytes:
    if isinstance(payload, int):
        return _varint(number << 3) + _varint(payload)
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _fields(data: bytes) -> list[tuple[int, bytes | int]]:
    """The (number, value) pairs of a message; raises ``ValueError`` on anything malformed."""
    out: list[tuple[int, bytes | int]] = []
    pos = 0

    def varint() -> int:
        nonlocal pos
        value = shift = 0
        while True:
            if pos >= len(data) or shift > 63:
                raise ValueError("truncated varint")
            byte = data[pos]
            pos += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return value

    while pos < len(data):
        key = varint()
        number, wire = key >> 3, key & 7
        if wire == 0:
            out.append((number, varint()))
        elif wire == 2:
            size = varint()
            if pos + size > len(data):
                raise ValueError("truncated field")
            out.append((number, data[pos:pos + size]))
            pos += size
        else:
            raise ValueError(f"unexpected wire type {wire}")
    return out


def encode(hint: RetryHint, message: str) -> bytes:
    """A serialised ``google.rpc.Status`` (code UNAVAILABLE) carrying ``hint``."""
    millis = max(0, round(hint.retry_after * 1000))
    duration = _field(1, millis // 1000) + _field(2, (millis % 1000) * 1_000_000)
    retry_info = _field(1, duration)
    entry = _field(1, b"limit") + _field(2, hint.limit.encode())
    error_info = _field(1, REASON.encode()) + _field(2, DOMAIN.encode()) + _field(3, entry)
    details = [
        _field(1, _RETRY_INFO.encode()) + _field(2, retry_info),
        _field(1, _ERROR_INFO.encode()) + _field(2, error_info),
    ]
    return _field(1, _UNAVAILABLE) + _field(2, message.encode()) + b"".join(_field(3, d) for d in details)


def decode(details: bytes | None) -> RetryHint | None:
    """The hint in a status' details, ``None`` when they carry none (or are not a Status)."""
    if not details:
        return None
    try:
        retry_after: float | None = None
        limit = ""
        for number, value in _fields(details):
            if number != 3 or not isinstance(value, bytes):
                continue
            parts = dict(_fields(value))
            type_url, payload = parts.get(1), parts.get(2)
            if not isinstance(payload, bytes):
                continue
            if type_url == _RETRY_INFO.encode():
                duration = dict(_fields(_bytes(dict(_fields(payload)).get(1))))
                retry_after = _int(duration.get(1)) + _int(duration.get(2)) / 1e9
            elif type_url == _ERROR_INFO.encode():
                info = _fields(payload)
                if dict(info).get(1) != REASON.encode():
                    return None
                for number2, entry in info:
                    kv = dict(_fields(_bytes(entry))) if number2 == 3 else {}
                    if kv.get(1) == b"limit":
                        limit = _bytes(kv.get(2)).decode(errors="replace")
    except ValueError:
        return None
    return None if retry_after is None else RetryHint(limit, retry_after)


def _bytes(value: bytes | int | None) -> bytes:
    return value if isinstance(value, bytes) else b""


def _int(value: bytes | int | None) -> int:
    return value if isinstance(value, int) else 0


__all__ = ["DOMAIN", "REASON", "RetryHint", "decode", "encode"]
