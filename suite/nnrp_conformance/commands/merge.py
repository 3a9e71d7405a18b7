"""``nnrp-conformance merge``: several runs' case results as one report (``merge.py``).

Prints one table, a column per run (named by target and transport from each run's metadata)
and a row per recipe, then the disagreements; ``--report PATH`` also writes PATH.md and
PATH.html. Exit 0 when no run has a failed case, 1 when one has, 2 for an unusable file.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from nnrp_conformance import contract
from nnrp_conformance.merge import MergeError, merge_runs
from nnrp_conformance.reports.merged import print_merged, write_merged_reports

NAME = "merge"
HELP = "merge several runs' case results (replicas, transports, versions) into one report"

def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("results", nargs="+", type=Path, metavar="CASE_RESULTS",
                        help="case-results JSON files of the runs to merge (two or more)")
    parser.add_argument("--report", type=Path, metavar="PATH",
                        help="write PATH.md and PATH.html (or the pair named by PATH)")


def main(args: argparse.Namespace) -> int:
    console = Console(highlight=False)
    err = Console(stderr=True, highlight=False)
    try:
        merged = merge_runs(args.results)
    except MergeError as exc:
        err.print(f"nnrp-conformance merge: error: {exc}", markup=False, soft_wrap=True)
        return contract.EXIT_USAGE
    print_merged(console, merged)
    if args.report is not None:
        try:
            for path in write_merged_reports(merged, args.report):
                console.print(f"wrote {path}", markup=False)
        except OSError as exc:
            err.print(f"nnrp-conformance merge: error: cannot write the report: {exc}",
                      markup=False)
            return contract.EXIT_USAGE
    return merged.exit_code


