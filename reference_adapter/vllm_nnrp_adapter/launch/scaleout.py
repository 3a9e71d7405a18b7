"""Where each of vLLM's API-server processes serves NNRP when one ``vllm serve`` runs several.

With ``--api-server-count N`` (and in data-parallel deployments, whose front end vLLM gives N
API servers by default) vLLM starts N API-server processes that share one HTTP socket, each
with an engine client of its own; the plugin's middleware runs in every one of them. nnrp-py
binds a listener of its own and cannot take over a shared socket, and two processes cannot
bind one NNRP address (the second gets "address in use"), so each API server gets its own
address by a fixed rule, from the one ``NNRP_PLUGIN_LISTEN``:

* API server ``r`` of ``N`` (``r`` from 0) listens on the configured port plus ``r``
  (TCP, WebSocket); port 0 stays 0 (each picks a free port; its ready file says which);
* an IPC socket path ``S.sock`` becomes ``S.r.sock`` for ``r`` > 0;
* the ready file and the metrics port follow the same rule (``ready.json`` -> ``ready.1.json``,
  metrics port ``M`` -> ``M + r``);
* API server 0 keeps the configured values, so a single-server deployment reads as before.

The rank and count are the ones vLLM gave the process: ``parallel_config._api_process_rank``
and ``._api_process_count`` of the engine client's config (set from the ``client_config``
vLLM's ``run_multi_api_server`` hands each API server; both 0.18.1 and 0.22.1). Every API
server serves the same manifest, so all announce one capability document; ``nnrp-conformance
run --target A --target B …`` judges them as a fleet.

The explicit path (``vllm-nnrp serve``) is one process with one engine client: it cannot
start vLLM's API servers, and ``--headless`` would leave it nothing to serve from, so
:func:`explicit_path_problem` refuses both before the engine starts and names the plugin path.

Imports neither vLLM nor nnrp-py (vLLM loads the plugin in every process it starts).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from .settings import ServeConfig, flag_value

__all__ = ["ScaleOutError", "api_server_rank", "config_for_rank", "explicit_path_problem",
           "listen_for_rank", "path_for_rank"]

#: what to run instead, named in the explicit path's refusal
PLUGIN_COMMAND = ("NNRP_PLUGIN_LISTEN=HOST:PORT vllm serve MODEL {flags} --middleware "
                  "vllm_nnrp_adapter.vllm_plugin.NnrpServing")


class ScaleOutError(ValueError):
    """The process's place among the API servers cannot be told or used; the message says
    why."""


def api_server_rank(state: Any) -> tuple[int, int]:
    """(rank, count) of this API-server process, from the app state ``vllm serve`` built.

    A single API server (vLLM's default, or a config without the fields) is (0, 1)."""
    args = getattr(state, "args", None)
    asked = getattr(args, "api_server_count", None)
    parallel = getattr(getattr(getattr(state, "engine_client", None), "vllm_config", None),
                       "parallel_config", None)
    rank = getattr(parallel, "_api_process_rank", None)
    count = getattr(parallel, "_api_process_count", None)
    if isinstance(rank, int) and isinstance(count, int) and count >= 1 and 0 <= rank < count:
        return rank, count
    if isinstance(asked, int) and asked > 1:
        raise ScaleOutError(
            f"--api-server-count {asked}, but this API server's rank is not in the engine "
            f"client's config (parallel_config._api_process_rank={rank!r}, "
            f"_api_process_count={count!r}): cannot tell which NNRP address is its own")
    return 0, 1


def path_for_rank(path: Path, rank: int) -> Path:
    """``ready.json`` -> ``ready.<rank>.json`` (rank 0 unchanged)."""
    if rank == 0:
        return path
    return path.with_name(f"{path.stem}.{rank}{path.suffix}")


def listen_for_rank(listen: str, rank: int) -> str:
    """The listen address of API server ``rank`` (module docstring's rule)."""
    if rank == 0:
        return listen
    text = listen.strip()
    url = text if "://" in text else f"tcp://{text}"
    parts = urlsplit(url)
    if parts.scheme.lower() in ("ipc", "unix"):
        path = (parts.netloc + parts.path) if parts.scheme.lower() == "ipc" else parts.path
        shifted = str(path_for_rank(Path(path), rank))
        return f"{parts.scheme}://{shifted}"
    try:
        port = parts.port
    except ValueError as exc:
        raise ScaleOutError(f"NNRP listen address {listen!r}: {exc}") from None
    if port is None:
        raise ScaleOutError(f"NNRP listen address {listen!r} has no port")
    if port == 0:
        return listen
    if port + rank > 65535:
        raise ScaleOutError(f"NNRP listen address {listen!r}: API server {rank} would listen "
                            f"on port {port + rank}, beyond 65535")
    host = parts.netloc.rsplit(":", 1)[0]
    shifted_url = urlunsplit((parts.scheme, f"{host}:{port + rank}", parts.path, parts.query,
                              parts.fragment))
    return shifted_url if "://" in text else shifted_url.removeprefix("tcp://")


def config_for_rank(config: ServeConfig, rank: int, count: int) -> ServeConfig:
    """The serving settings of API server ``rank`` of ``count``."""
    if count <= 1:
        return config
    metrics = config.metrics_port
    if metrics is not None and metrics + rank > 65535:
        raise ScaleOutError(f"metrics port {metrics}: API server {rank} would use "
                            f"{metrics + rank}, beyond 65535")
    return dataclasses.replace(
        config,
        listen=listen_for_rank(config.listen, rank),
        ready_file=None if config.ready_file is None else path_for_rank(config.ready_file, rank),
        metrics_port=None if metrics is None else metrics + rank,
        api_server_rank=rank,
        api_server_count=count,
    )


def explicit_path_problem(vllm_argv: Sequence[str]) -> str | None:
    """Why ``vllm-nnrp serve`` cannot run with these vLLM flags (several API servers,
    ``--headless``), or None."""
    count = flag_value(vllm_argv, "--api-server-count", "-asc")
    if count is not None and count.strip().lstrip("+").isdigit() and int(count) > 1:
        return ("--api-server-count " + count.strip() + ": vllm-nnrp serve is one process "
                "with one engine client and starts no API servers; vLLM's own `vllm serve` "
                "does, and the plugin path serves NNRP from each of them (API server r on "
                "port + r): " + PLUGIN_COMMAND.format(flags="--api-server-count " + count))
    if "--headless" in vllm_argv:
        return ("--headless runs engines without an API server, so there is nothing to serve "
                "NNRP from: run it with `vllm serve` as vLLM documents, and serve NNRP from the "
                "front end's `vllm serve` with the plugin path: "
                + PLUGIN_COMMAND.format(flags="--data-parallel-size N …"))
    return None
