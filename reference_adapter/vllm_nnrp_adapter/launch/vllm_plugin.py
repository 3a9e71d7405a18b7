"""The vLLM-plugin start-up path: NNRP serving inside ``vllm serve``, off unless asked for.

This module owns the adapter's second way to start (the first is the explicit
``vllm-nnrp serve``, :mod:`.serve`):

- :func:`register`, the ``vllm.general_plugins`` entry point ``nnrp`` (pyproject.toml);
- :class:`NnrpServing`, the ASGI middleware vLLM's API server mounts when it is given
  ``--middleware vllm_nnrp_adapter.vllm_plugin.NnrpServing``;
- the plugin's settings, read from ``NNRP_PLUGIN_*`` environment variables
  (:func:`settings_from_environ`; one per ``--nnrp-*`` flag of the explicit path);
- the NNRP server's life inside the API server process: started on the ASGI lifespan
  start-up, bound to the serving objects ``vllm serve`` built (``app.state.engine_client``
  and ``app.state.openai_serving_chat``, through :meth:`.VllmBackend.from_app_state`),
  stopped on the lifespan shutdown.

Enabling it takes both switches: ``NNRP_PLUGIN_LISTEN=HOST:PORT`` in the environment and the
``--middleware`` flag. Without ``NNRP_PLUGIN_LISTEN`` nothing happens at all: vLLM calls
:func:`register` in every process it starts (API server, engine core, workers) and it returns
at once; the middleware passes every message through untouched; nothing is logged, no port is
opened, no thread started. With it, :func:`register` acts only in the main process (not in
vLLM's spawned engine core and workers, which inherit the environment): it checks the
settings, the vLLM version and the manifest before the engine spends its start-up time, and
logs one line saying the plugin path is armed. The middleware then starts NNRP serving once
vLLM's own lifespan start-up is complete, and vLLM only reports "Application startup
complete" after NNRP listens; if NNRP cannot start, the API server's start-up fails with the
reason (an operator who asked for NNRP never gets a server silently without it).

Why these two pieces (vLLM 0.18.1 and 0.22.1 alike; the sources are cited in
docs/operator-guide.md): general plugins are the only plugin group vLLM loads in the API
server process for every model, but they receive nothing (no parser, no app); the only
public hook that reaches the running app is ``--middleware`` (``FrontendArgs.middleware``,
added with ``app.add_middleware`` in ``build_app``), and ``init_app_state`` has filled
``app.state`` before uvicorn sends the lifespan start-up. Nothing of vLLM is patched, no
``.pth`` file is installed, and importing this module imports neither vLLM nor nnrp-py.

Which path is active is visible in the ``vllm-nnrp serving:`` log line, the ready file
(``NNRP_PLUGIN_READY_FILE``) and the capability document's diagnostics, all with
``startup_path: "vllm-plugin"``.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import sys
from typing import Any

from .logs import route_logs
from .scaleout import ScaleOutError, api_server_rank, config_for_rank
from .settings import (
    ENV_LISTEN,
    ENV_LOG_LEVEL,
    ENV_PREFIX,
    STARTUP_PATH,
    PluginSettingsError,
    ServeConfig,
    claim_explicit_path,
    enabled,
    explicit_path_claimed,
    settings_from_environ,
)

__all__ = [
    "ENV_LISTEN",
    "ENV_PREFIX",
    "MIDDLEWARE",
    "STARTUP_PATH",
    "NnrpServing",
    "PluginSettingsError",
    "claim_explicit_path",
    "register",
    "settings_from_environ",
]

log = logging.getLogger("vllm_nnrp_adapter.vllm_plugin")

#: what to give ``vllm serve --middleware``: the documented name, which the package's alias
#: table (``vllm_nnrp_adapter/__init__.py``) resolves to this module
MIDDLEWARE = "vllm_nnrp_adapter.vllm_plugin.NnrpServing"

# --------------------------------------------------------------------- the entry point
_armed: Any = None  # the ServeConfig register() checked in this process
def _in_spawned_process() -> bool:
    # vLLM's engine core, workers and extra API servers are multiprocessing children.
    return multiprocessing.parent_process() is not None


def register() -> None:
    """The ``vllm.general_plugins`` entry point ``nnrp``.

    vLLM calls it in every process it starts (``vllm.plugins.load_general_plugins``: from
    ``AsyncEngineArgs.add_cli_args`` / ``EngineArgs.__post_init__`` in the API server, and
    in the engine core and worker processes). Returns at once unless ``NNRP_PLUGIN_LISTEN``
    is set and this is the main process. Then it checks the settings, the vLLM version and
    the manifest, and exits the process with a logged reason (status 2: settings; 3: vLLM
    outside the supported line) rather than let ``vllm serve`` start without the NNRP
    serving the operator asked for.
    """
    global _armed
    if not enabled() or _in_spawned_process() or explicit_path_claimed() or _armed is not None:
        return
    _route_logs()
    try:
        config = _checked_config()
    except _Refusal as refusal:
        log.error("vllm-nnrp plugin: refusing to start: %s", refusal.message)
        raise SystemExit(refusal.status) from None
    _armed = config
    log.info(
        "vllm-nnrp plugin: enabled by %s=%s (pid %d); NNRP serving (start-up path %r) starts "
        "with vLLM's API server, which needs --middleware %s",
        ENV_LISTEN,
        config.listen,
        os.getpid(),
        STARTUP_PATH,
        MIDDLEWARE,
    )
    no_api_server = no_api_server_reason(sys.argv, os.environ)
    if no_api_server is not None:
        log.warning("vllm-nnrp plugin: %s: NNRP is not served by this process (the front "
                    "end's vllm serve with the plugin serves it)", no_api_server)
    elif MIDDLEWARE not in " ".join(sys.argv) and "--config" not in sys.argv:
        log.warning(
            "vllm-nnrp plugin: --middleware %s is not on this command line: NNRP will not "
            "start unless the API server is given it",
            MIDDLEWARE,
        )


def no_api_server_reason(argv: list[str], environ: Any) -> str | None:
    """Why this ``vllm serve`` starts no Python API server (so the middleware never runs), or
    None: ``--headless`` (engines only, e.g. the other nodes of a data-parallel deployment)
    or vLLM 0.22's Rust front end (``VLLM_USE_RUST_FRONTEND=1``)."""
    if "--headless" in argv:
        return "--headless runs engines without an API server"
    if str(environ.get("VLLM_USE_RUST_FRONTEND", "0")).strip() not in ("", "0"):
        return "VLLM_USE_RUST_FRONTEND puts vLLM's Rust front end in place of the Python API server"
    return None


