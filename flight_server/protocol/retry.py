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
can read them (the messages come from ``googleapis-common-protos``); the message text also says
``retry in N s``.
"""

from __future__ import annotations

from dataclasses import dataclass

from google.protobuf.message import DecodeError
from google.rpc import code_pb2, error_details_pb2, status_pb2

REASON = "RESOURCE_EXHAUSTED"
DOMAIN = "hudi-flight"


@dataclass(frozen=True)
class RetryHint:
    """What a refusal for load says: which bound refused and when to try again."""

    limit: str
    retry_after: float  # seconds


def encode(hint: RetryHint, message: str) -> bytes:
    """A serialised ``google.rpc.Status`` (code UNAVAILABLE) carrying ``hint``."""
    retry = error_details_pb2.RetryInfo()
    retry.retry_delay.FromMilliseconds(max(0, round(hint.retry_after * 1000)))
    info = error_details_pb2.ErrorInfo(reason=REASON, domain=DOMAIN, metadata={"limit": hint.limit})
    status = status_pb2.Status(code=code_pb2.UNAVAILABLE, message=message)
    status.details.add().Pack(retry)
    status.details.add().Pack(info)
    return status.SerializeToString()


def decode(details: bytes | None) -> RetryHint | None:
    """The hint in a status' details, ``None`` when they carry none (or are not a Status)."""
    if not details:
        return None
    status = status_pb2.Status()
    try:
        status.ParseFromString(details)
    except DecodeError:
        return None
    retry_after: float | None = None
    limit = ""
    for detail in status.details:
        if detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
            retry = error_details_pb2.RetryInfo()
            detail.Unpack(retry)
            retry_after = retry.retry_delay.ToMilliseconds() / 1000
        elif detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            if info.reason != REASON:
                return None
            limit = info.metadata.get("limit", "")
    return None if retry_after is None else RetryHint(limit, retry_after)


__all__ = ["DOMAIN", "REASON", "RetryHint", "decode", "encode"]
