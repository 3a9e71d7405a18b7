"""``vllm-nnrp probe HOST:PORT [--timeout S]``: is an NNRP endpoint serving? One line, one status.

Owns the adapter's health signal for supervisors: the container's ``HEALTHCHECK`` and the
Kubernetes readiness, liveness and start-up exec probes (``deploy/``) run this command. It
opens one NNRP session to the address with the suite's client
(:class:`nnrp_conformance.client.NnrpClient`, the same wire every recipe uses) and runs the
profile's discovery operation (``nnrp.capabilities.get``). Ready means the capability
document came back: the adapter listens, its session layer answers and its handler runs.
The document is not judged here (that is the suite's work); it is only summarised.

Exit status and output, always one line and never a traceback:

* 0: ``ready ADDRESS: model=… profile=… level=…`` on stdout;
* 1: not ready, the reason on stderr (``nothing listening on …``, ``no capability document
  within …s``, the endpoint's error answer, …);
* 2: a bad address or bad arguments (a configuration error, not a health state).

Everything is bounded by ``--timeout`` (default 5 s) plus at most a second for closing the
session, so the probe always ends inside a supervisor's own probe timeout.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import queue
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from nnrp_conformance.client import NnrpClient, NnrpClientError
from nnrp_conformance.options import API_KEY_ENV
from nnrp_conformance.wire.pump import AddressError, parse_address

from .security import VLLM_API_KEY_ENV

__all__ = ["DEFAULT_TIMEOUT_S", "ProbeFailed", "Progress", "command", "main", "probe", "summary"]

DEFAULT_TIMEOUT_S = 5.0
_CLOSE_TIMEOUT_S = 0.5  # aclose takes at most about twice this
# beyond --timeout: the session's close (about 2 x _CLOSE_TIMEOUT_S) and the start of a thread
_VERDICT_GRACE_S = 2.0


class ProbeFailed(Exception):
    """The endpoint is not ready; the message is the one line the probe prints."""


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def summary(document: Mapping[str, Any]) -> str:
    """``model=… profile=… level=…`` of a capability document (``?`` where a field is absent)."""
    models = document.get("models")
    ids = (
        [m.get("id") for m in models if isinstance(m, Mapping)] if isinstance(models, list) else []
    )
    model = ",".join(str(i) for i in ids if i) or "?"
    levels = document.get("compatibility_levels")
    claimed = [lv for lv in levels if isinstance(lv, int)] if isinstance(levels, list) else []
    level = str(max(claimed)) if claimed else "?"
    return f"model={model} profile={document.get('profile') or '?'} level={level}"


@dataclass
class Progress:
    """How far a probe got: read when its verdict is late (the closes below are bounded, but
    only by nnrp-py's own seconds-long close waits)."""

    phase: str = "connect"  # "connect" -> "discovery" -> "close"
    document: dict[str, Any] | None = None


async def probe(
    address: str, timeout: float = DEFAULT_TIMEOUT_S, progress: Progress | None = None,
    *, tls_ca: Path | None = None, tls_server_name: str | None = None,
) -> dict[str, Any]:
    """Connect, run the discovery operation and return the capability document.

    Raises :class:`ProbeFailed` with a one-line reason, or ``AddressError`` for an address
    that names no transport. ``progress`` is kept up to date for a caller that stops waiting."""
    progress = progress if progress is not None else Progress()
    # a bad address is said as such, before any connect
    if parse_address(address).port == 0:
        raise AddressError(f"address {address!r}: port 0 names no listener")
    started = time.monotonic()
    try:
        client = await NnrpClient.connect(
            address, connect_timeout=timeout, default_timeout=timeout, command_timeout=timeout,
            api_key=probe_api_key(), tls_ca=tls_ca, tls_server_name=tls_server_name,
        )
    except NnrpClientError as exc:
        raise ProbeFailed(_one_line(str(exc))) from None
    progress.phase = "discovery"
    try:
        remaining = max(0.1, timeout - (time.monotonic() - started))
        try:
            # our own bound fires first: the operation's (a little later) only backs it up
            with anyio.fail_after(remaining):
                progress.document = await client.capabilities(timeout=remaining + 1.0)
        except TimeoutError:
            raise ProbeFailed(_late(address, "discovery", timeout)) from None
        except NnrpClientError as exc:
            raise ProbeFailed(f"{address}: {_one_line(str(exc))}") from None
    finally:
        progress.phase = "close"
        await client.aclose(timeout=_CLOSE_TIMEOUT_S)
    return progress.document


def probe_api_key() -> str | None:
    """The key a probe authenticates with: the suite's variable, else the server's own
    (``VLLM_API_KEY``: inside the adapter's container the probe shares its environment)."""
    return os.environ.get(API_KEY_ENV) or os.environ.get(VLLM_API_KEY_ENV) or None


def _late(address: str, phase: str, timeout: float) -> str:
    if phase == "connect":
        return f"{address}: no NNRP session within {timeout:g}s"
    return f"{address}: session open, but no capability document within {timeout:g}s"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="vllm-nnrp probe",
        description="Health probe: open an NNRP session to ADDRESS and ask for the capability "
        "document. Exit 0 and one line (model, profile, level) when it comes back; 1 with the "
        "reason when it does not; 2 for a bad address.",
    )
    p.add_argument("address", help="HOST:PORT (TCP), or ipc:///PATH, ws://HOST:PORT; with TLS "
                   "quic+tls://, wss://, tcp+tls:// and --tls-ca. The API key, when the "
                   "adapter requires one, comes from NNRP_API_KEY, else VLLM_API_KEY")
    p.add_argument("--tls-ca", type=Path, metavar="FILE",
                   help="for a TLS address: the CA certificate its certificate must chain to")
    p.add_argument("--tls-server-name", metavar="NAME",
                   help="the name the certificate must carry (default: the address's host)")
    p.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        metavar="S",
        help=f"seconds for the connect and the answer together (default {DEFAULT_TIMEOUT_S:g})",
    )
    return p