class _Refusal(Exception):
    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


def _checked_config() -> ServeConfig:
    """Settings, vLLM version and manifest, checked; raises :class:`_Refusal`."""
    # lazy on purpose: vLLM imports this module in every process it starts (module docstring)
    from ..profile.profile import load_manifest_document
    from ..vllm_backend import UnsupportedVllmVersion, check_version_supported, detect_vllm_version

    try:
        config = settings_from_environ()
    except PluginSettingsError as exc:
        raise _Refusal(str(exc), 2) from None
    if config is None:  # the callers run only when it is set; the environment may change
        raise _Refusal(f"{ENV_LISTEN} is not set", 2)
    version = detect_vllm_version()
    try:
        if version is None:
            raise UnsupportedVllmVersion("vLLM is not importable in this process")
        check_version_supported(version, allow_unsupported=config.allow_unsupported_vllm)
    except UnsupportedVllmVersion as exc:
        raise _Refusal(
            f"{exc} (the plugin path relies on vLLM's --middleware hook and app.state as "
            f"found on the tested versions; {ENV_PREFIX}ALLOW_UNSUPPORTED_VLLM=1 tries anyway)",
            3,
        ) from None
    try:
        load_manifest_document(config.manifest_path)
    except (OSError, ValueError) as exc:
        raise _Refusal(f"manifest {config.manifest_path}: {exc}", 2) from None
    return config


def _route_logs() -> None:
    """Our log lines go where vLLM's go, at ``NNRP_PLUGIN_LOG_LEVEL`` (default INFO)."""
    route_logs(os.environ.get(ENV_LOG_LEVEL, "").strip() or "INFO")


