"""``nnrp-conformance plan``: write the execution plan without running any case.

With ``--target`` the capability document is fetched (it supplies the default model); without
one, ``--capabilities FILE`` can supply it, else ``${MODEL_ID}`` keeps the recipes' own values
unless ``--model`` is given.
"""

from __future__ import annotations

import argparse

from rich.console import Console
from rich.table import Table

from nnrp_conformance import contract
from nnrp_conformance.commands._options import add_plan_options, error, options_from_args
from nnrp_conformance.session import (
    ConformanceCore,
    SetupError,
    TargetError,
    load_json_object,
)

NAME = "plan"
HELP = "write the execution plan (which recipes run, with which request) without running it"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_plan_options(parser, target_required=False)


def main(args: argparse.Namespace) -> int:
    console = Console(highlight=False)
    try:
        options = options_from_args(args)
    except SetupError as exc:
        error(exc)
        return contract.EXIT_USAGE
    core = ConformanceCore(options)
    try:
        caps = None if args.capabilities is None else load_json_object(args.capabilities)
        plan = core.prepare(caps)
        if core.capabilities_error:
            console.print(f"warning: {core.capabilities_error}", markup=False)
        path = core.options.artifacts().plan
    except TargetError as exc:
        error(exc)
        return contract.EXIT_TARGET
    except SetupError as exc:
        error(exc)
        return contract.EXIT_USAGE
    finally:
        core.close()
    table = Table(title=f"execution plan: {plan.adapter}", title_justify="left")
    for col in ("recipe", "selection", "status", "level", "operation", "reason"):
        table.add_column(col, overflow="fold")
    for case in plan.cases:
        table.add_row(case.id, case.selection, case.status, str(case.level), case.operation,
                      case.reason or "")
    console.print(table)
    console.print(f"{len(plan.selected())} of {len(plan.cases)} recipes selected; "
                  f"wrote {path}", markup=False)
    return contract.EXIT_OK
