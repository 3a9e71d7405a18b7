"""The pytest face's options: every ``--nnrp-*`` option (each also an ini key) and how they
become one :class:`~nnrp_conformance.options.RunOptions`, with a usage error that names the
option for a bad value. ``pytest_addoption`` is registered through :mod:`.plugin`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from nnrp_conformance.model_choice import parse_model_options
from nnrp_conformance.options import API_KEY_ENV
from nnrp_conformance.session import (
    DEFAULT_IDLE_TIMEOUT,
    DEFAULT_TIMEOUT,
    RunOptions,
    SetupError,
    parse_params,
)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("nnrp", "NNRP openai-compatible/1 conformance")

    def add(flag: str, ini: str, help_: str, *, ini_type: str | None = None, **kw: Any) -> None:
        group.addoption(flag, dest=ini, default=None, help=f"{help_} (ini: {ini})", **kw)
        if ini_type is None:
            parser.addini(ini, help_)
        else:
            parser.addini(ini, help_, type=ini_type)  # type: ignore[arg-type]

    add("--nnrp-target", "nnrp_target",
        "NNRP endpoint to test: HOST:PORT or a scheme URL (tcp://, ipc:///PATH, ws://; TLS: "
        "quic+tls://, wss://, tcp+tls://); repeat it to judge a fleet (each target on its own, "
        "then one merged verdict)", ini_type="args", action="append", metavar="TARGET")
    add("--manifest", "nnrp_manifest",
        "adapter capability manifest (JSON/YAML); required with a target", metavar="PATH")
    add("--recipes", "nnrp_recipes",
        "recipe files or directories (repeatable; default: the bundled recipes)",
        ini_type="paths", action="append", metavar="PATH")
    add("--nnrp-model", "nnrp_model",
        "model id for ${MODEL_ID}: ID for every operation, OPERATION=ID for one (repeatable; "
        "default: the model the capability document or manifest says serves the operation, "
        "else their first)", ini_type="linelist", action="append", metavar="[OP=]ID")
    add("--nnrp-param", "nnrp_params", "recipe parameter KEY=VALUE or RECIPE_ID:KEY=VALUE "
        "(repeatable)", ini_type="linelist", action="append", metavar="KEY=VALUE")
    add("--nnrp-extension", "nnrp_extensions",
        "select the recipes of a critical extension (repeatable)", ini_type="args",
        action="append", metavar="NAME")
    add("--nnrp-level", "nnrp_level", "compatibility level to test (default: the highest the "
        "manifest claims)", metavar="N")
    add("--nnrp-timeout", "nnrp_timeout",
        f"per-case timeout in seconds (default {DEFAULT_TIMEOUT:g})", metavar="SECONDS")
    add("--nnrp-idle-timeout", "nnrp_idle_timeout", "end a case when the endpoint sends no "
        f"frame for this many seconds (default {DEFAULT_IDLE_TIMEOUT:g})", metavar="SECONDS")
    add("--nnrp-strict", "nnrp_strict", "fail on non-strict findings too (recommendations not "
        "followed)", ini_type="bool", action="store_true")
    add("--nnrp-capabilities", "nnrp_capabilities", "the capability document as a file, used "
        "when the endpoint has no discovery operation", metavar="FILE")
    add("--nnrp-results", "nnrp_results", "case results JSON (default "
        "nnrp-conformance/case-results.json)", metavar="PATH")
    add("--nnrp-report", "nnrp_report", "write PATH.md and PATH.html (or the .md/.html pair "
        "named by PATH)", metavar="PATH")
    add("--nnrp-plan", "nnrp_plan", "execution plan JSON (default: execution-plan.json beside "
        "the case results)", metavar="PATH")
    add("--nnrp-report-ndjson", "nnrp_report_ndjson", "write the run's event stream, one JSON "
        "object per event, to PATH", metavar="PATH")
    add("--nnrp-baseline", "nnrp_baseline", "accepted failures (recipe, rule, reason, "
        "expiry): a matched failure reads 'waived' and does not fail the run", metavar="FILE")
    add("--nnrp-baseline-update", "nnrp_baseline_update", "rewrite the --nnrp-baseline file "
        "from this run's failures", ini_type="bool", action="store_true")
    add("--nnrp-http-twin", "nnrp_http_twin", "also send every request body to the provider's "
        "own OpenAI-compatible HTTP API at URL and show each difference of the two answers "
        "(non-strict; docs/twin.md)", metavar="URL")
    add("--nnrp-generate", "nnrp_generate", "also run N generated requests (valid, invalid and "
        "sequences on one session; docs/generation.md)", metavar="N")
    add("--nnrp-seed", "nnrp_seed", "the seed of the generated requests (default: a random one, "
        "printed; the same seed draws the same requests)", metavar="S")
    add("--nnrp-generate-save", "nnrp_generate_save", "save each shrunk failed or non-strict "
        "generated case as a recipe file in DIR (default: generated-recipes/ beside the case "
        "results)",
        metavar="DIR")
    # no ini key: a key does not belong in a file checked in beside the tests
    group.addoption("--nnrp-api-key", dest="nnrp_api_key", default=None, metavar="KEY",
                    help=f"the endpoint's API key: each session authenticates with it first "
                         f"(default: ${API_KEY_ENV}, which keeps it out of the process list)")
    add("--nnrp-tls-ca", "nnrp_tls_ca", "for a TLS target (quic+tls://, wss://, tcp+tls://): "
        "the CA certificate (PEM or DER) its certificate must chain to", metavar="FILE")
    add("--nnrp-tls-server-name", "nnrp_tls_server_name", "the name the TLS target's "
        "certificate must carry (default: the target's host)", metavar="NAME")
    add("--nnrp-trace", "nnrp_trace", "write each case's frames (sent and received) as NDJSON "
        "into DIR/CASE_ID.ndjson", metavar="DIR")


def _value(config: pytest.Config, name: str) -> Any:
    cli = config.getoption(name)
    if cli is not None:
        return cli
    ini = config.getini(name)
    return ini if ini not in ("", [], None) else None


def _float(text: Any, option: str) -> float:
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise pytest.UsageError(f"{option} expects a number of seconds, got {text!r}") from None
    if value <= 0:
        raise pytest.UsageError(f"{option} must be positive, got {text!r}")
    return value


def _int(text: Any, option: str) -> int:
    """A count or seed: an integer >= 0 (None stays 0)."""
    if text is None:
        return 0
    try:
        value = int(text)
    except (TypeError, ValueError):
        raise pytest.UsageError(f"{option} expects an integer, got {text!r}") from None
    if value < 0:
        raise pytest.UsageError(f"{option} must be >= 0, got {text!r}")
    return value


def _targets(config: pytest.Config) -> list[str]:
    """The targets given (``--nnrp-target``, repeatable, or the ``nnrp_target`` ini key, a
    space-separated list)."""
    return [str(t) for t in _value(config, "nnrp_target") or ()]


def _options(config: pytest.Config) -> RunOptions | None:
    targets = _targets(config)
    if not targets:
        return None
    target = targets[0]
    manifest = _value(config, "nnrp_manifest")
    if not manifest:
        raise pytest.UsageError(
            "--manifest is required with --nnrp-target: give the adapter capability manifest "
            "(--manifest PATH or the nnrp_manifest ini key)")
    base = Path(config.invocation_params.dir)
    recipes = _value(config, "nnrp_recipes")
    level = _value(config, "nnrp_level")
    if level is not None:
        try:
            level = int(level)
        except ValueError:
            raise pytest.UsageError(f"--nnrp-level expects an integer, got {level!r}") from None
    timeout = _value(config, "nnrp_timeout")
    idle = _value(config, "nnrp_idle_timeout")
    try:
        params = parse_params(_value(config, "nnrp_params") or [])
        model, models = parse_model_options(_value(config, "nnrp_model"))
    except SetupError as exc:
        raise pytest.UsageError(str(exc)) from None

    def path(name: str) -> Path | None:
        v = _value(config, name)
        return None if v is None else base / Path(v)

    generate, seed = _int(_value(config, "nnrp_generate"), "--nnrp-generate"), \
        _value(config, "nnrp_seed")
    seed = None if seed is None else _int(seed, "--nnrp-seed")
    if _value(config, "nnrp_baseline_update") and not _value(config, "nnrp_baseline"):
        raise pytest.UsageError("--nnrp-baseline-update needs --nnrp-baseline FILE (the file "
                                "to write)")
    return RunOptions(
        target=str(target),
        manifest=base / Path(manifest),
        recipes=tuple(base / Path(p) for p in recipes) if recipes else None,
        model=model,
        models=models,
        params=params,
        extensions=tuple(_value(config, "nnrp_extensions") or ()),
        level=level,
        timeout=DEFAULT_TIMEOUT if timeout is None else _float(timeout, "--nnrp-timeout"),
        idle_timeout=DEFAULT_IDLE_TIMEOUT if idle is None
        else _float(idle, "--nnrp-idle-timeout"),
        strict=bool(_value(config, "nnrp_strict")),
        capabilities_file=path("nnrp_capabilities"),
        results=path("nnrp_results"),
        plan=path("nnrp_plan"),
        report=path("nnrp_report"),
        trace_dir=path("nnrp_trace"),
        report_ndjson=path("nnrp_report_ndjson"),
        baseline=path("nnrp_baseline"),
        baseline_update=bool(_value(config, "nnrp_baseline_update")),
        http_twin=_value(config, "nnrp_http_twin"),
        generate=generate or 0,
        seed=seed,
        generate_save=path("nnrp_generate_save"),
        api_key=config.getoption("nnrp_api_key") or os.environ.get(API_KEY_ENV) or None,
        tls_ca=path("nnrp_tls_ca"),
        tls_server_name=_value(config, "nnrp_tls_server_name"),
        base_dir=base,
    )
