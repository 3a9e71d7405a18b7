"""The explicit start-up path, and the NNRP serving both start-up paths share.

:func:`serve` builds everything from vLLM's own arguments (through :mod:`..vllm_backend`),
then serves until SIGINT/SIGTERM. :func:`nnrp_serving` is the part both paths share: the
adapter, the optional metrics server and the NNRP server around a bound backend, with the
start-up information. Which start-up path is active (``explicit`` here, ``vllm-plugin``
from :mod:`.vllm_plugin`), the vLLM version, the listen address and the security limits in
force are logged once at start and written to the ready file, so an operator (or a test)
can see them; the capability document's diagnostics carry the path too. So are the operations
the manifest lists that this vLLM line cannot keep (``withheld_operations``, with the reason).

On SIGINT/SIGTERM the explicit path closes the NNRP server first (its in-flight operations end
with ``TRANSPORT_CLOSED`` and their vLLM requests are aborted), waits (bounded) for vLLM to hold
no request, and prints one ``SHUTDOWN {json}`` line saying how many requests vLLM held at the
signal, how many are left, when vLLM held none and when the server had closed; then the
engine stops.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any, TypedDict

import anyio
import anyio.abc

from nnrp_conformance import contract

from ..adapter.adapter import VllmNnrpAdapter
from ..nnrp_server import NnrpServer
from ..observability.observability import Recorder, start_metrics_server
from ..profile.profile import load_manifest_document
from ..vllm_backend import BackendError, BackendStartupError, UnsupportedVllmVersion, VllmBackend
from .logs import route_logs
from .security import (
    InsecureListen,
    TlsError,
    claim,
    exposed,
    from_vllm_args,
    insecure_listen_problem,
    serving_problem,
)
from .settings import ServeConfig, claim_explicit_path

log = logging.getLogger("vllm_nnrp_adapter.serve")


class _ServerLimits(TypedDict, total=False):
    """The :class:`NnrpServer` limits a :class:`ServeConfig` may set; an unset one keeps the
    server's default."""

    max_envelope_bytes: int
    max_in_flight_per_connection: int
    busy_poll_budget_per_s: float


