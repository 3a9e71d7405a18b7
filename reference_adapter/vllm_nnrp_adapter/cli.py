"""The ``vllm-nnrp`` command: ``serve``, ``conformance``, ``bench`` and ``tiny-model``.

``serve`` is the explicit start-up path: every argument that is not one of ours (all of
ours start with ``--nnrp-``) goes unchanged to vLLM's own ``vllm serve`` parser, so every
engine flag works as it does there.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from . import CURRENT_LINE_TESTED, LOWER_BOUND_TESTED, SUPPORTED_VLLM, __version__
from .benchmark import main as bench_main
from .conformance import main as conformance_main
from .release import main as release_main
from .serve import run_serve
from .settings import ServeConfig, default_manifest_path
from .tiny_model import build_tiny_model
from .vllm_backend import detect_vllm_version

log = logging.getLogger("vllm_nnrp_adapter")

def _serve_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="vllm-nnrp serve",
        description="Serve a model with vLLM over NNRP. Arguments other than --nnrp-* are "
        "vLLM's own `vllm serve` arguments, passed through unchanged.",
        add_help=False,
    )
    p.add_argument(
        "--nnrp-listen",
        default="127.0.0.1:4433",
        help="listen address: host:port (TCP) or a scheme URL (default %(default)s)",
    )
    p.add_argument(
        "--nnrp-manifest",
        type=Path,
        default=None,
        help="adapter capability manifest (default: the packaged one)",
    )
    p.add_argument("--nnrp-max-envelope-bytes", type=int, default=None)
    p.add_argument(
        "--nnrp-max-in-flight",
        type=int,
        default=None,
        help="per-connection limit on operations in flight",
    )
    p.add_argument(
        "--nnrp-busy-poll-budget",
        type=_polls_per_s,
        default=None,
        metavar="POLLS_PER_S",
        help="polls a second shared by the sessions with work in flight; beyond it each polls "
        "less often (default 1000; 0: no budget)",
    )
    p.add_argument(
        "--nnrp-allow-request-field",
        action="append",
        default=[],
        metavar="FIELD",
        help="accept an operator-only body field (e.g. chat_template)",
    )
    p.add_argument(
        "--nnrp-echo-text-in-diagnostics",
        action="store_true",
        help="allow prompt/completion text in diagnostics (off by default)",
    )
    p.add_argument(
        "--nnrp-backend-stall-timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="fail an operation whose backend gives no output for this long (default 300)",
    )
    p.add_argument(
        "--nnrp-metrics-port",
        type=int,
        default=None,
        help="serve Prometheus /metrics on 127.0.0.1:PORT (off by default)",
    )
    p.add_argument(
        "--nnrp-allow-unsupported-vllm",
        action="store_true",
        help=f"run on a vLLM outside {SUPPORTED_VLLM} (canary runs)",
    )
    p.add_argument(
        "--nnrp-ready-file",
        type=Path,
        default=None,
        help="write {'address': ...} as JSON here once serving",
    )
    p.add_argument("--nnrp-log-level", default=os.environ.get("VLLM_NNRP_LOG_LEVEL", "INFO"))
    return p


def _polls_per_s(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        number = -1.0
    if not number >= 0:
        raise argparse.ArgumentTypeError(f"{value!r} is not 0 or a positive number of polls")
    return number


def cmd_serve(argv: Sequence[str]) -> int:
    if any(a in ("-h", "--help") for a in argv):
        _serve_parser().print_help()
        print("\nvLLM arguments: see `python -m vllm.entrypoints.openai.api_server --help`.")
        return 0
    opts, vllm_argv = _serve_parser().parse_known_args(list(argv))
    if vllm_argv and not vllm_argv[0].startswith("-"):
        # `vllm serve MODEL ...` takes the model as a positional; vLLM's parser wants --model.
        vllm_argv = ["--model", vllm_argv[0], *vllm_argv[1:]]
    logging.basicConfig(
        level=opts.nnrp_log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )

    config = ServeConfig(
        vllm_argv=vllm_argv,
        listen=opts.nnrp_listen,
        manifest_path=opts.nnrp_manifest or default_manifest_path(),
        max_envelope_bytes=opts.nnrp_max_envelope_bytes,
        max_in_flight=opts.nnrp_max_in_flight,
        busy_poll_budget=opts.nnrp_busy_poll_budget,
        allowed_request_fields=tuple(opts.nnrp_allow_request_field),
        echo_text_in_diagnostics=opts.nnrp_echo_text_in_diagnostics,
        metrics_port=opts.nnrp_metrics_port,
        backend_stall_timeout_s=opts.nnrp_backend_stall_timeout,
        allow_unsupported_vllm=opts.nnrp_allow_unsupported_vllm,
        ready_file=opts.nnrp_ready_file,
    )
    return run_serve(config)


def cmd_tiny_model(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(
        prog="vllm-nnrp tiny-model", description="Create the tiny random-weight test model locally."
    )
    p.add_argument("dest", type=Path)
    args = p.parse_args(argv)
    print(build_tiny_model(args.dest))
    return 0


def cmd_conformance(argv: Sequence[str]) -> int:
    return conformance_main(list(argv))


def cmd_release(argv: Sequence[str]) -> int:
    return release_main(list(argv))


def cmd_bench(argv: Sequence[str]) -> int:
    return bench_main(list(argv))


def cmd_version(_argv: Sequence[str]) -> int:
    print(
        json.dumps(
            {
                "vllm_nnrp_adapter": __version__,
                "vllm": detect_vllm_version(),
                "supported_vllm": SUPPORTED_VLLM,
                "lower_bound_tested": LOWER_BOUND_TESTED,
                "current_line_tested": CURRENT_LINE_TESTED,
            },
            indent=2,
        )
    )
    return 0


COMMANDS: dict[str, Any] = {
    "serve": (cmd_serve, "serve a model with vLLM over NNRP"),
    "conformance": (cmd_conformance, "start the adapter on the embedded default and run the suite"),
    "release": (cmd_release, "the whole release run: suite, benchmarks, release gate"),
    "bench": (cmd_bench, "benchmarks (wire, mapper, latency, cancel, smoke, parity)"),
    "tiny-model": (cmd_tiny_model, "create the tiny local test model"),
    "version": (cmd_version, "print versions and the supported vLLM line"),
}


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print("usage: vllm-nnrp COMMAND [ARGS...]\n\ncommands:")
        for name, (_, doc) in COMMANDS.items():
            print(f"  {name:<12} {doc}")
        return 0 if args else 2
    name, rest = args[0], args[1:]
    if name not in COMMANDS:
        print(f"vllm-nnrp: unknown command {name!r} (try --help)", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        return COMMANDS[name][0](rest)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
