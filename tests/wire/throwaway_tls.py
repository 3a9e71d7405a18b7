"""A throwaway CA and a server certificate it signed, made with ``cryptography`` (nnrp-py's
own dependency), for the TLS tests: as PEM files (what the adapter takes, as vLLM does) and as
DER (what nnrp-py takes). Valid for an hour, for ``localhost`` and 127.0.0.1."""

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
class Certs:
    ca_pem: Path
    cert_pem: Path
    key_pem: Path
    cert_der: bytes
    key_der: bytes


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def make_certs(folder: Path, *, names: tuple[str, ...] = ("localhost",),
               ips: tuple[str, ...] = ("127.0.0.1",), tag: str = "") -> Certs:
    now = datetime.datetime.now(datetime.UTC)
    start, end = now - datetime.timedelta(minutes=5), now + datetime.timedelta(hours=1)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (x509.CertificateBuilder().subject_name(_name(f"throwaway CA {tag}"))
          .issuer_name(_name(f"throwaway CA {tag}")).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(start)
          .not_valid_after(end)
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    san = [x509.DNSName(n) for n in names] + [x509.IPAddress(ipaddress.ip_address(i))
                                              for i in ips]
    cert = (x509.CertificateBuilder().subject_name(_name(names[0]))
            .issuer_name(ca.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(start)
            .not_valid_after(end)
            .add_extension(x509.SubjectAlternativeName(san), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]),
                           critical=False)
            .sign(ca_key, hashes.SHA256()))
    pem = serialization.Encoding.PEM
    folder.mkdir(parents=True, exist_ok=True)
    out = Certs(folder / f"ca{tag}.pem", folder / f"cert{tag}.pem", folder / f"key{tag}.pem",
                cert.public_bytes(serialization.Encoding.DER),
                key.private_bytes(serialization.Encoding.DER, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()))
    out.ca_pem.write_bytes(ca.public_bytes(pem))
    out.cert_pem.write_bytes(cert.public_bytes(pem))
    out.key_pem.write_bytes(key.private_bytes(pem, serialization.PrivateFormat.PKCS8,
                                              serialization.NoEncryption()))
    return out