@contextlib.asynccontextmanager
async def nnrp_serving(
    backend: Any, config: ServeConfig, manifest: Mapping[str, Any] | None = None
) -> AsyncIterator[dict[str, Any]]:
    """Serve ``backend`` over NNRP on ``config.listen`` while the context is open.

    Yields the start-up information (also logged as one ``vllm-nnrp serving:`` line and
    written to ``config.ready_file``). On exit the NNRP server closes (in-flight operations
    end with ``TRANSPORT_CLOSED``, their vLLM requests aborted) and the metrics server stops.
    """
    # vLLM is loaded and has configured its logging by now: ours joins its handlers
    route_logs()
    # vLLM's own --api-key / VLLM_API_KEY and --ssl-* cover NNRP too (security.py)
    security = from_vllm_args(getattr(backend, "args", None), os.environ)
    listens = [config.listen, config.also_listen]
    problem = serving_problem(listens, security, config.allow_insecure)
    if problem is not None:
        raise InsecureListen(problem)
    # read once, before anything listens: a bad file is said with its name (TlsError)
    tls = security.tls.der() if security.tls is not None else None
    if config.allow_insecure and insecure_listen_problem(listens, security, False):
        log.warning("vllm-nnrp: --nnrp-allow-insecure: serving %s to other hosts with %s",
                    ", ".join(exposed(listens)), security.describe())
    if manifest is None:
        manifest = load_manifest_document(config.manifest_path)
    recorder = Recorder()
    adapter = VllmNnrpAdapter(
        backend,
        manifest,
        recorder=recorder,
        allowed_operator_fields=config.allowed_request_fields,
        echo_text_in_diagnostics=config.echo_text_in_diagnostics,
        security=claim(listens, security),
        **(
            {}
            if config.backend_stall_timeout_s is None
            else {"backend_stall_timeout_s": config.backend_stall_timeout_s}
        ),
    )
    server_kwargs: _ServerLimits = {}
    if config.max_envelope_bytes is not None:
        server_kwargs["max_envelope_bytes"] = config.max_envelope_bytes
    if config.max_in_flight is not None:
        server_kwargs["max_in_flight_per_connection"] = config.max_in_flight
    if config.busy_poll_budget is not None:
        server_kwargs["busy_poll_budget_per_s"] = config.busy_poll_budget
    metrics = None
    if config.metrics_port is not None:
        metrics = start_metrics_server(recorder, config.metrics_port)
        log.info("metrics: http://127.0.0.1:%d/metrics", config.metrics_port)
    try:
        async with contextlib.AsyncExitStack() as servers:
            server = await servers.enter_async_context(
                NnrpServer(adapter.handle, config.listen, api_keys=security.api_keys,
                           tls=tls, **server_kwargs))
            # a second listener (one transport each: nnrp-py binds one per server), same
            # adapter and engine: e.g. ipc:// for clients on this host beside TCP
            also = None if not config.also_listen else await servers.enter_async_context(
                NnrpServer(adapter.handle, config.also_listen, api_keys=security.api_keys,
                           tls=tls, **server_kwargs))
            info = {
                "address": server.address,
                **({"also_address": also.address} if also is not None else {}),
                "startup_path": config.startup_path,
                "vllm_version": backend.version,
                "served_models": list(backend.served_model_names),
                "max_model_len": getattr(backend, "max_model_len", None),
                "manifest": str(config.manifest_path),
                "max_envelope_bytes": server_kwargs.get(
                    "max_envelope_bytes", contract.DEFAULT_MAX_ENVELOPE_BYTES
                ),
                "metrics_port": config.metrics_port,
                "security": security.describe(),
            }
            if adapter.withheld:
                # listed by the manifest, not offered on this vLLM line (adapter.OPERATION_FEATURES)
                info["withheld_operations"] = dict(adapter.withheld)
                for operation, why in adapter.withheld.items():
                    log.warning("vllm-nnrp: %s is not offered: %s", operation, why)
            if config.api_server_count > 1:
                info["api_server"] = {"rank": config.api_server_rank,
                                      "count": config.api_server_count}
            log.info("vllm-nnrp serving: %s", json.dumps(info))
            if config.ready_file is not None:
                config.ready_file.write_text(json.dumps(info), encoding="utf-8")
            yield info
    finally:
        _stop_metrics(metrics)


def _stop_metrics(metrics: Any) -> None:
    # prometheus_client >= 0.20 returns (server, thread); older versions return None.
    server = metrics[0] if isinstance(metrics, tuple) and metrics else None
    if server is not None:
        with contextlib.suppress(Exception):
            server.shutdown()
            server.server_close()


async def serve(
    config: ServeConfig,
    *,
    task_status: anyio.abc.TaskStatus[dict[str, Any]] = anyio.TASK_STATUS_IGNORED,
) -> None:

    # vLLM loads its general plugins here too (our vllm_plugin among them): keep it off.
    claim_explicit_path()
    # Read before the engine starts: a bad manifest fails in a second, not after start-up.
    manifest = load_manifest_document(config.manifest_path)
    async with VllmBackend.from_cli_args(
        config.vllm_argv, allow_unsupported=config.allow_unsupported_vllm,
        embeddings_argv=config.embeddings_argv,
    ) as backend:
        engine_died = anyio.Event()
        drain = _Drain(backend)
        # the drain watch starts at the signal and outlives the server's close (the in-flight
        # requests are aborted during it), so its figure is the engine's, not the close's
        async with anyio.create_task_group() as watching:
            async with nnrp_serving(backend, config, manifest) as info:
                print(f"LISTENING {info['address']}", flush=True)
                task_status.started(info)
                async with anyio.create_task_group() as tg:
                    tg.start_soon(_until_signal, tg.cancel_scope)
                    tg.start_soon(_watch_engine, backend, tg.cancel_scope, engine_died)
                if not engine_died.is_set():
                    await drain.begin()
                    watching.start_soon(drain.watch)
            drain.server_closed()
        if engine_died.is_set():
            raise EngineDied("the vLLM engine died while serving (its engine-core process is gone)")
        drain.report()


