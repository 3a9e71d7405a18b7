"""The ``vllm-nnrp`` command: ``serve``, ``probe``, ``conformance``, ``manifest``, ``bench`` and
``tiny-model``.

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
from collections.abc import Callable, Sequence
from pathlib import Path

from . import __version__
from .benchmark import BENCHMARKS
from .benchmark import main as bench_main
from .conformance.conformance import main as conformance_main
from .conformance.conformance import manifest_for_vllm
from .conformance.twin import TWIN_FLAG
from .conformance.twin import main as twin_main
from .launch.logs import ADAPTER_LOGGER
from .launch.probe import command as probe_command
from .launch.scaleout import explicit_path_problem
from .launch.security import TlsError, from_vllm_argv, serving_problem
from .launch.serve import run_serve
from .launch.settings import add_serve_flags, config_from_flags, model_argument, model_path_problem
from .profile.policy import LINES, SUPPORTED_VLLM
from .release import main as release_main
from .tiny_model import build_tiny_model
from .vllm_backend import UnsupportedVllmVersion, check_version_supported, detect_vllm_version

log = logging.getLogger("vllm_nnrp_adapter")


def _serve_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="vllm-nnrp serve",
        description="Serve a model with vLLM over NNRP. Arguments other than --nnrp-* are "
        "vLLM's own `vllm serve` arguments, passed through unchanged.",
        add_help=False,
    )
    add_serve_flags(p)  # one table: settings.SETTINGS (the plugin reads the same)
    return p


def cmd_serve(argv: Sequence[str]) -> int:
    if any(a in ("-h", "--help") for a in argv):
        _serve_parser().print_help()
        print("\nvLLM arguments: see `python -m vllm.entrypoints.openai.api_server --help`.")
        return 0
    opts, vllm_argv = _serve_parser().parse_known_args(list(argv))
    if vllm_argv and not vllm_argv[0].startswith("-"):
        # `vllm serve MODEL ...` takes the model as a positional; vLLM's parser wants --model.
        vllm_argv = ["--model", vllm_argv[0], *vllm_argv[1:]]
    level = (opts.log_level or os.environ.get("VLLM_NNRP_LOG_LEVEL", "INFO")).upper()
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # the root logger's handler drops INFO once vLLM is imported: our lines get their own
    # route at this level (logs.py; serving joins vLLM's handlers when the engine is up)
    logging.getLogger(ADAPTER_LOGGER).setLevel(level)
    model = model_argument(vllm_argv)
    problem = model_path_problem(model) if model is not None else None
    problem = problem or explicit_path_problem(vllm_argv)
    config = config_from_flags(opts, vllm_argv)
    if problem is None:
        # the safe default, said before the engine starts (serving checks it again, from
        # vLLM's parsed arguments: security.py)
        try:
            problem = serving_problem(
                [config.listen, config.also_listen], from_vllm_argv(vllm_argv, os.environ),
                config.allow_insecure)
        except TlsError as exc:
            problem = str(exc)
    if problem is not None:  # said before vLLM is imported or the engine starts
        print(f"vllm-nnrp serve: error: {problem}", file=sys.stderr)
        return 2
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
    if TWIN_FLAG in argv:  # inside vllm serve, vLLM's HTTP API as the twin (twin.py)
        return twin_main([a for a in argv if a != TWIN_FLAG])
    return conformance_main(list(argv))


def cmd_manifest(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(
        prog="vllm-nnrp manifest",
        description="Print the capability manifest a suite run against a deployment of this "
        "adapter uses: what the adapter claims on that vLLM version, with or without an "
        "embeddings engine (`nnrp-conformance run --manifest FILE`).",
    )
    p.add_argument("--vllm-version", metavar="VERSION",
                   help="the vLLM the deployment runs (default: the one installed here)")
    p.add_argument("--embeddings", action="store_true",
                   help="the deployment runs an embeddings engine (`vllm-nnrp serve "
                   "--nnrp-embeddings-engine`); without one, embeddings.create is not claimed, "
                   "as under `vllm serve` with the plugin")
    p.add_argument("--out", type=Path, metavar="FILE", help="write it to FILE, not to stdout")
    args = p.parse_args(list(argv))
    version = args.vllm_version or detect_vllm_version()
    if version is None:
        p.error("no vLLM is installed here: give --vllm-version, the version the deployment runs")
    try:
        check_version_supported(version)
    except UnsupportedVllmVersion:
        p.error(f"vLLM {version} is outside the supported line {SUPPORTED_VLLM}: the adapter "
                "claims nothing there")
    text = manifest_for_vllm(version, embeddings=args.embeddings).read_text(encoding="utf-8")
    if args.out is None:
        sys.stdout.write(text)
        return 0
    try:
        args.out.write_text(text, encoding="utf-8")
    except OSError as exc:
        p.error(f"cannot write {args.out}: {exc.strerror or exc}")
    print(f"wrote {args.out} (vLLM {version}, "
          f"{'with' if args.embeddings else 'without'} an embeddings engine)", file=sys.stderr)
    return 0


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
                "lines": [{"declared": line.declared, "lower_bound_tested": line.lower_bound,
                           "current_line_tested": line.current_tested} for line in LINES],
            },
            indent=2,
        )
    )
    return 0


#: name -> (the command's function: arguments -> exit status, its line in --help)
COMMANDS: dict[str, tuple[Callable[[Sequence[str]], int], str]] = {
    "serve": (cmd_serve, "serve a model with vLLM over NNRP"),
    "probe": (probe_command, "health probe: is an NNRP endpoint serving its capability document?"),
    "conformance": (cmd_conformance, "start the adapter on the embedded default and run the suite"),
    "manifest": (cmd_manifest, "print the manifest a suite run against a deployment uses"),
    "release": (cmd_release, "the whole release run: suite, benchmarks, release gate"),
    # the names from the one registry `vllm-nnrp bench` dispatches on, never a copy of them
    "bench": (cmd_bench, f"benchmarks ({', '.join(BENCHMARKS)})"),
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
