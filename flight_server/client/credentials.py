"""Client credentials: TLS material (PEM bytes, PEM text or a file path) and the bearer header.

Shared by every client surface (Python client, CLI, Spark source), so each accepts the same forms
and reports the same errors. Error messages name the option, never its value: a private key
passed by mistake as something that is not PEM must not end up in a log.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Union

PemSource = Union[bytes, str, "os.PathLike[str]"]
_PEM_MARK = "-----BEGIN "


def pem(value: PemSource | None, option: str) -> bytes | None:
    """PEM bytes from PEM bytes, PEM text or the path of a PEM file; ``None`` stays ``None``.

    Raises:
        ValueError: the value is neither PEM data nor a readable PEM file (the message names
            ``option`` only).
    """
    if value is None or (isinstance(value, (str, bytes)) and not value):
        return None
    if isinstance(value, bytes):
        data = value
    elif isinstance(value, str) and _PEM_MARK in value:
        data = value.encode("ascii", "replace")
    else:
        try:
            data = Path(value).read_bytes()
        except (OSError, ValueError) as err:
            reason = getattr(err, "strerror", None) or type(err).__name__
            raise ValueError(f"{option}: neither PEM text nor a readable PEM file ({reason})") from None
    if _PEM_MARK.encode() not in data:
        raise ValueError(f"{option}: not PEM data (expected '{_PEM_MARK}...')")
    return data


def tls_client_kwargs(
    tls_root_certs: PemSource | None = None,
    cert_chain: PemSource | None = None,
    private_key: PemSource | None = None,
) -> dict[str, bytes]:
    """The TLS keyword arguments of :class:`pyarrow.flight.FlightClient` (only those given).

    Raises:
        ValueError: unreadable PEM, or a client certificate without its key (or the reverse).
    """
    kwargs = {
        "tls_root_certs": pem(tls_root_certs, "tls_root_certs"),
        "cert_chain": pem(cert_chain, "cert_chain"),
        "private_key": pem(private_key, "private_key"),
    }
    if (kwargs["cert_chain"] is None) != (kwargs["private_key"] is None):
        raise ValueError("a client certificate needs both cert_chain and private_key")
    return {k: v for k, v in kwargs.items() if v is not None}


def bearer_header(token: str) -> tuple[bytes, bytes]:
    """The ``authorization`` header of a bearer token."""
    return (b"authorization", f"Bearer {token}".encode())


__all__ = ["PemSource", "bearer_header", "pem", "tls_client_kwargs"]
