"""TLS on nnrp-py's native carriers, for both sides: the secure schemes, the security records
nnrp-py takes, and what a failed TLS connect means in words.

Found on nnrp-py 1.0.0rc4.post20 (docs/sdk-defects.md#tls-diagnostics): a security config
makes the QUIC carrier (``quic+tls://``; plain ``quic://`` is refused), the WebSocket carrier
(``wss://``) and the TCP carrier TLS 1.3. nnrp-py has no scheme for TLS over TCP: ``tcp+tls://``
is this project's name for the TCP carrier with a security config. The client trusts one
certificate, a CA's (a leaf alone is not accepted as an anchor); its ``server_name`` is checked
against the certificate, and over ``wss://`` it must also be the URL's host. nnrp-py says
nothing in words when TLS fails, so the client says it here.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
from pathlib import Path
from typing import Any

from nnrp.native import NativeTransportClientSecurity, NativeTransportServerSecurity

__all__ = [
    "SECURE_SCHEMES",
    "TlsSetupError",
    "client_security",
    "server_security",
    "speaks_tls",
    "tls_failure",
]

#: our scheme -> (nnrp-py's scheme for the provider locator, what it is)
SECURE_SCHEMES = {
    "quic+tls": "quic+tls",
    "wss": "wss",
    "tcp+tls": "tcp",  # ours: nnrp-py's tcp carrier with a security config
}


class TlsSetupError(ValueError):
    """A TLS option that cannot work (said before anything connects or listens)."""


def server_security(certificate_der: bytes, private_key_pkcs8_der: bytes
                    ) -> NativeTransportServerSecurity:
    return NativeTransportServerSecurity(certificate_der, private_key_pkcs8_der)


def _ca_der(ca_file: Path) -> bytes:
    # lazy on purpose: cryptography (nnrp-py's dependency) loads only for a TLS target
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    try:
        data = ca_file.read_bytes()
    except OSError as exc:
        raise TlsSetupError(f"--nnrp-tls-ca {ca_file}: {exc.strerror or exc}") from None
    try:
        cert = (x509.load_pem_x509_certificates(data)[0] if b"-----BEGIN" in data
                else x509.load_der_x509_certificate(data))
    except ValueError as exc:
        raise TlsSetupError(f"--nnrp-tls-ca {ca_file}: not a PEM or DER certificate ({exc})"
                            ) from None
    return cert.public_bytes(serialization.Encoding.DER)


def client_security(scheme: str, host: str, ca_file: Path | None, server_name: str | None
                    ) -> NativeTransportClientSecurity | None:
    """The client's security record for a target, or None for a plaintext scheme (where TLS
    options are refused: they would protect nothing)."""
    if scheme not in SECURE_SCHEMES:
        if ca_file is not None or server_name:
            raise TlsSetupError(
                f"--nnrp-tls-ca/--nnrp-tls-server-name given, but a {scheme}:// target is "
                "plaintext: use quic+tls://, wss:// or tcp+tls://")
        return None
    if ca_file is None:
        raise TlsSetupError(
            f"a {scheme}:// target needs --nnrp-tls-ca FILE: the CA certificate (PEM) the "
            "endpoint's certificate is checked against (nnrp-py has no system trust store)")
    name = server_name or host
    if scheme == "wss" and name != host:
        # nnrp-py's WebSocket client refuses a server name other than the URL's host
        raise TlsSetupError(
            f"--nnrp-tls-server-name {name!r}: over wss:// the name checked is the URL's host "
            f"({host!r}); put the certificate's name in the target instead")
    return NativeTransportClientSecurity(name, _ca_der(ca_file))


def speaks_tls(host: str, port: int, timeout: float = 2.0) -> bool:
    """Whether a TCP peer completes a TLS handshake (any certificate: only the language is
    asked). Used after a plaintext connect failed, to say why."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with contextlib.suppress(OSError, ssl.SSLError), \
            socket.create_connection((host, port), timeout=timeout) as raw, \
            ctx.wrap_socket(raw, server_hostname=host):
        return True
    return False


def tls_failure(endpoint: Any, secure: bool, server_name: str | None) -> str | None:
    """Why a connect failed, when TLS is the likely reason; None otherwise. ``endpoint`` is
    a ``wire.pump.Endpoint``; only called after nnrp-py failed without words."""
    where = f"{endpoint.host}:{endpoint.port}"
    if secure:
        name = server_name or endpoint.host
        return (f"the TLS handshake with {where} failed: its certificate does not chain to "
                f"--nnrp-tls-ca, does not name {name!r}, the peer does not speak TLS, or it "
                f"never completed the handshake "
                f"(nnrp-py says only an internal error)")
    if endpoint.transport in ("tcp", "websocket") and endpoint.port and speaks_tls(
            endpoint.host, endpoint.port):
        secure_scheme = "wss" if endpoint.transport == "websocket" else "tcp+tls"
        return (f"{where} speaks TLS and this client connected in plaintext: use "
                f"{secure_scheme}:// with --nnrp-tls-ca")
    return None