#: how long a stopping adapter waits for vLLM to hold no request before the engine stops anyway
SHUTDOWN_DRAIN_LIMIT_S = 10.0


async def _engine_count(backend: Any) -> int | None:
    with contextlib.suppress(Exception):
        return int(await backend.num_unfinished_requests())
    return None


class _Drain:
    """From the stop signal until vLLM holds no request (bounded), then one ``SHUTDOWN`` line.

    The NNRP server's close aborts every request it started; a request vLLM still holds after
    ``SHUTDOWN_DRAIN_LIMIT_S`` is named in the line (``requests_left``), never hidden.
    """

    def __init__(self, backend: Any) -> None:
        self.backend = backend
        self.since = 0.0
        self.held_at_signal: int | None = None
        self.left: int | None = None
        self.drained_s: float | None = None
        self.server_closed_s: float | None = None

    async def begin(self) -> None:
        self.since = time.monotonic()
        self.held_at_signal = await _engine_count(self.backend)

    async def watch(self) -> None:
        self.left = await _engine_count(self.backend)
        with anyio.move_on_after(SHUTDOWN_DRAIN_LIMIT_S):
            while self.left:
                await anyio.sleep(0.005)
                self.left = await _engine_count(self.backend)
        if self.left == 0:
            self.drained_s = round(time.monotonic() - self.since, 4)

    def server_closed(self) -> None:
        if self.since:
            self.server_closed_s = round(time.monotonic() - self.since, 4)

    def report(self) -> None:
        fields = {
            "requests_at_signal": self.held_at_signal,
            "requests_left": self.left,
            "drained_s": self.drained_s,
            "server_closed_s": self.server_closed_s,
        }
        print(f"SHUTDOWN {json.dumps(fields)}", flush=True)


class EngineDied(RuntimeError):
    """vLLM's engine died under the adapter; the process exits with ``EXIT_ENGINE_DIED``."""


#: exit status of ``vllm-nnrp serve`` when the engine died while serving (docs/operator-guide.md)
EXIT_ENGINE_DIED = 5
#: how often the engine's health is looked at, and how long in-flight operations get to end
#: with their own ``backend_error`` before the server closes under them
ENGINE_WATCH_INTERVAL_S = 0.5
ENGINE_DEATH_GRACE_S = 1.0


async def _until_signal(scope: anyio.CancelScope) -> None:
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for signum in signals:
            log.info("received %s: shutting down", signal.Signals(signum).name)
            break
    scope.cancel()


async def _watch_engine(backend: Any, scope: anyio.CancelScope, died: anyio.Event) -> None:
    """End serving when the engine dies: an adapter without an engine must not look alive.

    vLLM's own HTTP server does the same (it exits when its engine client errors). The
    operations in flight end first with ``backend_error`` (vLLM raises EngineDeadError into
    each of them); new submits meanwhile get the same error; then the listener closes and the
    process exits with ``EXIT_ENGINE_DIED``.
    """
    while await backend.health():
        await anyio.sleep(ENGINE_WATCH_INTERVAL_S)
    log.error("vllm-nnrp: the vLLM engine died; closing the NNRP listener and exiting")
    died.set()
    await anyio.sleep(ENGINE_DEATH_GRACE_S)
    scope.cancel()


def run_serve(config: ServeConfig) -> int:

    try:
        anyio.run(serve, config)
    except EngineDied as exc:
        print(f"vllm-nnrp: {exc}", file=sys.stderr)
        return EXIT_ENGINE_DIED
    except UnsupportedVllmVersion as exc:
        print(f"vllm-nnrp: {exc}", file=sys.stderr)
        return 3
    except (BackendError, BackendStartupError) as exc:
        print(f"vllm-nnrp: the vLLM engine could not start: {exc}", file=sys.stderr)
        return 4
    except FileNotFoundError as exc:
        print(f"vllm-nnrp: {exc.filename}: no such file", file=sys.stderr)
        return 2
    except (InsecureListen, TlsError) as exc:
        print(f"vllm-nnrp serve: error: {exc}", file=sys.stderr)
        return 2
    return 0
