"""The explicit start-up path: vLLM engine + chat serving object, bound to the NNRP server.

Builds everything from vLLM's own arguments (through :mod:`.vllm_backend`), then serves
until SIGINT/SIGTERM. Which start-up path is active, the vLLM version, the listen
address and the security limits in force are logged once at start and written to the
ready file, so an operator (or a test) can see them.
"""

from __future__ import annotations

import json
import logging
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path

import anyio

log = logging.getLogger("vllm_nnrp_adapter.serve")


@dataclass
class ServeConfig:
    vllm_argv: list[str]
    listen: str = "127.0.0.1:4433"
    manifest_path: Path | None = None
    max_envelope_bytes: int | None = None
    max_in_flight: int | None = None
    allowed_request_fields: tuple[str, ...] = ()
    echo_text_in_diagnostics: bool = False
    metrics_port: int | None = None
    backend_stall_timeout_s: float | None = None
    allow_unsupported_vllm: bool = False
    ready_file: Path | None = None
    startup_path: str = "explicit"
    extra: dict = field(default_factory=dict)


async def serve(config: ServeConfig, *, task_status=anyio.TASK_STATUS_IGNORED) -> None:
    from nnrp_conformance import contract

    from .adapter import VllmNnrpAdapter
    from .nnrp_server import NnrpServer
    from .observability import Recorder, start_metrics_server
    from .profile import load_manifest_document
    from .vllm_backend import VllmBackend

    manifest = load_manifest_document(config.manifest_path)
    async with VllmBackend.from_cli_args(
        config.vllm_argv, allow_unsupported=config.allow_unsupported_vllm
    ) as backend:
        recorder = Recorder()
        adapter = VllmNnrpAdapter(
            backend,
            manifest,
            recorder=recorder,
            allowed_operator_fields=config.allowed_request_fields,
            echo_text_in_diagnostics=config.echo_text_in_diagnostics,
            **(
                {}
                if config.backend_stall_timeout_s is None
                else {"backend_stall_timeout_s": config.backend_stall_timeout_s}
            ),
        )
        if config.metrics_port is not None:
            start_metrics_server(recorder, config.metrics_port)
            log.info("metrics: http://127.0.0.1:%d/metrics", config.metrics_port)
        server_kwargs = {}
        if config.max_envelope_bytes is not None:
            server_kwargs["max_envelope_bytes"] = config.max_envelope_bytes
        if config.max_in_flight is not None:
            server_kwargs["max_in_flight_per_connection"] = config.max_in_flight
        async with NnrpServer(adapter.handle, config.listen, **server_kwargs) as server:
            info = {
                "address": server.address,
                "startup_path": config.startup_path,
                "vllm_version": backend.version,
                "served_models": list(backend.served_model_names),
                "max_model_len": getattr(backend, "max_model_len", None),
                "manifest": str(config.manifest_path),
                "max_envelope_bytes": server_kwargs.get(
                    "max_envelope_bytes", contract.DEFAULT_MAX_ENVELOPE_BYTES
                ),
                "metrics_port": config.metrics_port,
            }
            log.info("vllm-nnrp serving: %s", json.dumps(info))
            if config.ready_file is not None:
                config.ready_file.write_text(json.dumps(info), encoding="utf-8")
            print(f"LISTENING {server.address}", flush=True)
            task_status.started(info)
            with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                async for signum in signals:
                    log.info("received %s: shutting down", signal.Signals(signum).name)
                    break


def run_serve(config: ServeConfig) -> int:
    from .vllm_backend import BackendError, BackendStartupError, UnsupportedVllmVersion

    try:
        anyio.run(serve, config)
    except UnsupportedVllmVersion as exc:
        print(f"vllm-nnrp: {exc}", file=sys.stderr)
        return 3
    except (BackendError, BackendStartupError) as exc:
        print(f"vllm-nnrp: the vLLM engine could not start: {exc}", file=sys.stderr)
        return 4
    except FileNotFoundError as exc:
        print(f"vllm-nnrp: {exc.filename}: no such file", file=sys.stderr)
        return 2
    return 0
