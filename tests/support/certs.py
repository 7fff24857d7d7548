"""Certificates for TLS tests, made with ``cryptography``: a CA, a server certificate for
127.0.0.1/localhost and a client certificate, written as PEM files into one folder."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class Pki:
    """PEM files of one test PKI (``ca_*``: the root; ``server_*``, ``client_*``: leaf certificates)."""

    ca_cert: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _cert(subject: str, key, issuer: x509.Name, issuer_key, *, ca: bool = False,
          sans: list[x509.GeneralName] | None = None, usage=None) -> x509.Certificate:
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    if usage:
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _write(folder: Path, name: str, cert: x509.Certificate, key=None) -> tuple[Path, Path | None]:
    cert_path = folder / f"{name}.crt"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    if key is None:
        return cert_path, None
    key_path = folder / f"{name}.key"
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


def make_pki(folder: Path, ca_name: str = "hudi-flight test CA") -> Pki:
    """A CA and its server (SANs 127.0.0.1 and localhost) and client certificates, under ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    ca_key = _key()
    ca = _cert(ca_name, ca_key, _name(ca_name), ca_key, ca=True)
    server_key, client_key = _key(), _key()
    server = _cert("localhost", server_key, ca.subject, ca_key,
                   sans=[x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))],
                   usage=ExtendedKeyUsageOID.SERVER_AUTH)
    client = _cert("hudi-flight test client", client_key, ca.subject, ca_key, usage=ExtendedKeyUsageOID.CLIENT_AUTH)
    ca_path, _ = _write(folder, "ca", ca)
    server_cert, server_key_path = _write(folder, "server", server, server_key)
    client_cert, client_key_path = _write(folder, "client", client, client_key)
    assert server_key_path is not None and client_key_path is not None
    return Pki(ca_path, server_cert, server_key_path, client_cert, client_key_path)
