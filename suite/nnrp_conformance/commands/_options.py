"""Options shared by the ``run`` and ``plan`` subcommands (the plugin's, minus ``nnrp-``).

Every option also accepts the plugin's spelling (``--nnrp-target`` …), so a command line can
move between ``pytest`` and ``nnrp-conformance run`` unchanged.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from nnrp_conformance.model_choice import parse_model_options
from nnrp_conformance.options import API_KEY_ENV
from nnrp_conformance.session import (
    DEFAULT_IDLE_TIMEOUT,
    DEFAULT_TIMEOUT,
    RunOptions,
    SetupError,
    parse_params,
)

__all__ = ["add_plan_options", "error", "options_from_args"]


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text!r}")
    return value


def _natural(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text!r}")
    return value


def _positive_count(text: str) -> int:
    value = _natural(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {text!r}")
    return value


#: the most operations ``--concurrency`` keeps in flight at once (a bound, not a tuning)
MAX_CONCURRENCY = 64


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if not 1 <= value <= MAX_CONCURRENCY:
        raise argparse.ArgumentTypeError(f"must be between 1 and {MAX_CONCURRENCY}, got {text!r}")
    return value


def add_plan_options(parser: argparse.ArgumentParser, *, target_required: bool,
                     several_targets: bool = False) -> None:
    if several_targets:
        parser.add_argument("--target", "--nnrp-target", dest="target", required=True,
                            action="append", metavar="TARGET",
                            help="NNRP endpoint: HOST:PORT or a scheme URL (tcp://, ipc:///PATH, "
                                 "ws://; TLS: quic+tls://, wss://, tcp+tls://); repeat it to "
                                 "judge a fleet (each target on its own, "
                                 "then one merged verdict)")
    else:
        parser.add_argument("--target", "--nnrp-target", dest="target",
                            required=target_required, metavar="TARGET",
                            help="NNRP endpoint: HOST:PORT or a scheme URL (tcp://, ipc:///PATH, "
                                 "ws://; TLS: quic+tls://, wss://, tcp+tls://)")
    parser.add_argument("--manifest", required=True, type=Path, metavar="PATH",
                        help="adapter capability manifest (JSON or YAML)")
    parser.add_argument("--recipes", action="append", type=Path, metavar="PATH",
                        help="recipe file or directory (repeatable; default: bundled recipes)")
    parser.add_argument("--model", "--nnrp-model", dest="model", metavar="[OP=]ID",
                        action="append",
                        help="model id for ${MODEL_ID}: ID for every operation, OPERATION=ID "
                             "for one (repeatable; default: the model the capability document "
                             "or manifest says serves the operation, else their first)")
    parser.add_argument("--param", "--nnrp-param", dest="params", action="append", default=[],
                        metavar="KEY=VALUE",
                        help="recipe parameter, KEY=VALUE or RECIPE_ID:KEY=VALUE (repeatable)")
    parser.add_argument("--extension", "--nnrp-extension", dest="extensions", action="append",
                        default=[], metavar="NAME",
                        help="select the recipes of a critical extension (repeatable)")
    parser.add_argument("--level", "--nnrp-level", dest="level", type=int, metavar="N",
                        help="compatibility level to test (default: the manifest's highest)")
    parser.add_argument("--results", "--nnrp-results", dest="results", type=Path,
                        metavar="PATH",
                        help="case results JSON (default nnrp-conformance/case-results.json)")
    parser.add_argument("--plan", "--nnrp-plan", dest="plan", type=Path, metavar="PATH",
                        help="execution plan JSON (default: execution-plan.json beside the "
                             "results)")
    parser.add_argument("--connect-timeout", type=_positive, default=10.0, metavar="SECONDS",
                        help="connection timeout (default 10)")
    parser.add_argument("--api-key", "--nnrp-api-key", dest="api_key", metavar="KEY",
                        default=os.environ.get(API_KEY_ENV) or None,
                        help=f"the endpoint's API key: each session authenticates with it "
                             f"first (default: ${API_KEY_ENV}, which keeps it out of the "
                             f"process list)")
    parser.add_argument("--tls-ca", "--nnrp-tls-ca", dest="tls_ca", type=Path, metavar="FILE",
                        help="for a TLS target (quic+tls://, wss://, tcp+tls://): the CA "
                             "certificate (PEM or DER) its certificate must chain to")
    parser.add_argument("--tls-server-name", "--nnrp-tls-server-name", dest="tls_server_name",
                        metavar="NAME",
                        help="the name the TLS target's certificate must carry (default: the "
                             "target's host)")
    parser.add_argument("--capabilities", "--nnrp-capabilities", dest="capabilities",
                        type=Path, metavar="FILE",
                        help="the capability document as a file: used when the endpoint has no "
                             "discovery operation (plan: instead of a target)")


def add_run_options(parser: argparse.ArgumentParser) -> None:
    add_plan_options(parser, target_required=True, several_targets=True)
    parser.add_argument("--timeout", "--nnrp-timeout", dest="timeout", type=_positive,
                        default=DEFAULT_TIMEOUT, metavar="SECONDS",
                        help=f"per-case timeout (default {DEFAULT_TIMEOUT:g})")
    parser.add_argument("--idle-timeout", "--nnrp-idle-timeout", dest="idle_timeout",
                        type=_positive, default=DEFAULT_IDLE_TIMEOUT, metavar="SECONDS",
                        help="end a case when the endpoint sends no frame for this long "
                             f"(default {DEFAULT_IDLE_TIMEOUT:g})")
    parser.add_argument("--concurrency", "--nnrp-concurrency", dest="concurrency",
                        type=_count, default=1, metavar="N",
                        help="run the selected recipes N at a time on the same session, each "
                             "judged as usual plus the rules of operations in flight together "
                             "(default 1: one after another)")
    parser.add_argument("--max-failures", dest="max_failures", type=_positive_count, metavar="N",
                        help="stop the run after N failed cases; the cases not run are "
                             "recorded as skipped and the run fails (default: run every case)")
    parser.add_argument("--strict", "--nnrp-strict", dest="strict", action="store_true",
                        help="fail on non-strict findings too (recommendations not followed)")
    parser.add_argument("--report", "--nnrp-report", dest="report", type=Path, metavar="PATH",
                        help="write PATH.md and PATH.html (or the .md/.html pair named by PATH)")
    parser.add_argument("--report-ndjson", "--nnrp-report-ndjson", dest="report_ndjson",
                        type=Path, metavar="PATH",
                        help="write the run's event stream, one JSON object per event, to PATH")
    parser.add_argument("--baseline", "--nnrp-baseline", dest="baseline", type=Path,
                        metavar="FILE",
                        help="accepted failures (recipe, rule, reason, expiry): a matched "
                             "failure reads 'waived' and does not fail the run")
    parser.add_argument("--baseline-update", "--nnrp-baseline-update", dest="baseline_update",
                        action="store_true",
                        help="rewrite the --baseline file from this run's failures")
    parser.add_argument("--http-twin", "--nnrp-http-twin", dest="http_twin", metavar="URL",
                        help="also send every request body to the provider's own "
                             "OpenAI-compatible HTTP API at URL and show each difference of "
                             "the two answers (non-strict; docs/twin.md)")
    parser.add_argument("--trace", "--nnrp-trace", dest="trace", type=Path, metavar="DIR",
                        help="write each case's frames (sent and received) as NDJSON into "
                             "DIR/CASE_ID.ndjson")
    parser.add_argument("--generate", "--nnrp-generate", dest="generate", type=_natural,
                        default=0, metavar="N",
                        help="also run N generated requests (valid, invalid and sequences on "
                             "one session; docs/generation.md)")
    parser.add_argument("--seed", "--nnrp-seed", dest="seed", type=_natural, metavar="S",
                        help="the seed of the generated requests (default: a random one, "
                             "printed; the same seed draws the same requests)")
    parser.add_argument("--generate-save", "--nnrp-generate-save", dest="generate_save",
                        type=Path, metavar="DIR",
                        help="save each shrunk failed or non-strict generated case as a recipe "
                             "file in DIR (default: generated-recipes/ beside the case results)")


def _absolute(path: Path | None, base: Path) -> Path | None:
    return None if path is None else path if path.is_absolute() else base / path


def options_from_args(args: argparse.Namespace) -> RunOptions:
    """Raises SetupError for values argparse cannot check (KEY=VALUE)."""
    base = Path.cwd()
    if getattr(args, "baseline_update", False) and getattr(args, "baseline", None) is None:
        raise SetupError("--baseline-update needs --baseline FILE (the file to write)")
    target = args.target
    if isinstance(target, list):  # run's repeatable --target: a fleet run sets each in turn
        target = target[0]
    model, models = parse_model_options(args.model, option="--model")
    return RunOptions(
        target=target,
        manifest=args.manifest,
        recipes=tuple(args.recipes) if args.recipes else None,
        model=model,
        models=models,
        params=parse_params(args.params, option="--param"),
        extensions=tuple(args.extensions),
        level=args.level,
        timeout=getattr(args, "timeout", DEFAULT_TIMEOUT),
        idle_timeout=getattr(args, "idle_timeout", DEFAULT_IDLE_TIMEOUT),
        concurrency=getattr(args, "concurrency", 1),
        max_failures=getattr(args, "max_failures", None),
        connect_timeout=args.connect_timeout,
        api_key=getattr(args, "api_key", None),
        tls_ca=_absolute(getattr(args, "tls_ca", None), base),
        tls_server_name=getattr(args, "tls_server_name", None),
        strict=getattr(args, "strict", False),
        capabilities_file=args.capabilities,
        results=args.results,
        plan=args.plan,
        report=getattr(args, "report", None),
        trace_dir=_absolute(getattr(args, "trace", None), base),
        report_ndjson=getattr(args, "report_ndjson", None),
        baseline=_absolute(getattr(args, "baseline", None), base),
        baseline_update=bool(getattr(args, "baseline_update", False)),
        http_twin=getattr(args, "http_twin", None),
        generate=getattr(args, "generate", 0),
        seed=getattr(args, "seed", None),
        generate_save=_absolute(getattr(args, "generate_save", None), base),
        base_dir=base,
    )


def error(exc: SetupError) -> None:
    print(f"nnrp-conformance: error: {exc}", file=sys.stderr)
