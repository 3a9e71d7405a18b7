"""``vllm-nnrp bench adapter-ab``: this adapter against an earlier checkout of it, same engine.

Owns the regression check behind "the chat path did not get slower": the adapter code in
``--baseline DIR`` (a checkout of an earlier commit, e.g. ``git worktree add DIR REV``) and the
adapter of this installation each serve the tiny model with the same engine flags, both up
for the whole run; every round runs each workload (the parity benchmark's prompts and
requests, :mod:`.parity_run`) on both back to back, the first alternating (ABAB), and reads
each serving process's and engine's CPU around its own measurement, with the client's CPU
apart. Ratios are taken round by round (this/baseline), so a machine that drifts during the
run moves both sides of each ratio; the table shows their median and spread, and the load
average of the rounds.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from statistics import median
from typing import Any

import anyio

from nnrp_conformance.client import NnrpClientError
from vllm_nnrp_adapter.launch.adapter_process import AdapterProcess
from vllm_nnrp_adapter.launch.embedded import (
    EMBEDDED_ENGINE_ARGS,
    TINY_MODEL_NAME,
    ConformanceSetupError,
    tiny_model,
    vllm_python,
)
from vllm_nnrp_adapter.profile.policy import NEWEST_TESTED

from ..lib.streams import PROMPT, load_average
from .facts import MAX_TOKENS, Workload
from .report import summarise
from .run import FULL, QUICK, LeanPath, Plan, RoundResult, long_prompt, one_round

BASE, HEAD = "baseline", "this"

#: the figures compared, as (name, summary field, how one round's value is read)
_FIGURES = (
    ("aggregate tokens/s", "aggregate_tokens_per_s"),
    ("TTFT p50 ms", "ttft_p50_by_round"),
    ("serving CPU s/1k tok", "serving_cpu_s_per_1k_tokens"),
    ("engine CPU s/1k tok", "engine_cpu_s_per_1k_tokens"),
)


def baseline_env(checkout: Path) -> dict[str, str]:
    """The environment that makes the adapter process import the code in ``checkout``."""
    parts = [checkout / "reference_adapter", checkout / "suite"]
    missing = [str(p) for p in parts if not (p.is_dir())]
    if missing:
        raise ValueError(f"--baseline {checkout}: not a checkout of this project "
                         f"(missing {', '.join(missing)})")
    return {"PYTHONPATH": ":".join(str(p) for p in parts)}


def order(r: int) -> tuple[str, str]:
    """Round ``r``'s order: alternating, so neither side always goes first."""
    return (BASE, HEAD) if r % 2 == 0 else (HEAD, BASE)


async def measure(paths: Mapping[str, LeanPath], pids: Mapping[str, int | None],
                  prompts: Mapping[str, str], plan: Plan, concurrency: Sequence[int],
                  ) -> dict[Workload, list[RoundResult]]:
    """Every workload on both adapters, round after round, the first alternating."""
    for name, path in paths.items():
        await path.open()
        for content in prompts.values():  # the first requests pay vLLM's start-up costs
            for w in range(plan.warmup):
                await path.one(content)(w)
        print(f"    {name} warmed up", flush=True)
    out: dict[Workload, list[RoundResult]] = {}
    for r in range(plan.rounds):
        t0 = time.monotonic()
        for prompt, content in prompts.items():
            for c in concurrency:
                for name in order(r):
                    other = BASE if name == HEAD else HEAD
                    out.setdefault((prompt, c), []).append(await one_round(
                        name, r, paths[name].one(content), plan.requests[c], c,
                        pids.get(name), pids.get(other)))
        print(f"    round {r + 1}/{plan.rounds} ({' then '.join(order(r))}) in "
              f"{time.monotonic() - t0:.1f} s, load {load_average()}", flush=True)
    for path in paths.values():
        await path.close()
    return out


