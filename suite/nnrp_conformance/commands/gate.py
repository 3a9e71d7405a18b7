"""``nnrp-conformance gate``: judge the recorded release evidence (see ``nnrp_conformance.gate``).

Prints the five conditions (rich) and exits 0 only when all five hold on every line the
release policy declares; 1 names each failing condition and why (each failure naming its
line); 2 is an unusable input (evidence directory, release policy). The policy's lines are
data: there is no per-field override (the single-line ``--declared-line``, ``--lower-bound``
and ``--current-line`` went with format 1); a trial run writes a policy and passes
``--policy FILE``. It only checks:
the release-gate report (JSON, Markdown, HTML) is written when ``--out DIR`` asks for it, so
checking recorded evidence never rewrites the tracked files it was asked to check.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from nnrp_conformance import contract
from nnrp_conformance.gate import (
    EvidenceError,
    GateResult,
    RequirementsError,
    resolve_policy,
    run_gate,
)
from nnrp_conformance.gate.evidence import DEFAULT_EVIDENCE_DIR, POLICY_FILE
from nnrp_conformance.reports.gate_files import write_reports
from nnrp_conformance.validation import SchemaViolationError

NAME = "gate"
HELP = "check the release gate on recorded evidence (--out DIR writes the release-gate report)"

EXIT_OK, EXIT_FAILED, EXIT_USAGE = contract.EXIT_OK, contract.EXIT_FAILED, contract.EXIT_USAGE


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--evidence", type=Path, default=DEFAULT_EVIDENCE_DIR, metavar="DIR",
                        help="the recorded evidence directory (default "
                             f"./{DEFAULT_EVIDENCE_DIR}; layout: see `pydoc "
                             "nnrp_conformance.gate`)")
    parser.add_argument("--readme", type=Path, default=Path("README.md"), metavar="FILE",
                        help="the README to check (default ./README.md)")
    parser.add_argument("--manifest", type=Path, default=None, metavar="FILE",
                        help="adapter manifest (default DIR/manifest.json)")
    parser.add_argument("--recipes", type=Path, default=None, metavar="PATH",
                        help="recipe file or directory (default: the bundled recipes)")
    parser.add_argument("--out", type=Path, default=None, metavar="DIR",
                        help="write the release-gate report (JSON, Markdown, HTML) into DIR; "
                             "without it the gate only checks and writes nothing")
    parser.add_argument("--policy", type=Path, default=None, metavar="FILE",
                        help=f"the provider's release policy (default DIR/{POLICY_FILE}; "
                             "schema release-policy): serving target, version lines (each "
                             "with its lower bound, current line and levels), benchmarks, "
                             "README extras; a trial run with other lines passes its own file")


def print_result(console: Console, result: GateResult, paths: dict[str, Path]) -> None:
    table = Table(title="release gate", title_justify="left", show_lines=True)
    table.add_column("condition", no_wrap=True)
    table.add_column("verdict", no_wrap=True)
    table.add_column("reason / evidence", overflow="fold")
    for v in result.verdicts:
        verdict = Text("PASS", style="bold green") if v.passed else Text("FAIL", style="bold red")
        body = Text()
        if v.passed:
            body.append(v.reason)
        else:
            for i, failure in enumerate(v.failures):
                body.append(("\n" if i else "") + "• " + failure, style="red")
        if v.evidence:
            body.append("\n" + "\n".join(v.evidence), style="dim")
        table.add_row(v.name, verdict, body)
    console.print(table)
    for kind, path in paths.items():
        console.print(f"[dim]{kind}:[/dim] {path}")
    if result.passed:
        console.print("[bold green]release gate passed: all five conditions hold[/bold green]")
    else:
        names = ", ".join(v.name for v in result.failed)
        console.print(f"[bold red]release gate FAILED[/bold red] ({len(result.failed)} of 5): "
                      f"{names}")
        for v in result.failed:
            console.print(f"  [red]{v.name}[/red]: {escape(v.reason)}")


def main(args: argparse.Namespace) -> int:
    console = Console(highlight=False)
    err = Console(stderr=True, highlight=False)
    try:
        requirements = resolve_policy(args.evidence, args.policy)
        result = run_gate(args.evidence, readme=args.readme, manifest=args.manifest,
                          recipes=args.recipes, requirements=requirements,
                          report_dir=args.out or args.evidence)
    except (EvidenceError, RequirementsError) as exc:
        err.print(f"nnrp-conformance gate: error: {exc}", markup=False, soft_wrap=True)
        return EXIT_USAGE
    except SchemaViolationError as exc:  # our own report broke its schema: a bug, said plainly
        err.print(f"nnrp-conformance gate: internal error, report not written:\n{exc}",
                  markup=False, soft_wrap=True)
        return EXIT_USAGE
    paths: dict[str, Path] = {}
    if args.out is not None:
        try:
            paths = write_reports(result, args.out)
        except OSError as exc:
            err.print(f"nnrp-conformance gate: error: cannot write the reports: {exc}",
                      markup=False, soft_wrap=True)
            return EXIT_USAGE
    print_result(console, result, paths)
    if args.out is None:
        console.print("[dim]reports not written (--out DIR writes them)[/dim]")
    return EXIT_OK if result.passed else EXIT_FAILED


def add_parser(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
) -> argparse.ArgumentParser:
    """Register ``gate`` on an argparse subparsers object (for callers not using the cli scan)."""
    parser = subparsers.add_parser(NAME, help=HELP, description=HELP)
    add_arguments(parser)
    parser.set_defaults(_command=__import__(__name__, fromlist=["main"]))
    return parser


run = main
