"""``vllm-nnrp release``: the whole release run, writing the evidence tree the gate reads.
May import: `profile`, `vllm_backend`, `launch`, `conformance`, `benchmark`.

For the lower bound and the current line: the adapter on real vLLM CPU with the tiny local
model, the full conformance suite against it (as a provider runs it, in its own process,
with the claims the adapter keeps on that line: ``conformance.manifest_for_vllm``, recorded
as the version's ``manifest.json`` when they are fewer than the adapter's),
the real-vLLM benchmarks (streaming and cancellation latency, e2e smoke) and the suite again
inside ``vllm serve`` with vLLM's own HTTP API as its twin (``twin/``: :mod:`..conformance.twin`); the
order is :mod:`.versions`'. The vLLM environments are built in the background meanwhile, and
each version's run starts as soon as its own environment is ready (:mod:`.builds`); each step
is shown and recorded by :mod:`.steps`. Once every build is done: on the
current lines the HTTP/SSE parity benchmark, then the version-independent benchmarks (wire,
mapper, soak, load) and ``nnrp-conformance gate`` over all of it. The layout is the gate's
(``nnrp_conformance.gate`` docstring). ``--quick`` runs the short benchmarks (the README's
main job); without it the full ones (``scripts/regenerate-evidence`` → ``reports/evidence``).
Every file of the folder is this run's: what an earlier run wrote there goes first, and the
run records itself (:mod:`.record`: its id, commit, start, end and cost) and says at its end
where the folder is not one run.
"""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from nnrp_conformance.gate.evidence import MANIFEST_FILE, POLICY_FILE

from ..benchmark.lib.results import BENCH_LOAD, BENCH_SOAK
from ..launch.embedded import REPO_ROOT
from ..launch.settings import default_manifest_path
from ..profile.policy import CURRENT_TESTED, TESTED_VERSIONS, policy_path
from .builds import BackgroundBuild, environment_facts
from .record import RunRecord, clear_earlier_run, one_run_problems
from .steps import Step, console
from .versions import bench, run_parity, run_versions, suite_adapter_log

__all__ = ["main", "suite_adapter_log"]

#: the long-by-count runs of the soak benchmark: (name, title, sessions, (operations, warm-up)
#: of the full run, the same of ``--quick``)
LONG_RUNS = (
    (BENCH_SOAK, "soak: resident memory flat", 4, (10_000, 1_000), (2_000, 500)),
    (BENCH_LOAD, "load: every event of every operation", 64, (64_000, 1_000), (6_400, 500)),
)