def compare(measured: Mapping[Workload, Sequence[RoundResult]]) -> list[dict[str, Any]]:
    """Per workload and figure: each side's median over rounds, and the per-round ratios."""
    rows = []
    for (prompt, c), results in measured.items():
        side = {name: summarise([rr for rr in results if rr.path == name]) for name in (BASE, HEAD)}
        for label, field in _FIGURES:
            base, head = side[BASE][field], side[HEAD][field]
            ratios = [h / b for b, h in zip(base, head, strict=False) if b]
            rows.append({
                "workload": f"{prompt} c{c}", "figure": label,
                "baseline_median": median(base) if base else None,
                "this_median": median(head) if head else None,
                "ratio_median": median(ratios) if ratios else None,
                "ratio_min": min(ratios) if ratios else None,
                "ratio_max": max(ratios) if ratios else None,
                "rounds": len(ratios),
                "errors": side[BASE]["errors"] + side[HEAD]["errors"],
            })
    return rows


def table(rows: Sequence[Mapping[str, Any]]) -> str:
    def f(v: Any, digits: int = 3) -> str:
        return "-" if v is None else f"{v:.{digits}g}" if isinstance(v, float) else str(v)

    lines = [f"{'workload':<10} {'figure':<22} {'baseline':>10} {'this':>10} "
             f"{'this/base':>10} {'spread':>16} {'errors':>6}"]
    for r in rows:
        lines.append(f"{r['workload']:<10} {r['figure']:<22} {f(r['baseline_median'], 4):>10} "
                     f"{f(r['this_median'], 4):>10} {f(r['ratio_median']):>10} "
                     f"{f(r['ratio_min']) + '-' + f(r['ratio_max']):>16} {r['errors']:>6}")
    return "\n".join(lines)


def main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(
        prog="vllm-nnrp bench adapter-ab",
        description="This adapter against the adapter in an earlier checkout, same engine "
        "flags and model, interleaved rounds (ABAB), ratios per round.")
    p.add_argument("--baseline", type=Path, required=True,
                   help="a checkout of the earlier adapter (git worktree add DIR REV)")
    p.add_argument("--vllm-version", default=None, help="cached vLLM venv (default current line)")
    p.add_argument("--quick", action="store_true", help="fewer samples (a few minutes)")
    p.add_argument("--rounds", type=int, default=None, help="override the plan's rounds")
    p.add_argument("--concurrency", default="1,8", help="comma-separated (default 1,8)")
    p.add_argument("--json", type=Path, default=None, help="write the rows here")
    args = p.parse_args(list(argv))
    try:
        concurrency = [int(c) for c in args.concurrency.split(",")]
        env = baseline_env(args.baseline.resolve())
    except ValueError as exc:
        p.error(str(exc))
    plan = QUICK if args.quick else FULL
    if args.rounds:
        plan = Plan(args.rounds, plan.requests, plan.warmup)
    if any(c not in plan.requests for c in concurrency):
        p.error(f"--concurrency: each must be one of {sorted(plan.requests)}")
    version = args.vllm_version or NEWEST_TESTED
    max_len = int(EMBEDDED_ENGINE_ARGS[EMBEDDED_ENGINE_ARGS.index("--max-model-len") + 1])
    try:
        python = vllm_python(version, build=False)
        model_dir = tiny_model(python)
        long_text, _tokens = long_prompt(python, model_dir, max_len - MAX_TOKENS - 8)
        prompts = {"short": PROMPT, "long": long_text}
        print(f"==> vLLM {version}: baseline {args.baseline} against this adapter; load "
              f"{load_average()}", flush=True)
        with (AdapterProcess(python, model_dir, extra_env=env) as base,
              AdapterProcess(python, model_dir) as head):
            # the lean client: the suite's recording client would take CPU from both
            paths = {BASE: LeanPath(base.address, TINY_MODEL_NAME, 1),
                     HEAD: LeanPath(head.address, TINY_MODEL_NAME, 1)}
            measured = anyio.run(measure, paths, {BASE: base.pid, HEAD: head.pid}, prompts,
                                 plan, concurrency)
    except (ConformanceSetupError, NnrpClientError, OSError, RuntimeError,
            subprocess.SubprocessError) as exc:
        print(f"vllm-nnrp bench adapter-ab: {exc}", file=sys.stderr)
        return 2
    rows = compare(measured)
    print(table(rows))
    print(f"  load average at the end: {load_average()}")
    if args.json:
        args.json.write_text(json.dumps({"vllm_version": version, "rounds": plan.rounds,
                                         "rows": rows}, indent=2) + "\n", encoding="utf-8")
        print(f"  wrote {args.json}")
    return 0
