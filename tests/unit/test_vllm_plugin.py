"""The vLLM-plugin start-up path without vLLM: settings, the switch, refusals, pass-through.

The same code against real vLLM: tests/real_vllm/test_vllm_plugin_real.py (serving inside
vLLM's API server) and test_vllm_plugin_inert.py (vLLM's loader and app, switch off).
"""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from vllm_nnrp_adapter import settings, vllm_plugin
from vllm_nnrp_adapter.launch.vllm_plugin import (
    ENV_LISTEN,
    ENV_PREFIX,
    NnrpServing,
    PluginSettingsError,
    settings_from_environ,
)

OURS = "vllm_nnrp_adapter"


@pytest.fixture(autouse=True)
def clean(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """No NNRP_PLUGIN_* from outside; the module's and our logger's state restored after."""
    import os

    for name in list(os.environ):
        if name.startswith(ENV_PREFIX):
            monkeypatch.delenv(name)
    monkeypatch.setattr(vllm_plugin, "_armed", None)
    monkeypatch.setattr(settings, "_explicit_path", False)
    logger = logging.getLogger(OURS)
    saved = (logger.level, list(logger.handlers), logger.propagate)
    yield
    logger.setLevel(saved[0])
    logger.handlers[:] = saved[1]
    logger.propagate = saved[2]


def _skip_if_vllm() -> None:
    """These refusals need an interpreter without vLLM (the dev venv)."""
    from vllm_nnrp_adapter.vllm_backend import detect_vllm_version

    if detect_vllm_version() is not None:
        pytest.skip("vLLM is importable here")


def _ours(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name.startswith(OURS)]


def test_importing_the_plugin_imports_nothing_heavy() -> None:
    code = (
        "import sys, vllm_nnrp_adapter.vllm_plugin\n"
        "heavy = {'vllm', 'nnrp', 'nnrp_conformance', 'anyio', 'starlette'}\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize(
    "environ",
    [{}, {ENV_LISTEN: ""}, {ENV_LISTEN: "   "}, {ENV_PREFIX + "MAX_IN_FLIGHT": "4"}],
    ids=["unset", "empty", "blank", "other-settings-only"],
)
def test_without_listen_the_plugin_is_off(environ: dict[str, str]) -> None:
    assert settings_from_environ(environ) is None
    assert vllm_plugin.enabled(environ) is False


def test_every_setting_maps_onto_the_explicit_paths_config(tmp_path: Path) -> None:
    manifest = tmp_path / "m.json"
    config = settings_from_environ(
        {
            ENV_LISTEN: " 127.0.0.1:4555 ",
            ENV_PREFIX + "MANIFEST": str(manifest),
            ENV_PREFIX + "READY_FILE": str(tmp_path / "ready.json"),
            ENV_PREFIX + "MAX_ENVELOPE_BYTES": "2048",
            ENV_PREFIX + "MAX_IN_FLIGHT": "8",
            ENV_PREFIX + "ALLOW_REQUEST_FIELD": "chat_template, logits_processors",
            ENV_PREFIX + "ECHO_TEXT_IN_DIAGNOSTICS": "yes",
            ENV_PREFIX + "METRICS_PORT": "9400",
            ENV_PREFIX + "BACKEND_STALL_TIMEOUT": "12.5",
            ENV_PREFIX + "ALLOW_UNSUPPORTED_VLLM": "0",
            ENV_PREFIX + "LOG_LEVEL": "debug",
            "UNRELATED": "x",
        }
    )
    assert config.startup_path == "vllm-plugin"
    assert config.listen == "127.0.0.1:4555"
    assert config.manifest_path == manifest
    assert config.ready_file == tmp_path / "ready.json"
    assert (config.max_envelope_bytes, config.max_in_flight) == (2048, 8)
    assert config.allowed_request_fields == ("chat_template", "logits_processors")
    assert config.echo_text_in_diagnostics is True
    assert config.metrics_port == 9400
    assert config.backend_stall_timeout_s == 12.5
    assert config.allow_unsupported_vllm is False
    assert config.vllm_argv == []


def test_defaults_are_the_explicit_paths_defaults() -> None:
    config = settings_from_environ({ENV_LISTEN: "127.0.0.1:0"})
    explicit = settings.ServeConfig(vllm_argv=[])
    assert config.manifest_path == settings.default_manifest_path()
    for name in ("max_envelope_bytes", "max_in_flight", "metrics_port", "ready_file",
                 "backend_stall_timeout_s", "allowed_request_fields",
                 "echo_text_in_diagnostics", "allow_unsupported_vllm"):
        assert getattr(config, name) == getattr(explicit, name), name


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        ("LISTN", "127.0.0.1:1", "unknown setting NNRP_PLUGIN_LISTN"),
        ("MAX_IN_FLIGHT", "many", "NNRP_PLUGIN_MAX_IN_FLIGHT='many'"),
        ("MAX_ENVELOPE_BYTES", "0", "positive"),
        ("METRICS_PORT", "70000", "TCP port"),
        ("ECHO_TEXT_IN_DIAGNOSTICS", "maybe", "NNRP_PLUGIN_ECHO_TEXT_IN_DIAGNOSTICS"),
        ("BACKEND_STALL_TIMEOUT", "-1", "positive"),
        # inside `vllm serve` the engine is vLLM's: a second one is the explicit path's
        ("EMBEDDINGS_ENGINE", "/m --runner pooling", "vllm-nnrp serve --nnrp-embeddings-engine"),
        ("EMBEDDINGS_ENGINE", "  ", "must name a model"),
    ],
)
def test_bad_settings_are_named(name: str, value: str, says: str) -> None:
    with pytest.raises(PluginSettingsError, match=says.replace("(", r"\(")):
        settings_from_environ({ENV_LISTEN: "127.0.0.1:0", ENV_PREFIX + name: value})


