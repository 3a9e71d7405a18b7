"""The adapter's start-up security: what vLLM's own flags ask for, applied to NNRP.

Owns three decisions, for both start-up paths:

* the API keys: vLLM's own rule (``vllm/entrypoints/serve/middleware/register.py``): its
  ``--api-key`` list, else ``VLLM_API_KEY``, empty ones ignored. The NNRP server binding
  enforces them (``nnrp_server/auth.py``); nothing here or there logs a key.
* the TLS certificate and key: vLLM's ``--ssl-certfile`` / ``--ssl-keyfile`` (PEM, as vLLM
  takes them), converted to the DER nnrp-py's native carriers take.
* the safe default: no listener on a non-loopback address without TLS (a secure scheme:
  ``tcp+tls://``, ``quic+tls://``, ``wss://``) and a key, unless the
  operator says ``--nnrp-allow-insecure`` (``NNRP_PLUGIN_ALLOW_INSECURE=1``), as Jupyter
  and Redis's protected mode do.

Imports neither vLLM nor nnrp-py (the explicit path checks the safe default before vLLM
loads); ``cryptography`` only when a certificate is read.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .settings import flag_value

#: nnrp_server/auth.py's operation (the suite's contract names it; nnrp_conformance.contract
#: loads neither vLLM nor nnrp-py)
OP_SESSION_AUTHENTICATE = "nnrp.session.authenticate"

__all__ = [
    "ALLOW_INSECURE_FLAG",
    "InsecureListen",
    "Security",
    "TlsError",
    "TlsFiles",
    "claim",
    "from_vllm_args",
    "from_vllm_argv",
    "insecure_listen_problem",
    "is_local",
    "serving_problem",
    "tls_listen_problem",
]

ALLOW_INSECURE_FLAG = "--nnrp-allow-insecure"
#: vLLM's environment variable for the key, read where vLLM reads it (its envs module)
VLLM_API_KEY_ENV = "VLLM_API_KEY"


class InsecureListen(ValueError):
    """Serving refused by the safe default (:func:`insecure_listen_problem`)."""


class TlsError(ValueError):
    """A certificate or key file that cannot be used, said with the file's name."""


@dataclass(frozen=True)
class TlsFiles:
    certfile: Path
    keyfile: Path

    def der(self) -> tuple[bytes, bytes]:
        """(certificate DER, PKCS#8 private key DER), as nnrp-py's
        ``NativeTransportServerSecurity`` takes them. nnrp-py takes one certificate: the
        first in the file (a chain's intermediates are not sent)."""
        # lazy on purpose: cryptography (nnrp-py's dependency) loads only where TLS is served
        from cryptography import x509
        from cryptography.hazmat.primitives import serialization

        try:
            cert = x509.load_pem_x509_certificates(self.certfile.read_bytes())[0]
        except OSError as exc:
            raise TlsError(f"--ssl-certfile {self.certfile}: {exc.strerror or exc}") from None
        except ValueError as exc:
            raise TlsError(f"--ssl-certfile {self.certfile}: not a PEM certificate ({exc})"
                           ) from None
        try:
            key = serialization.load_pem_private_key(self.keyfile.read_bytes(), password=None)
        except OSError as exc:
            raise TlsError(f"--ssl-keyfile {self.keyfile}: {exc.strerror or exc}") from None
        except (ValueError, TypeError) as exc:
            raise TlsError(f"--ssl-keyfile {self.keyfile}: not an unencrypted PEM private key "
                           f"({exc})") from None
        if cert.public_key().public_numbers() != key.public_key().public_numbers():  # type: ignore[union-attr]
            raise TlsError(f"--ssl-keyfile {self.keyfile} is not the key of --ssl-certfile "
                           f"{self.certfile}")
        return (
            cert.public_bytes(serialization.Encoding.DER),
            key.private_bytes(serialization.Encoding.DER, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption()),
        )


@dataclass(frozen=True)
class Security:
    """What vLLM's flags ask for. ``repr`` never shows a key."""

    api_keys: tuple[str, ...] = field(default=(), repr=False)
    tls: TlsFiles | None = None

    def describe(self) -> dict[str, Any]:
        """For the start-up line and the ready file: whether, never what."""
        return {"api_key": "required" if self.api_keys else "none",
                "tls": None if self.tls is None else str(self.tls.certfile)}


