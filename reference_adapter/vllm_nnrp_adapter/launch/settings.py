"""The adapter's start-up settings: what ``vllm-nnrp serve --nnrp-*`` and ``NNRP_PLUGIN_*``
configure, and which of the two start-up paths owns this process.

Owns :class:`ServeConfig` (the one settings object both paths build; the explicit path from
its ``--nnrp-*`` flags in :mod:`..cli`, the vLLM-plugin path from the environment here), the
``NNRP_PLUGIN_*`` table that maps each variable onto a :class:`ServeConfig` field with its
parser, the packaged default manifest, and the explicit path's claim on the process (the
plugin stays off where ``vllm-nnrp serve`` runs). Imports neither vLLM nor nnrp-py: vLLM
loads the plugin, and with it this module, in every process it starts.
"""

from __future__ import annotations

import argparse
import logging
import os
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..profile.policy import SUPPORTED_VLLM

__all__ = [
    "DEFAULT_MANIFEST",
    "ENV_LISTEN",
    "ENV_LOG_LEVEL",
    "ENV_PREFIX",
    "SETTINGS",
    "STARTUP_PATH",
    "PluginSettingsError",
    "ServeConfig",
    "Setting",
    "add_serve_flags",
    "claim_explicit_path",
    "config_from_flags",
    "default_manifest_path",
    "enabled",
    "explicit_path_claimed",
    "flag_value",
    "settings_from_environ",
]

log = logging.getLogger("vllm_nnrp_adapter.vllm_plugin")

DEFAULT_MANIFEST = Path(__file__).parent.with_name("manifest.json")


def default_manifest_path() -> Path:
    """The packaged adapter manifest (a copy of ``manifests/vllm-nnrp-adapter.json``)."""
    repo_copy = Path(__file__).resolve().parents[3] / "manifests" / "vllm-nnrp-adapter.json"
    return repo_copy if repo_copy.is_file() else DEFAULT_MANIFEST


@dataclass
class ServeConfig:
    """Everything NNRP serving needs besides the engine: built by the explicit path from its
    ``--nnrp-*`` flags (:mod:`..cli`) and by the plugin from ``NNRP_PLUGIN_*`` (below)."""

    vllm_argv: list[str]
    listen: str = "127.0.0.1:4433"
    #: a second address the same adapter serves (e.g. ipc:// beside TCP); None: only listen
    also_listen: str | None = None
    # the packaged manifest unless one is named: a ServeConfig built in code (not from flags
    # or the environment) serves too, where None failed in Path(None) at start-up
    manifest_path: Path = field(default_factory=default_manifest_path)
    max_envelope_bytes: int | None = None
    max_in_flight: int | None = None
    #: polls a second the busy sessions share (None: the server's default, 0: no budget)
    busy_poll_budget: float | None = None
    allowed_request_fields: tuple[str, ...] = ()
    echo_text_in_diagnostics: bool = False
    metrics_port: int | None = None
    backend_stall_timeout_s: float | None = None
    allow_unsupported_vllm: bool = False
    #: serve a non-loopback address without TLS and an API key (security.py's safe default)
    allow_insecure: bool = False
    ready_file: Path | None = None
    startup_path: str = "explicit"
    #: this process's place among vLLM's API servers (``--api-server-count``; scaleout.py)
    api_server_rank: int = 0
    api_server_count: int = 1
    #: ``vllm serve`` arguments of a second, pooling engine that serves embeddings
    #: (``--nnrp-embeddings-engine``; explicit path only: vllm_backend/pooling.py)
    embeddings_argv: list[str] | None = None


STARTUP_PATH = "vllm-plugin"
ENV_PREFIX = "NNRP_PLUGIN_"
#: the switch: unset or empty means the plugin does nothing at all
ENV_LISTEN = ENV_PREFIX + "LISTEN"
ENV_LOG_LEVEL = ENV_PREFIX + "LOG_LEVEL"

# Deliberately not VLLM_*: vLLM warns about every unknown VLLM_* variable and refuses them
# under --fail-on-environ-validation (vllm/envs.py validate_environ).

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"", "0", "false", "no", "off"}


class PluginSettingsError(ValueError):
    """An ``NNRP_PLUGIN_*`` variable is missing, unknown or unreadable."""


def _text(value: str) -> str:
    return value.strip()


def _address(value: str) -> str:
    """A listen address nnrp-py can serve, refused here (before vLLM starts) when it is not."""
    # Lazy on purpose: the address parser lives with nnrp-py's options, and nnrp-py must not
    # load in the processes vLLM starts where the plugin is off (a value is parsed only when
    # given). Its AddressError is a ValueError: both paths report it as a bad setting.
    from nnrp_conformance.wire.pump import parse_address

    parse_address(value.strip())
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


def _argv(value: str) -> list[str]:
    words = shlex.split(value)
    if not words:
        raise ValueError("must name a model, with more `vllm serve` flags after it if needed")
    return words


