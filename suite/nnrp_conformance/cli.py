"""The ``nnrp-conformance`` console script: argparse subcommands, one module per command.

Each module in :mod:`nnrp_conformance.commands` (not starting with ``_``) is a subcommand
when it defines ``NAME``, ``HELP``, ``add_arguments(parser)`` and ``main(args) -> int``;
new commands (``gate``, ``init``) are added by dropping a module there.

Exit codes: 0 success, 1 a selected recipe failed, 2 usage or input error (bad option,
manifest, recipe, parameter; the message names the file and field), 3 the target cannot be
reached or gives no usable capability document, 130 interrupted.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Sequence
from types import ModuleType

from nnrp_conformance import __version__, commands, contract

__all__ = ["build_parser", "command_modules", "main"]

# the exit statuses are the contract's (CI scripts read them); kept here as names too
EXIT_OK = contract.EXIT_OK
EXIT_FAILED = contract.EXIT_FAILED
EXIT_USAGE = contract.EXIT_USAGE
EXIT_TARGET = contract.EXIT_TARGET
EXIT_INTERRUPTED = contract.EXIT_INTERRUPTED


def command_modules() -> list[ModuleType]:
    found = []
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{commands.__name__}.{info.name}")
        if all(hasattr(module, a) for a in ("NAME", "HELP", "add_arguments", "main")):
            found.append(module)
    return found


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nnrp-conformance",
        description="Conformance suite for the NNRP openai-compatible/1 API profile.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in command_modules():
        p = sub.add_parser(module.NAME, help=module.HELP, description=module.HELP)
        module.add_arguments(p)
        p.set_defaults(_command=module)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    for stream in (sys.stdout, sys.stderr):
        # what an endpoint sent is printed as received, a lone surrogate as its escape
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")
    try:
        return int(args._command.main(args))
    except KeyboardInterrupt:
        print("nnrp-conformance: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
