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
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

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

STARTUP_PATH = "vllm-plugin"
ENV_PREFIX = "NNRP_PLUGIN_"
#: the switch: unset or empty means the plugin does nothing at all
ENV_LISTEN = ENV_PREFIX + "LISTEN"
ENV_LOG_LEVEL = ENV_PREFIX + "LOG_LEVEL"
#: what to give ``vllm serve --middleware``
MIDDLEWARE = f"{__name__}.NnrpServing"

# Deliberately not VLLM_*: vLLM warns about every unknown VLLM_* variable and refuses them
# under --fail-on-environ-validation (vllm/envs.py validate_environ).

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"", "0", "false", "no", "off"}


class PluginSettingsError(ValueError):
    """An ``NNRP_PLUGIN_*`` variable is missing, unknown or unreadable."""


def _text(value: str) -> str:
    return value.strip()


def _path(value: str) -> Path:
    return Path(value.strip())


def _positive_int(value: str) -> int:
    number = int(value.strip())
    if number <= 0:
        raise ValueError("must be a positive integer")
    return number


def _port(value: str) -> int:
    number = int(value.strip())
    if not 0 < number < 65536:
        raise ValueError("must be a TCP port (1-65535)")
    return number


def _positive_float(value: str) -> float:
    number = float(value.strip())
    if not number > 0:
        raise ValueError("must be a positive number of seconds")
    return number


def _non_negative_float(value: str) -> float:
    number = float(value.strip())
    if not number >= 0:
        raise ValueError("must be 0 or a positive number")
    return number


def _names(value: str) -> tuple[str, ...]:
    return tuple(name.strip() for name in value.split(",") if name.strip())


def _flag(value: str) -> bool:
    word = value.strip().lower()
    if word in _TRUE:
        return True
    if word in _FALSE:
        return False
    raise ValueError(f"must be one of {sorted(_TRUE | _FALSE - {''})}")


#: NNRP_PLUGIN_<SUFFIX> -> (ServeConfig field, parser); the suffix is the explicit path's
#: flag --nnrp-<suffix> in upper case with "_" for "-".
_SETTINGS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "LISTEN": ("listen", _text),
    "MANIFEST": ("manifest_path", _path),
    "READY_FILE": ("ready_file", _path),
    "MAX_ENVELOPE_BYTES": ("max_envelope_bytes", _positive_int),
    "MAX_IN_FLIGHT": ("max_in_flight", _positive_int),
    "BUSY_POLL_BUDGET": ("busy_poll_budget", _non_negative_float),
    "ALLOW_REQUEST_FIELD": ("allowed_request_fields", _names),
    "ECHO_TEXT_IN_DIAGNOSTICS": ("echo_text_in_diagnostics", _flag),
    "METRICS_PORT": ("metrics_port", _port),
    "BACKEND_STALL_TIMEOUT": ("backend_stall_timeout_s", _positive_float),
    "ALLOW_UNSUPPORTED_VLLM": ("allow_unsupported_vllm", _flag),
    "LOG_LEVEL": ("", _text),  # read by _route_logs
}


def enabled(environ: Mapping[str, str] | None = None) -> bool:
    """True when ``NNRP_PLUGIN_LISTEN`` is set to something (the only switch)."""
    environ = os.environ if environ is None else environ
    return bool(environ.get(ENV_LISTEN, "").strip())


def settings_from_environ(environ: Mapping[str, str] | None = None) -> Any:
    """The plugin's :class:`.serve.ServeConfig` from ``NNRP_PLUGIN_*``, or None when off.

    Raises :class:`PluginSettingsError` for an unknown ``NNRP_PLUGIN_*`` name (a typo must
    not silently drop a limit) or a value that does not parse, and for a listen address the
    NNRP server could not use.
    """
    environ = os.environ if environ is None else environ
    if not enabled(environ):
        return None
    from .cli import default_manifest_path
    from .serve import ServeConfig

    values: dict[str, Any] = {}
    for name in sorted(environ):
        if not name.startswith(ENV_PREFIX):
            continue
        suffix = name[len(ENV_PREFIX) :]
        if suffix not in _SETTINGS:
            known = ", ".join(ENV_PREFIX + s for s in _SETTINGS)
            raise PluginSettingsError(f"unknown setting {name} (known: {known})")
        field_name, parse = _SETTINGS[suffix]
        if not field_name:
            continue
        try:
            values[field_name] = parse(environ[name])
        except ValueError as exc:
            raise PluginSettingsError(f"{name}={environ[name]!r}: {exc}") from None
    from nnrp_conformance.wire.pump import AddressError, parse_address

    try:
        parse_address(values["listen"])
    except AddressError as exc:
        raise PluginSettingsError(f"{ENV_LISTEN}: {exc}") from None
    values.setdefault("manifest_path", default_manifest_path())
    return ServeConfig(vllm_argv=[], startup_path=STARTUP_PATH, **values)