def _flag(value: str) -> bool:
    word = value.strip().lower()
    if word in _TRUE:
        return True
    if word in _FALSE:
        return False
    raise ValueError(f"must be one of {sorted(_TRUE | _FALSE - {''})}")


@dataclass(frozen=True)
class Setting:
    """One start-up setting: the flag ``--nnrp-NAME`` of ``vllm-nnrp serve`` and the variable
    ``NNRP_PLUGIN_NAME`` (upper case, ``_`` for ``-``) of the plugin path, both parsed by
    ``parse`` into the :class:`ServeConfig` field ``field`` ("" for one read elsewhere)."""

    name: str
    field: str
    parse: Callable[[str], Any]
    help: str
    #: "value"; "switch" (a flag without a value; the variable takes yes/no); "list" (the flag
    #: repeats, the variable is comma-separated)
    kind: str = "value"
    metavar: str | None = None

    @property
    def flag(self) -> str:
        return f"--nnrp-{self.name}"

    @property
    def env(self) -> str:
        return ENV_PREFIX + self.name.upper().replace("-", "_")


#: the one table of start-up settings: the CLI's flags and the plugin's variables come from it
SETTINGS: tuple[Setting, ...] = (
    Setting("listen", "listen", _address,
            "listen address: host:port (TCP) or a scheme URL (tcp://, ipc:///PATH, ws://); "
            "default 127.0.0.1:4433", metavar="ADDRESS"),
    Setting("also-listen", "also_listen", _address,
            "a second listen address served by the same adapter and engine, e.g. "
            "ipc:///run/nnrp.sock beside TCP for clients on this host", metavar="ADDRESS"),
    Setting("manifest", "manifest_path", _path,
            "adapter capability manifest (default: the packaged one)", metavar="FILE"),
    Setting("ready-file", "ready_file", _path,
            "write {'address': ...} and the start-up facts as JSON here once serving",
            metavar="FILE"),
    Setting("max-envelope-bytes", "max_envelope_bytes", _positive_int,
            "largest submit envelope accepted (default 1 MiB)", metavar="BYTES"),
    Setting("max-in-flight", "max_in_flight", _positive_int,
            "per-connection limit on operations in flight (default 64)", metavar="N"),
    Setting("busy-poll-budget", "busy_poll_budget", _non_negative_float,
            "polls a second shared by the sessions with work in flight; beyond it each polls "
            "less often (default 1000; 0: no budget)", metavar="POLLS_PER_S"),
    Setting("allow-request-field", "allowed_request_fields", _names,
            "accept an operator-only body field (e.g. chat_template)", kind="list",
            metavar="FIELD"),
    Setting("echo-text-in-diagnostics", "echo_text_in_diagnostics", _flag,
            "allow prompt/completion text in diagnostics (off by default)", kind="switch"),
    Setting("metrics-port", "metrics_port", _port,
            "serve Prometheus /metrics on 127.0.0.1:PORT (off by default)", metavar="PORT"),
    Setting("backend-stall-timeout", "backend_stall_timeout_s", _positive_float,
            "fail an operation whose backend gives no output for this long (default 300)",
            metavar="SECONDS"),
    Setting("embeddings-engine", "embeddings_argv", _argv,
            "serve embeddings.create from a second, pooling engine started with these "
            "`vllm serve` arguments, e.g. 'MODEL --runner pooling' (explicit path only)",
            metavar="'MODEL FLAGS'"),
    Setting("allow-unsupported-vllm", "allow_unsupported_vllm", _flag,
            f"run on a vLLM outside {SUPPORTED_VLLM} (canary runs)", kind="switch"),
    Setting("allow-insecure", "allow_insecure", _flag,
            "listen on a non-loopback address without TLS (--ssl-certfile/--ssl-keyfile) and "
            "an API key (--api-key / VLLM_API_KEY); refused otherwise, logged once when "
            "allowed", kind="switch"),
    Setting("log-level", "", _text, "log level of the adapter's loggers (default INFO)",
            metavar="LEVEL"),
)
_BY_ENV: dict[str, Setting] = {s.env: s for s in SETTINGS}


def _argparse_type(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    def convert(text: str) -> Any:
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"{text!r}: {exc}") from None

    convert.__name__ = parse.__name__.lstrip("_")
    return convert


def add_serve_flags(parser: argparse.ArgumentParser) -> None:
    """Every :data:`SETTINGS` entry as a ``--nnrp-*`` flag (destination: the config field)."""
    for s in SETTINGS:
        dest = s.field or s.name.replace("-", "_")
        if s.kind == "switch":
            parser.add_argument(s.flag, dest=dest, action="store_true", default=None,
                                help=s.help)
        elif s.kind == "list":
            parser.add_argument(s.flag, dest=dest, action="append", default=None,
                                type=_argparse_type(_text), metavar=s.metavar, help=s.help)
        else:
            parser.add_argument(s.flag, dest=dest, default=None, type=_argparse_type(s.parse),
                                metavar=s.metavar, help=s.help)