# ----------------------------------------------------------------------- the middleware
class NnrpServing:
    """ASGI middleware that runs the NNRP server for the life of vLLM's API server.

    Mounted by ``vllm serve --middleware vllm_nnrp_adapter.vllm_plugin.NnrpServing``
    (vLLM calls ``app.add_middleware(NnrpServing)``; Starlette builds it with the next
    app). HTTP and websocket traffic passes through untouched. With ``NNRP_PLUGIN_LISTEN``
    unset the lifespan passes through too and nothing else happens. With it set: after the
    app's own lifespan start-up completes, NNRP serving starts bound to
    ``scope["app"].state`` (vLLM's engine client and chat serving object) before the
    start-up is reported complete; a failure is reported as ``lifespan.startup.failed``
    with the reason, which makes uvicorn end the API server. On ``lifespan.shutdown`` the
    NNRP server closes before the app's own shutdown runs.
    """

    def __init__(self, app: Any) -> None:
        self.app = app
        self._enabled = enabled()
        self._stack: contextlib.AsyncExitStack | None = None
        self._backend: Any = None
        self.info: dict[str, Any] | None = None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if not self._enabled or scope["type"] != "lifespan":
            await self.app(scope, receive, send)
            return
        await self._lifespan(scope, receive, send)

    async def _lifespan(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        state = getattr(scope.get("app"), "state", None)

        async def send_through(message: dict[str, Any]) -> None:
            if message.get("type") == "lifespan.startup.complete":
                failure = await self._start(state)
                if failure is not None:
                    message = {"type": "lifespan.startup.failed", "message": failure}
            await send(message)

        async def receive_through() -> dict[str, Any]:
            message: dict[str, Any] = await receive()  # an ASGI message
            if message.get("type") == "lifespan.shutdown":
                await self._stop()
            return message

        try:
            await self.app(scope, receive_through, send_through)
        finally:
            await self._stop()

    # The backend binding; a seam for tests that run the middleware without vLLM.
    def _bind_backend(self, state: Any, config: Any) -> Any:
        # lazy on purpose: vLLM imports this module in every process it starts
        from ..vllm_backend import VllmBackend

        return VllmBackend.from_app_state(
            state, allow_unsupported=config.allow_unsupported_vllm, startup_path=STARTUP_PATH
        )

    async def _start(self, state: Any) -> str | None:
        """Start NNRP serving; returns None, or the reason it could not start."""
        _route_logs()
        # lazy on purpose: serving loads nnrp-py, only in the process that serves NNRP
        from .serve import nnrp_serving

        try:
            if state is None:
                raise _Refusal("the ASGI scope carries no app state (not vLLM's API server?)", 2)
            config = _armed if _armed is not None else _checked_config()
            try:
                # with --api-server-count N each API server serves its own address
                config = config_for_rank(config, *api_server_rank(state))
            except ScaleOutError as exc:
                raise _Refusal(str(exc), 2) from None
            backend = self._bind_backend(state, config)
            stack = contextlib.AsyncExitStack()
            info = await stack.enter_async_context(nnrp_serving(backend, config))
        except _Refusal as refusal:
            reason = refusal.message
        except Exception as exc:  # the engine binding or the listener failed
            reason = f"{type(exc).__name__}: {exc}"
        else:
            self._stack, self._backend, self.info = stack, backend, info
            return None
        log.error("vllm-nnrp plugin: NNRP serving did not start: %s", reason)
        return f"vllm-nnrp plugin: NNRP serving did not start: {reason}"

    async def _stop(self) -> None:
        stack, self._stack = self._stack, None
        if stack is None:
            return
        backend, self._backend = self._backend, None
        address = (self.info or {}).get("address")
        try:
            await stack.aclose()
        finally:
            if backend is not None:
                with contextlib.suppress(Exception):
                    await backend.abort_in_flight()
            log.info(
                "vllm-nnrp plugin: NNRP server on %s stopped (start-up path %r)",
                address,
                STARTUP_PATH,
            )