@pytest.mark.parametrize("address", ["127.0.0.1", "gopher://x:1", "tcp://127.0.0.1:99999"])
def test_an_unusable_listen_address_is_refused(address: str) -> None:
    with pytest.raises(PluginSettingsError, match=ENV_LISTEN):
        settings_from_environ({ENV_LISTEN: address})


def test_register_without_the_switch_does_nothing_at_all(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger(OURS)
    before = (logger.level, list(logger.handlers), logger.propagate)
    with caplog.at_level(logging.DEBUG):
        assert vllm_plugin.register() is None
    assert _ours(caplog) == []
    assert (logger.level, list(logger.handlers), logger.propagate) == before
    assert vllm_plugin._armed is None


def test_register_refuses_loudly_when_enabled_but_vllm_is_missing(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    _skip_if_vllm()
    monkeypatch.setenv(ENV_LISTEN, "127.0.0.1:0")
    with caplog.at_level(logging.INFO), pytest.raises(SystemExit) as exit_:
        vllm_plugin.register()
    assert exit_.value.code == 3
    (record,) = _ours(caplog)
    assert record.levelno == logging.ERROR
    assert "refusing to start" in record.getMessage()
    assert "not importable" in record.getMessage()
    assert vllm_plugin._armed is None


def test_register_refuses_bad_settings_with_status_2(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(ENV_LISTEN, "127.0.0.1:0")
    monkeypatch.setenv(ENV_PREFIX + "MAX_IN_FLIGHT", "lots")
    with caplog.at_level(logging.INFO), pytest.raises(SystemExit) as exit_:
        vllm_plugin.register()
    assert exit_.value.code == 2
    assert "NNRP_PLUGIN_MAX_IN_FLIGHT" in _ours(caplog)[0].getMessage()


def test_register_stays_off_on_the_explicit_path(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(ENV_LISTEN, "127.0.0.1:0")
    with caplog.at_level(logging.INFO):
        vllm_plugin.claim_explicit_path()
        assert vllm_plugin.register() is None
    (record,) = _ours(caplog)
    assert record.levelno == logging.WARNING and "ignored" in record.getMessage()
    assert vllm_plugin._armed is None


def test_register_does_nothing_in_spawned_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_LISTEN, "127.0.0.1:0")
    monkeypatch.setattr(vllm_plugin, "_in_spawned_process", lambda: True)
    assert vllm_plugin.register() is None
    assert vllm_plugin._armed is None


# ------------------------------------------------------------------------ the middleware
def _lifespan_app(log: list[dict]):  # type: ignore[no-untyped-def]
    async def app(scope, receive, send):  # type: ignore[no-untyped-def]
        log.append({"scope": scope["type"]})
        if scope["type"] != "lifespan":
            return
        log.append(await receive())
        await send({"type": "lifespan.startup.complete"})
        log.append(await receive())
        await send({"type": "lifespan.shutdown.complete"})

    return app


async def _run_lifespan(app, scope):  # type: ignore[no-untyped-def]
    inbox: asyncio.Queue[dict] = asyncio.Queue()
    sent: list[dict] = []

    async def send(message: dict) -> None:
        sent.append(message)
        if message["type"].startswith("lifespan.startup."):
            await inbox.put({"type": "lifespan.shutdown"})

    await inbox.put({"type": "lifespan.startup"})
    await asyncio.wait_for(app(scope, inbox.get, send), timeout=30)
    return sent


def test_middleware_without_the_switch_passes_everything_through(
    caplog: pytest.LogCaptureFixture,
) -> None:
    seen: list[dict] = []
    mw = NnrpServing(_lifespan_app(seen))
    state = SimpleNamespace()  # no engine objects: they must not be needed
    with caplog.at_level(logging.DEBUG):
        sent = asyncio.run(_run_lifespan(mw, {"type": "lifespan", "app": SimpleNamespace(state=state)}))
        asyncio.run(mw({"type": "http"}, None, None))
    assert [m["type"] for m in sent] == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    assert seen == [{"scope": "lifespan"}, {"type": "lifespan.startup"},
                    {"type": "lifespan.shutdown"}, {"scope": "http"}]
    assert _ours(caplog) == []
    assert mw.info is None


def test_middleware_reports_a_failed_start_to_the_server(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    _skip_if_vllm()
    monkeypatch.setenv(ENV_LISTEN, "127.0.0.1:0")
    seen: list[dict] = []
    mw = NnrpServing(_lifespan_app(seen))
    with caplog.at_level(logging.INFO):
        sent = asyncio.run(
            _run_lifespan(mw, {"type": "lifespan", "app": SimpleNamespace(state=SimpleNamespace())})
        )
    failed = sent[0]
    assert failed["type"] == "lifespan.startup.failed"
    assert failed["message"].startswith("vllm-nnrp plugin: NNRP serving did not start")
    assert "not importable" in failed["message"]
    assert any(r.levelno == logging.ERROR for r in _ours(caplog))
    assert mw.info is None


#: a value of each setting as a flag argument and as a variable, and the config value both mean
_SAMPLES = {
    "listen": ("127.0.0.1:4555", "127.0.0.1:4555"),
    "also-listen": ("ipc:///tmp/nnrp.sock", "ipc:///tmp/nnrp.sock"),
    "manifest": ("m.json", Path("m.json")),
    "ready-file": ("r.json", Path("r.json")),
    "max-envelope-bytes": ("2048", 2048),
    "max-in-flight": ("8", 8),
    "busy-poll-budget": ("0", 0.0),
    "allow-request-field": ("chat_template", ("chat_template",)),
    "echo-text-in-diagnostics": (None, True),
    "metrics-port": ("9400", 9400),
    "backend-stall-timeout": ("12.5", 12.5),
    "allow-unsupported-vllm": (None, True),
    "allow-insecure": (None, True),
    "log-level": ("debug", None),
    "embeddings-engine": ("/m --runner pooling", ["/m", "--runner", "pooling"]),
}
#: settings of the explicit path alone: the plugin names the variable and refuses it
_EXPLICIT_ONLY = {"embeddings-engine", "also-listen"}


@pytest.mark.parametrize("setting", settings.SETTINGS, ids=lambda s: s.name)
def test_each_setting_is_one_flag_and_one_variable_meaning_the_same(setting) -> None:  # type: ignore[no-untyped-def]
    import argparse

    arg, want = _SAMPLES[setting.name]
    parser = argparse.ArgumentParser()
    settings.add_serve_flags(parser)
    argv = [setting.flag] + ([] if arg is None else [arg])
    from_flag = settings.config_from_flags(parser.parse_args(argv), [])
    environ = {ENV_LISTEN: "127.0.0.1:0", setting.env: "yes" if arg is None else arg}
    assert setting.env.startswith(ENV_PREFIX)
    if setting.name in _EXPLICIT_ONLY:
        assert getattr(from_flag, setting.field) == want
        with pytest.raises(PluginSettingsError, match=setting.env):
            settings_from_environ(environ)
        return
    from_env = settings_from_environ(environ)
    if not setting.field:  # read by the log set-up, on both paths
        assert parser.parse_args(argv).log_level == arg
        return
    assert getattr(from_flag, setting.field) == want
    assert getattr(from_env, setting.field) == want


def test_the_table_is_the_whole_config_and_a_bad_flag_value_is_named() -> None:
    import argparse
    import dataclasses

    fields = {f.name for f in dataclasses.fields(settings.ServeConfig)}
    table = {s.field for s in settings.SETTINGS if s.field}
    # what no setting covers is set by the path itself (or by vLLM: the API server's place
    # among several), never by an operator
    assert fields - table == {"vllm_argv", "startup_path", "api_server_rank", "api_server_count"}
    parser = argparse.ArgumentParser(exit_on_error=False)
    settings.add_serve_flags(parser)
    with pytest.raises(argparse.ArgumentError, match="'0': must be a positive integer"):
        parser.parse_args(["--nnrp-max-in-flight", "0"])


def test_the_operator_guide_lists_every_flag_and_variable() -> None:
    guide = (Path(__file__).resolve().parents[2] / "docs" / "operator-guide.md").read_text(
        encoding="utf-8")
    missing = [name for s in settings.SETTINGS for name in (f"`{s.flag}", f"`{s.env}`")
               if name not in guide]
    assert missing == []


@pytest.mark.parametrize(("argv", "environ", "reason"), [
    (["vllm", "serve", "m", "--headless"], {}, "--headless runs engines without an API server"),
    (["vllm", "serve", "m"], {"VLLM_USE_RUST_FRONTEND": "1"}, "VLLM_USE_RUST_FRONTEND"),
    (["vllm", "serve", "m", "--api-server-count", "2"], {"VLLM_USE_RUST_FRONTEND": "0"}, None),
])
def test_a_serve_without_a_python_api_server_is_named(argv: list[str], environ: dict[str, str],
                                                      reason: str | None) -> None:
    said = vllm_plugin.no_api_server_reason(argv, environ)
    assert said == reason if reason is None else (said is not None and reason in said)