def _verdict(
    address: str, timeout: float, progress: Progress, out: queue.SimpleQueue[tuple[int, str]],
    tls_ca: Path | None = None, tls_server_name: str | None = None,
) -> None:
    """Run the probe on this thread's own event loop; put (status, line) into ``out`` the moment
    it is known, before anything that may linger (the loop's shutdown) runs."""

    async def run() -> None:
        try:
            document = await probe(address, timeout, progress, tls_ca=tls_ca,
                                   tls_server_name=tls_server_name)
        except AddressError as exc:
            out.put((2, f"vllm-nnrp probe: bad address: {_one_line(str(exc))}"))
        except ProbeFailed as exc:
            out.put((1, f"vllm-nnrp probe: not ready: {exc}"))
        except Exception as exc:  # a probe answers with a status, never a traceback
            reason = _one_line(f"{type(exc).__name__}: {exc}")
            out.put((1, f"vllm-nnrp probe: not ready: {address}: {reason}"))
        else:
            out.put((0, f"ready {address}: {summary(document)}"))

    with contextlib.suppress(BaseException):  # the verdict is out already
        anyio.run(run)


def main(argv: Sequence[str]) -> int:
    """Probe, print the one line, return the status (in-process: tests call this).

    The verdict is given within ``--timeout`` plus the session's bounded close, even when a
    native thread is still waiting on a peer that accepted the connection and never answered
    (a hung server): that thread is left behind, which is why the command ends its process
    with :func:`command`."""
    args = _parser().parse_args(list(argv))
    if not args.timeout > 0:
        print("vllm-nnrp probe: error: --timeout must be above 0", file=sys.stderr)
        return 2
    verdicts: queue.SimpleQueue[tuple[int, str]] = queue.SimpleQueue()
    progress = Progress()
    threading.Thread(
        target=_verdict,
        args=(args.address, args.timeout, progress, verdicts, args.tls_ca, args.tls_server_name),
        name="vllm-nnrp probe",
        daemon=True,
    ).start()
    bound = args.timeout + _VERDICT_GRACE_S
    try:
        status, line = verdicts.get(timeout=bound)
    except queue.Empty:  # a close (or a connect's clean-up) lingers: say how far it got
        if progress.document is not None:
            status, line = 0, f"ready {args.address}: {summary(progress.document)}"
        else:
            status = 1
            line = (
                f"vllm-nnrp probe: not ready: {_late(args.address, progress.phase, args.timeout)}"
            )
    print(line, file=sys.stdout if status == 0 else sys.stderr, flush=True)
    return status


def command(argv: Sequence[str]) -> int:
    """``vllm-nnrp probe``: :func:`main`, then the process ends at once with its status.

    Ending with ``os._exit`` is deliberate: nnrp-py's connect runs on executor threads that
    the interpreter joins at exit, and against a peer that accepted the TCP connection but
    never answers the session open (exactly the hung adapter a liveness probe must catch) they
    wait until the peer goes away, which would keep the probe alive past any probe timeout.
    """
    status = main(argv)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
