"""Transport security of the server: TLS and mutual TLS (``serve --tls-cert/--tls-key/--tls-client-ca``).

The PEM files are read and checked here, before gRPC sees them, because gRPC reports an
unreadable or mismatched certificate only as "Server did not start properly" (plus log lines on
stderr). Every problem becomes one :class:`ValueError` naming the option and the file.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.flight as flight

from flight_server.protocol.wire import PLAIN_SCHEMES, TLS_SCHEME


@dataclass(frozen=True)
class TlsFiles:
    """The server's certificate chain and key, and the CA that signs client certificates (mTLS)."""

    cert: str
    key: str
    client_ca: str | None = None

    @classmethod
    def from_settings(cls, cert: str | None, key: str | None, client_ca: str | None) -> "TlsFiles | None":
        """``None`` when TLS is off; raises :class:`ValueError` on an incomplete combination."""
        if not cert and not key:
            if client_ca:
                raise ValueError("--tls-client-ca (tls_client_ca) needs --tls-cert and --tls-key")
            return None
        if not cert or not key:
            missing = "--tls-cert (tls_cert)" if not cert else "--tls-key (tls_key)"
            raise ValueError(f"TLS needs both --tls-cert and --tls-key; {missing} is missing")
        return cls(cert, key, client_ca or None)

    def server_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of :class:`pyarrow.flight.FlightServerBase` for these files.

        Raises:
            ValueError: a file is unreadable, not PEM, or the key does not belong to the certificate.
        """
        cert = _read("--tls-cert (tls_cert)", self.cert)
        key = _read("--tls-key (tls_key)", self.key)
        _check_pair(self.cert, self.key)
        kwargs: dict[str, Any] = {"tls_certificates": [flight.CertKeyPair(cert, key)]}
        if self.client_ca:
            ca = _read("--tls-client-ca (tls_client_ca)", self.client_ca)
            try:
                ssl.create_default_context(cadata=ca.decode("ascii"))
            except (ssl.SSLError, ValueError, UnicodeDecodeError) as err:
                option = "--tls-client-ca (tls_client_ca)"
                raise ValueError(f"{option} {self.client_ca}: no PEM CA certificate ({err})") from None
            kwargs.update(verify_client=True, root_certificates=ca)
        return kwargs


    def ssl_context(self) -> ssl.SSLContext:
        """A server-side :class:`ssl.SSLContext` for these files, as gRPC's own TLS would answer:
        TLS 1.2 or newer, ALPN ``h2`` (gRPC clients insist on it), a client certificate of
        ``client_ca`` required when set. The relay ends TLS with it (``runtime.relay``).

        Raises:
            ValueError: as :meth:`server_kwargs`.
        """
        self.server_kwargs()  # the same checks, the same messages
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(self.cert, self.key)
        context.set_alpn_protocols(["h2"])
        if self.client_ca:
            context.verify_mode = ssl.CERT_REQUIRED
            context.load_verify_locations(cafile=self.client_ca)
        return context


def _read(option: str, path: str) -> bytes:
    try:
        data = Path(path).read_bytes()
    except OSError as err:
        raise ValueError(f"{option}: cannot read {path}: {err.strerror or err}") from None
    if b"-----BEGIN " not in data:
        raise ValueError(f"{option}: {path} is not a PEM file")
    return data


def _check_pair(cert: str, key: str) -> None:
    """The key must be unencrypted and belong to the certificate (what gRPC needs to start)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_cert_chain(cert, key, password=lambda: b"")
    except ssl.SSLError as err:
        if "KEY_VALUES_MISMATCH" in str(err) or "key values mismatch" in str(err):
            raise ValueError(f"--tls-key (tls_key) {key} does not belong to the certificate {cert}") from None
        raise ValueError(
            f"--tls-cert/--tls-key (tls_cert/tls_key): cannot load {cert} with {key} "
            f"(a PEM certificate chain and an unencrypted PEM private key are needed): {err.reason or err}"
        ) from None


def check_locations(locations: list[str], tls: bool) -> None:
    """Endpoint locations a TLS server names must use ``grpc+tls://`` (clients would otherwise
    be sent to a plaintext port, or refuse the location)."""
    if not tls:
        return
    plain = [loc for loc in locations if loc.split("://", 1)[0] in PLAIN_SCHEMES]
    if plain:
        raise ValueError(f"TLS is on, so locations must use {TLS_SCHEME}://, not {', '.join(plain)}")


__all__ = ["TlsFiles", "check_locations"]