def main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(
        prog="vllm-nnrp release",
        description="The whole release run on the embedded default; writes the evidence and "
        "the release-gate report.",
    )
    p.add_argument("--out", type=Path, default=Path("artifacts/release"))
    # every declared line's lower bound and current line (the release policy's)
    p.add_argument("--versions", default=",".join(TESTED_VERSIONS))
    p.add_argument("--quick", action="store_true", help="short benchmarks (the main job)")
    p.add_argument("--no-parity", action="store_true", help="skip the HTTP/SSE parity run")
    args = p.parse_args(list(argv))
    started = time.monotonic()
    out = args.out.resolve()
    versions = [v.strip() for v in args.versions.split(",") if v.strip()]
    # before the builds start: whether the run starts cold is part of its record
    record = RunRecord(command=list(argv), quick=args.quick, versions=versions)
    clear_earlier_run(out)  # evidence is regenerated whole
    out.mkdir(parents=True, exist_ok=True)
    log: list[dict[str, Any]] = []
    step = Step(log)
    shutil.copyfile(default_manifest_path(), out / MANIFEST_FILE)
    # the gate judges the evidence against the policy it was recorded for
    shutil.copyfile(policy_path(), out / POLICY_FILE)
    # every environment side by side in the background (BackgroundBuild); each version's run
    # starts once its own is ready, in the order they become ready
    builder = REPO_ROOT / "scripts" / "vllm-venv"
    building: BackgroundBuild | None = None
    if builder.is_file() and not os.environ.get("VLLM_NNRP_PYTHON"):
        console.print(f"==> vLLM environments {', '.join(versions)}: built side by side in the "
                      "background; each version's run starts when its own is ready")
        building = BackgroundBuild(builder, versions)
        step.beside_build = lambda: building is not None and building.running
    run_versions(versions, out, quick=args.quick, step=step, building=building)
    if building is not None:
        built = building.wait() == 0
        console.print(f"{'[green]✓' if built else '[red]✗'}[/] vLLM environments "
                      f"{', '.join(versions)} (side by side, in the background) "
                      f"[dim]({building.seconds:.0f} s)[/dim]")
        log.insert(0, {"step": f"vLLM environments {', '.join(versions)} (side by side, in the "
                       "background beside the first versions' runs)", "ok": built,
                       "seconds": round(building.seconds, 1), "in_background": True,
                       "environments": environment_facts(versions)})
    # what measures comes after the builds: parity (servers of its own), then the
    # version-independent benchmarks
    if not args.no_parity:
        for version in versions:
            if version in CURRENT_TESTED:
                run_parity(version, out, quick=args.quick, step=step)
    (out / "bench").mkdir(exist_ok=True)
    quick = ["--quick"] if args.quick else []
    step(
        "wire benchmark (naive nnrp-py vs this binding)",
        lambda: bench(
            sys.executable, "wire", ["--json", str(out / "bench" / "wire.json"), *quick]
        ),
    )
    step(
        "mapper benchmark",
        lambda: bench(sys.executable, "mapper", ["--json", str(out / "bench" / "mapper.json")]),
    )
    # the long-by-count runs: the test command proves the same properties at a size that
    # proves them, the counts are recorded here, where the gate reads them
    for name, title, sessions, full, short in LONG_RUNS:
        counts = short if args.quick else full
        step(
            f"{title} ({counts[0]:,} operations on {sessions} sessions)",
            functools.partial(
                bench,
                sys.executable,
                "soak",
                ["--name", name, "--sessions", str(sessions), "--ops", str(counts[0]),
                 "--warmup", str(counts[1]), "--out", str(out / "long-runs" / f"{name}.json"),
                 "--results", str(out / "bench" / f"{name}.json")],
            ),
        )
    record.write(out, log)  # the gate lists it; rewritten with the run's end below
    console.rule("release gate")
    rc = step("release gate", lambda: subprocess.call(
        [
            sys.executable,
            "-m",
            "nnrp_conformance.cli",
            "gate",
            "--evidence",
            str(out),
            "--out",
            str(out),
            "--readme",
            str(REPO_ROOT / "README.md"),
        ]
    ), spinner=False)
    took = time.monotonic() - started
    # a step beside another (a version's start-up beside the twin before) is counted once
    in_steps = sum(e["seconds"] for e in log if not e.get("in_background") and not e.get("beside"))
    console.print(f"release run: {took:.0f} s in all, {in_steps:.0f} s of it in the steps above "
                  "(steps run beside another not counted)")
    # the run's own time (after the gate, which lists this file): where the README's figures
    # of a release run come from, with the environments' build times and disk above
    log.append({"step": "release run in all (scripts/bootstrap not included)", "ok": rc == 0,
                "seconds": round(took, 1)})
    # the cache's disk: the builds' own count when they ran here, else counted now
    facts = next((e["environments"] for e in log if "environments" in e), {}) \
        or environment_facts(versions)
    cache_bytes = facts.get("cache_bytes")
    record.write(out, log, cache_bytes=cache_bytes, ended=True)
    console.print(f"release-gate report: {out / 'release-gate.html'}")
    for problem in one_run_problems(out):
        console.print(f"[yellow]not this run's: {problem}[/yellow]")
    return rc if isinstance(rc, int) else 1