def _tls(certfile: str | None, keyfile: str | None) -> TlsFiles | None:
    if not certfile and not keyfile:
        return None
    if not certfile or not keyfile:
        given, missing = (("--ssl-certfile", "--ssl-keyfile") if certfile
                          else ("--ssl-keyfile", "--ssl-certfile"))
        raise TlsError(f"{given} needs {missing} too (NNRP over TLS takes both)")
    return TlsFiles(Path(certfile), Path(keyfile))


def from_vllm_args(args: Any, environ: Mapping[str, str]) -> Security:
    """From vLLM's parsed arguments (both paths have them: ``VllmBackend.args``)."""
    given = getattr(args, "api_key", None) or [environ.get(VLLM_API_KEY_ENV)]
    return Security(tuple(k for k in given if k),
                    _tls(getattr(args, "ssl_certfile", None), getattr(args, "ssl_keyfile", None)))


def from_vllm_argv(argv: Sequence[str], environ: Mapping[str, str]) -> Security:
    """From the explicit path's vLLM arguments before vLLM parses them (for the safe default,
    said before the engine starts); :func:`from_vllm_args` is what serving uses."""
    key = flag_value(argv, "--api-key") or environ.get(VLLM_API_KEY_ENV)
    return Security((key,) if key else (),
                    _tls(flag_value(argv, "--ssl-certfile"), flag_value(argv, "--ssl-keyfile")))


def is_local(listen: str) -> bool:
    """Whether a listen address reaches this host only: ipc, a loopback IP, ``localhost``."""
    # lazy on purpose: the address parser lives with nnrp-py's options, and nnrp-py must not
    # load where the plugin is off (settings.py says the same)
    from nnrp_conformance.wire.pump import parse_address

    endpoint = parse_address(listen)
    if endpoint.transport == "ipc":
        return True
    if endpoint.host == "localhost":
        return True
    try:
        return ipaddress.ip_address(endpoint.host).is_loopback
    except ValueError:
        return False  # a host name other than localhost may resolve anywhere


def exposed(listens: Sequence[str | None]) -> list[str]:
    """The addresses of ``listens`` that are reachable from other hosts."""
    return [a for a in listens if a and not is_local(a)]


def _secure(listen: str) -> bool:
    # lazy on purpose: nnrp-py's options (is_local says why)
    from nnrp_conformance.wire.pump import parse_address

    return parse_address(listen).secure


def claim(listens: Sequence[str | None], security: Security) -> dict[str, Any] | None:
    """The capability document's ``security`` (the suite's field, not the profile's:
    docs/pytest-plugin.md#security): how a session presents the key when one is required
    (``nnrp.session.authenticate``, ``nnrp_server/auth.py``) and ``tls`` when a listener
    serves TLS; None when neither. Whether, never what: no key, no file name."""
    out: dict[str, Any] = {}
    if security.api_keys:
        out["api_key"] = OP_SESSION_AUTHENTICATE
    if any(a and _secure(a) for a in listens):
        out["tls"] = True
    return out or None


def tls_listen_problem(listens: Sequence[str | None], security: Security) -> str | None:
    """Why a TLS address cannot be served (no certificate), or None."""
    secure = [a for a in listens if a and _secure(a)]
    if secure and security.tls is None:
        return (f"{', '.join(secure)} is a TLS address: give the certificate and its key with "
                "--ssl-certfile and --ssl-keyfile (PEM, as vLLM takes them)")
    return None


def insecure_listen_problem(
    listens: Sequence[str | None], security: Security, allow_insecure: bool
) -> str | None:
    """Why serving on ``listens`` is refused (the safe default), or None: an address other
    hosts reach needs a TLS scheme and an API key."""
    if allow_insecure:
        return None
    for address in exposed(listens):
        lacking = " and ".join(what for what, have in (
            ("TLS (a tcp+tls://, quic+tls:// or wss:// address, with --ssl-certfile and "
             "--ssl-keyfile)", _secure(address)),
            ("an API key (--api-key or VLLM_API_KEY)", bool(security.api_keys))) if not have)
        if lacking:
            return (f"refusing to listen on {address} (not a loopback address) without "
                    f"{lacking}: anyone who can reach it could use the model. Add them, or "
                    f"say {ALLOW_INSECURE_FLAG} (NNRP_PLUGIN_ALLOW_INSECURE=1 on the plugin "
                    "path) to serve it anyway")
    return None


def serving_problem(
    listens: Sequence[str | None], security: Security, allow_insecure: bool
) -> str | None:
    """Why serving on ``listens`` with ``security`` is refused, or None (both paths)."""
    return (tls_listen_problem(listens, security)
            or insecure_listen_problem(listens, security, allow_insecure))
