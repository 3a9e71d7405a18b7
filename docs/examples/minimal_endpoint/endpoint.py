"""A minimal third-party NNRP endpoint of the `openai-compatible/1` profile, on nnrp-py alone.

This module owns the process: its command line, listening and accepting sessions, and a
clean stop on SIGTERM or SIGINT. The rooms behind it:

* NNRP side: ``listening`` (``--listen``), ``accepting`` (sessions never lost at accept),
  ``session`` (one polling loop per session: starts, pacing, deadlines, cancels, closing),
  ``request_frame`` (the FRAME_SUBMIT's typed frame), ``sending`` (partials, terminals, drops).
* Profile side: ``envelope`` (envelope, errors, the ``Plan`` of an answer), ``chat_profile``
  (the deterministic "model" and ``plan_request``) with ``chat_body`` (its request checks),
  ``responses_profile`` (Level 2, ``--levels 2``), ``discovery_profile`` (the capability
  document; Level 3, ``--levels 3``; default 1: chat only, the claim of ``manifest.json``).
* Faults: ``defects`` (the ``--defect NAME`` registry), ``neighbours`` and ``tool_faults``
  (the defects that need their own room), ``variants`` (conformant ``--variant NAME``), and
  ``freedoms`` with ``freedom_acts`` (``--variant every-freedom``: every open choice at once).

    python endpoint.py --listen 127.0.0.1:0 [--model NAME] [--levels N] [--defect NAME]
    python endpoint.py --listen ipc:///tmp/endpoint.sock     # or ws://127.0.0.1:0
    python endpoint.py --list-defects

The first stdout line is ``LISTENING <target>`` once the endpoint accepts sessions
(``127.0.0.1:<port>`` over TCP, ``unix:///PATH`` or ``ws://127.0.0.1:<port>/`` otherwise: a
target the suite takes as is); SIGTERM or SIGINT stop it cleanly.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import anyio
from accepting import Acceptor
from config import Config, log
from defects import DEFECTS, check_defect
from freedoms import EVERY_FREEDOM, FREEDOMS, chosen
from listening import Listen, parse_listen, set_tcp_nodelay
from nnrp.native import NativeRuntimeError
from nnrp.server import (
    NativeServerBootstrapOptions,
    NativeServerProviderRoute,
    listen_native_server,
)
from session import Session
from variants import VARIANTS, check_variant

#: one accept's wait: how soon a stop is noticed while nobody connects
ACCEPT_SLICE_MS = 200


async def serve(listen: Listen, config: Config) -> None:
    loop = asyncio.get_running_loop()
    # Every SDK call runs on the default executor; sessions must not queue behind accept.
    loop.set_default_executor(ThreadPoolExecutor(max_workers=32, thread_name_prefix="nnrp"))
    # A forced policy with one explicit route: the only way nnrp-py binds port 0, and its AUTO
    # policy fails without routes for every transport.
    options = NativeServerBootstrapOptions(
        endpoint=f"nnrp://{listen.host}:{listen.port or 4433}",
        provider_routes={listen.transport: NativeServerProviderRoute(
            provider_endpoint=listen.provider)},
        transport_policy=listen.policy,
    )
    stop = anyio.Event()
    with listen_native_server(options) as server:
        bound = server.bound_provider_endpoints[listen.transport].uri
        async with anyio.create_task_group() as tg:

            async def watch_signals(*, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
                with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                    task_status.started()
                    async for _ in signals:
                        stop.set()
                        return

            # Announce readiness only once a stop signal is sure to end the endpoint cleanly.
            await tg.start(watch_signals)
            print(f"LISTENING {listen.announced(bound)}", flush=True)
            acceptor = Acceptor(server)  # nnrp-py's own accept can lose a session
            while not stop.is_set():
                try:
                    ssess = await anyio.to_thread.run_sync(acceptor.accept, ACCEPT_SLICE_MS)
                except NativeRuntimeError as exc:
                    log(f"accept failed: {exc}")
                    continue
                if ssess is None:
                    continue
                set_tcp_nodelay()
                tg.start_soon(Session(ssess, config, stop).run)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--listen", type=parse_listen, default=parse_listen("127.0.0.1:0"),
                        help="HOST:PORT (TCP; default 127.0.0.1:0, an ephemeral port), "
                             "ipc:///PATH or ws://HOST:PORT")
    parser.add_argument("--model", default="minimal-model", help="the one model id served")
    parser.add_argument("--levels", type=int, choices=(1, 2, 3), default=1,
                        help="serve the operations of Levels 1..N (default 1: chat; 3 is the "
                             "claim of manifest-levels.json)")
    parser.add_argument("--defect", default=None, help="inject one defect (see --list-defects)")
    parser.add_argument("--delta-delay-ms", type=float, default=1.0,
                        help="simulated generation time per token (default 1.0)")
    parser.add_argument("--variant", default=None,
                        help="a conformant variant: " + "; ".join(
                            f"{k}: {v}" for k, v in VARIANTS.items()))
    parser.add_argument("--without", action="append", default=[], metavar="FREEDOM",
                        help=f"with --variant {EVERY_FREEDOM}: leave this freedom out "
                             "(repeatable; freedoms.py lists them: " + ", ".join(FREEDOMS) + ")")
    parser.add_argument("--freedom", action="append", default=[], metavar="FREEDOM",
                        help="take only this freedom of freedoms.py (repeatable)")
    parser.add_argument("--api-key", default=None, metavar="KEY",
                        help="require this key: a session authenticates first with "
                             "nnrp.session.authenticate (api_key.py); the capability document "
                             "claims it")
    parser.add_argument("--api-key-unenforced", action="store_true",
                        help="with --api-key: claim the key and serve every session anyway")
    parser.add_argument("--list-defects", action="store_true", help="list defects and exit")
    args = parser.parse_args(argv)
    if args.list_defects:
        width = max(map(len, DEFECTS))
        for name, description in DEFECTS.items():
            print(f"{name:<{width}}  {description}")
        return 0
    try:
        defect = check_defect(args.defect)
    except ValueError as exc:
        parser.error(str(exc))
    try:
        variant = check_variant(args.variant)
    except ValueError as exc:
        parser.error(str(exc))
    try:
        freedoms = chosen(args.variant, args.freedom, args.without)
    except ValueError as exc:
        parser.error(str(exc))
    if args.delta_delay_ms < 0:
        parser.error("--delta-delay-ms must be >= 0")
    config = Config(model=args.model, defect=defect, delta_delay_s=args.delta_delay_ms / 1000,
                    variant=variant, levels=args.levels, freedoms=freedoms,
                    api_key=args.api_key or None,
                    enforce_api_key=not args.api_key_unenforced)
    try:
        anyio.run(serve, args.listen, config)
    except KeyboardInterrupt:
        pass
    except (NativeRuntimeError, RuntimeError) as exc:  # a selection error is a RuntimeError
        print(f"error: cannot listen on {args.listen.provider}: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