def config_from_flags(opts: argparse.Namespace, vllm_argv: list[str]) -> ServeConfig:
    """The explicit path's :class:`ServeConfig` from parsed flags (unset ones keep defaults)."""
    values: dict[str, Any] = {}
    for s in SETTINGS:
        value = getattr(opts, s.field, None) if s.field else None
        if value is None:
            continue
        values[s.field] = tuple(value) if s.kind == "list" else value
    return ServeConfig(vllm_argv=vllm_argv, **values)


def flag_value(argv: Sequence[str], *names: str) -> str | None:
    """The value of the first of the flags ``names`` (``--flag X`` or ``--flag=X``) in
    ``argv``, or None."""
    for i, arg in enumerate(argv):
        for name in names:
            if arg == name and i + 1 < len(argv):
                return argv[i + 1]
            if arg.startswith(name + "="):
                return arg.split("=", 1)[1]
    return None


def model_argument(vllm_argv: Sequence[str]) -> str | None:
    """The value of vLLM's ``--model`` (``--model X`` or ``--model=X``) in ``vllm_argv``."""
    return flag_value(vllm_argv, "--model")


def model_path_problem(model: str) -> str | None:
    """Why ``model`` cannot be served, when it names a local path that is no model; else None.

    vLLM takes a local directory or a Hugging Face repo id. A value that can only be a path
    (absolute, ``./``, ``../``, ``~``, or more than one ``/``) and is missing would otherwise
    reach the hub: Hugging Face's repo-id message, or 30 s of retries, after the engine's
    start-up. A repo id (``org/name``) is left to vLLM.
    """
    looks_like_path = model.startswith(("/", "./", "../", "~")) or model.count("/") > 1
    path = Path(model).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            return f"model directory {model} has no config.json (not a Hugging Face model folder)"
        return None
    if path.exists():
        return f"model path {model} is a file, not a model directory"
    if looks_like_path:
        return (f"model path {model} does not exist (a local model directory, or a Hugging "
                f"Face repo id such as org/name)")
    return None


def enabled(environ: Mapping[str, str] | None = None) -> bool:
    """True when ``NNRP_PLUGIN_LISTEN`` is set to something (the only switch)."""
    environ = os.environ if environ is None else environ
    return bool(environ.get(ENV_LISTEN, "").strip())


def settings_from_environ(environ: Mapping[str, str] | None = None) -> ServeConfig | None:
    """The plugin's :class:`ServeConfig` from ``NNRP_PLUGIN_*``, or None when off.

    Raises :class:`PluginSettingsError` for an unknown ``NNRP_PLUGIN_*`` name (a typo must
    not silently drop a limit) or a value that does not parse, and for a listen address the
    NNRP server could not use.
    """
    environ = os.environ if environ is None else environ
    if not enabled(environ):
        return None
    values: dict[str, Any] = {}
    for name in sorted(environ):
        if not name.startswith(ENV_PREFIX):
            continue
        setting = _BY_ENV.get(name)
        if setting is None:
            known = ", ".join(_BY_ENV)
            raise PluginSettingsError(f"unknown setting {name} (known: {known})")
        if not setting.field:
            continue
        try:
            values[setting.field] = setting.parse(environ[name])
        except ValueError as exc:
            raise PluginSettingsError(f"{name}={environ[name]!r}: {exc}") from None
    # Lazy on purpose: the address parser lives with nnrp-py's options, and nnrp-py must not
    # load in the processes vLLM starts where the plugin is off (see the module docstring).
    from nnrp_conformance.wire.pump import AddressError, parse_address

    try:
        parse_address(values["listen"])
    except AddressError as exc:
        raise PluginSettingsError(f"{ENV_LISTEN}: {exc}") from None
    if values.get("also_listen"):
        # several API servers each take the listen port plus their rank; a second address
        # has no such rule (an ipc path would collide): the explicit path's alone
        raise PluginSettingsError(
            f"{ENV_PREFIX}ALSO_LISTEN: a second listener is started only by `vllm-nnrp serve "
            "--nnrp-also-listen`; beside `vllm serve`, NNRP_PLUGIN_LISTEN is the one address")
    if values.get("embeddings_argv"):
        # inside `vllm serve` the engine is vLLM's own; a second one is the explicit path's
        raise PluginSettingsError(
            f"{ENV_PREFIX}EMBEDDINGS_ENGINE: a second, pooling engine is started only by "
            "`vllm-nnrp serve --nnrp-embeddings-engine`; beside `vllm serve`, run a second "
            "`vllm serve` of the pooling model")
    return ServeConfig(vllm_argv=[], startup_path=STARTUP_PATH, **values)


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


def explicit_path_claimed() -> bool:
    """True once :func:`claim_explicit_path` ran in this process."""
    return _explicit_path