# --------------------------------------------------------------------- the entry point
_armed: Any = None  # the ServeConfig register() checked in this process
_explicit_path = False


def claim_explicit_path() -> None:
    """Called by the explicit path (``vllm-nnrp serve``): the plugin stays off there.

    vLLM loads general plugins in that process too (its argument parser does); one process
    serves NNRP by one path only. A set ``NNRP_PLUGIN_LISTEN`` is reported as ignored.
    """
    global _explicit_path
    _explicit_path = True
    if enabled():
        log.warning(
            "vllm-nnrp: %s is set but ignored: this process is the explicit start-up path "
            "(vllm-nnrp serve --nnrp-listen)",
            ENV_LISTEN,
        )


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
    if not enabled() or _in_spawned_process() or _explicit_path or _armed is not None:
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
    if MIDDLEWARE not in " ".join(sys.argv) and "--config" not in sys.argv:
        log.warning(
            "vllm-nnrp plugin: --middleware %s is not on this command line: NNRP will not "
            "start unless the API server is given it",
            MIDDLEWARE,
        )


class _Refusal(Exception):
    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


def _checked_config() -> Any:
    """Settings, vLLM version and manifest, checked; raises :class:`_Refusal`."""
    from .profile import load_manifest_document
    from .vllm_backend import UnsupportedVllmVersion, check_version_supported, detect_vllm_version

    try:
        config = settings_from_environ()
    except PluginSettingsError as exc:
        raise _Refusal(str(exc), 2) from None
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
    """Our log lines go where vLLM's go (its handlers on the ``vllm`` logger), once."""
    ours = logging.getLogger("vllm_nnrp_adapter")
    level = os.environ.get(ENV_LOG_LEVEL, "").strip().upper() or "INFO"
    ours.setLevel(level if level in logging.getLevelNamesMapping() else "INFO")
    if ours.handlers:
        return
    vllm_handlers = logging.getLogger("vllm").handlers
    if vllm_handlers:
        for handler in vllm_handlers:
            ours.addHandler(handler)
        ours.propagate = False
    elif not logging.getLogger().handlers:
        # vLLM's logging configuration is off (VLLM_CONFIGURE_LOGGING=0) and nobody else
        # configured logging: without a handler INFO lines would vanish.
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(levelname)s %(asctime)s %(name)s: %(message)s"))
        ours.addHandler(handler)
        ours.propagate = False


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
            message = await receive()
            if message.get("type") == "lifespan.shutdown":
                await self._stop()
            return message

        try:
            await self.app(scope, receive_through, send_through)
        finally:
            await self._stop()

    # The backend binding; a seam for tests that run the middleware without vLLM.
    def _bind_backend(self, state: Any, config: Any) -> Any:
        from .vllm_backend import VllmBackend

        return VllmBackend.from_app_state(
            state, allow_unsupported=config.allow_unsupported_vllm, startup_path=STARTUP_PATH
        )

    async def _start(self, state: Any) -> str | None:
        """Start NNRP serving; returns None, or the reason it could not start."""
        _route_logs()
        from .serve import nnrp_serving

        try:
            if state is None:
                raise _Refusal("the ASGI scope carries no app state (not vLLM's API server?)", 2)
            config = _armed if _armed is not None else _checked_config()
            args = getattr(state, "args", None)
            count = getattr(args, "api_server_count", None)
            if isinstance(count, int) and count > 1:
                raise _Refusal(
                    f"--api-server-count {count}: every API server process would bind "
                    f"{config.listen}; the plugin path serves NNRP from a single API server",
                    2,
                )
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
