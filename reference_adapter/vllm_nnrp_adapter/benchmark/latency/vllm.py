"""``vllm-nnrp bench vllm``: streaming latency, cancellation latency and the e2e smoke on real vLLM.

Runs the three real-engine measurements of the adapter over the real wire (the suite's
NNRP client on loopback, against an adapter it starts with the tiny model or one given by
``--target``) and the documents they leave: ``DIR/bench/streaming-latency.json``,
``DIR/bench/cancellation-latency.json`` (benchmark-results) and ``DIR/smoke.json``
(case-results, re-judged by the release gate with ``nnrp_conformance.gate.smoke``).

The pieces: :mod:`..lib.streams` (requests and streamed samples), :mod:`.cancellation`, and
:mod:`.smoke`; this module plans the runs, builds the documents and is the command.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio

from nnrp_conformance import contract
from nnrp_conformance.client import NnrpClient, NnrpClientError
from vllm_nnrp_adapter.launch.adapter_process import AdapterProcess
from vllm_nnrp_adapter.launch.embedded import tiny_model, vllm_python
from vllm_nnrp_adapter.profile.policy import NEWEST_TESTED

from ..lib.results import (
    BENCH_CANCELLATION_LATENCY,
    BENCH_STREAMING_LATENCY,
    add_adapter_choice,
    median,
    print_results,
    required_metrics,
    write_results,
)
from ..lib.streams import (
    BACKEND_STAMP,
    TIMING_HINT,
    StreamSample,
    chat_envelope,
    engine_info,
    engine_settled,
    gaps_ms,
    late_frames,
    load_average,
    run_stream,
)
from .cancellation import cancel_summary, cancellation_latency
from .documents import documents
from .plan import (
    BACKEND_METRIC,
    CANCEL_METRIC,
    EVENTS_AFTER_CANCEL_TARGET,
    FULL,
    INTER_EVENT_METRIC,
    QUICK,
    TTFT_METRIC,
    Plan,
)
from .smoke import (
    SMOKE_CHECKS_FILE,
    SMOKE_FILE,
    SmokeCase,
    judge_smoke_case,
    run_smoke,
    smoke_cases,
    smoke_document,
    smoke_result,
)

# the names tests and the other benchmarks read from here, now defined in the pieces
__all__ = [
    "BACKEND_METRIC",
    "BACKEND_STAMP",
    "CANCEL_METRIC",
    "EVENTS_AFTER_CANCEL_TARGET",
    "FULL",
    "INTER_EVENT_METRIC",
    "QUICK",
    "SMOKE_CHECKS_FILE",
    "SMOKE_FILE",
    "TIMING_HINT",
    "TTFT_METRIC",
    "Plan",
    "SmokeCase",
    "StreamSample",
    "cancel_summary",
    "cancellation_latency",
    "chat_envelope",
    "documents",
    "engine_info",
    "engine_settled",
    "gaps_ms",
    "judge_smoke_case",
    "late_frames",
    "load_average",
    "main",
    "required_metrics",
    "run_smoke",
    "run_stream",
    "smoke_cases",
    "smoke_document",
    "smoke_result",
]


async def streaming_latency(
    client: NnrpClient, plan: Plan, model: str | None, lag: list[float] | None = None
) -> tuple[list[float], list[float], list[dict[str, float]], int]:
    """TTFT and inter-event samples; backend → client lags go to ``lag`` when stamped."""
    nnrp = {TIMING_HINT: True} if lag is not None else None
    ttft: list[float] = []
    inter: list[float] = []
    per_repeat: list[dict[str, float]] = []
    failures = 0
    for _ in range(plan.repeats):
        rt: list[float] = []
        ri: list[float] = []
        for _ in range(plan.stream_requests):
            env = chat_envelope(max_tokens=plan.max_tokens, model=model, nnrp=nnrp)
            s = await run_stream(client, env)
            if lag is not None:
                lag += [v / 1e6 for v in s.backend_lag_ns]
            if s.outcome != contract.TERMINAL_SUCCESS or s.ttft_ns is None:
                failures += 1
                continue
            rt.append(s.ttft_ns / 1e6)
            ri += gaps_ms(s.text_ns)
        if rt:
            per_repeat.append({"ttft_p50": median(rt), "inter_p50": median(ri) if ri else 0.0})
        ttft += rt
        inter += ri
    return ttft, inter, per_repeat, failures


async def _bench(
    address: str,
    plan: Plan,
    out: Path,
    context: dict[str, Any],
    model: str | None,
    backend_timing: bool = False,
) -> int:
    lag: list[float] | None = [] if backend_timing else None
    client = await NnrpClient.connect(address, default_timeout=120.0)
    try:
        info = await engine_info(client)
        vllm_version = str(info.get("vllm_version") or context.get("vllm_version") or "unknown")
        print(f"==> vLLM {vllm_version} at {address}; warm-up", flush=True)
        for _ in range(plan.warmup):
            await run_stream(client, chat_envelope(max_tokens=plan.max_tokens, model=model))
        print("==> e2e smoke", flush=True)
        gated, everything = await run_smoke(client, model, vllm_version)
        print("==> streaming latency", flush=True)
        t0 = time.monotonic()
        ttft, inter, stream_repeats, failures = await streaming_latency(client, plan, model, lag)
        print(f"    {time.monotonic() - t0:.1f} s; cancellation latency", flush=True)
        t0 = time.monotonic()
        cancels, cancel_repeats = await cancellation_latency(client, plan, model)
        print(
            f"    {time.monotonic() - t0:.1f} s; cancellation with "
            f"{plan.cancel_concurrency} answers at once",
            flush=True,
        )
        t0 = time.monotonic()
        loaded, loaded_repeats = await cancellation_latency(
            client, plan, model, plan.cancel_concurrency
        )
        print(f"    {time.monotonic() - t0:.1f} s", flush=True)
        context["engine_unfinished_after"] = await engine_settled(client)
    finally:
        with anyio.move_on_after(10):
            await client.aclose()
    context["load_average_end"] = load_average()
    stream_doc, cancel_doc = documents(
        ttft,
        inter,
        stream_repeats,
        failures,
        cancels,
        cancel_repeats,
        plan,
        vllm_version,
        context,
        lag,
        loaded,
        loaded_repeats,
    )
    write_results(stream_doc, out / "bench" / f"{BENCH_STREAMING_LATENCY}.json")
    write_results(cancel_doc, out / "bench" / f"{BENCH_CANCELLATION_LATENCY}.json")
    smoke_path = out / SMOKE_FILE
    smoke_path.write_text(json.dumps(smoke_document(gated), indent=2) + "\n", encoding="utf-8")
    checks_path = out / SMOKE_CHECKS_FILE
    checks_path.write_text(
        json.dumps(smoke_document(everything), indent=2) + "\n", encoding="utf-8"
    )
    print_results(stream_doc)
    print_results(cancel_doc)
    bad = [r for r in everything if r["outcome"] != contract.OUTCOME_PASSED]
    for r in everything:
        mark = "ok  " if r["outcome"] == contract.OUTCOME_PASSED else "FAIL"
        print(
            f"  smoke {mark} {r['id']}: {len(r['events'])} events, terminal {r['terminal']}"
            + (f" — {r['message']}" if r.get("message") else "")
        )
    print(f"  wrote {out / 'bench'}/*.json, {smoke_path}, {checks_path}")
    cancels = [*cancels, *loaded]
    summary = cancel_summary(cancels)
    failed = bool(bad)
    if summary["events_after_terminal"]:
        print(
            f"vllm-nnrp bench vllm: FAIL: {summary['events_after_terminal']} frame(s) after a "
            "cancelled operation's terminal",
            file=sys.stderr,
        )
        failed = True
    if summary["not_effective"]:
        after = sorted(s.after_cancel for s in cancels if s.outcome != contract.TERMINAL_CANCELLED)
        print(
            f"vllm-nnrp bench vllm: FAIL: {summary['not_effective']} of "
            f"{len(cancels) - summary['never_sent']} cancels did not take effect (the answer "
            f"ran to its end; events after the cancel: {after}; client findings on them: "
            f"{summary['not_effective_findings'] or 'none'}; "
            f"{summary['not_effective_after_last_partial']} of them sent after the answer's last "
            "partial had reached the client)",
            file=sys.stderr,
        )
        failed = True
    return 1 if failed else 0


def main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(
        prog="vllm-nnrp bench vllm",
        description="Streaming latency, cancellation latency and the e2e smoke of the adapter "
        "on real vLLM (the tiny local model), over NNRP on loopback.",
    )
    add_adapter_choice(p)
    p.add_argument(
        "--model",
        default=None,
        help="model id for the requests (default: the adapter's first served model)",
    )
    p.add_argument("--quick", action="store_true", help="fewer samples (about a minute)")
    p.add_argument(
        "--backend-timing",
        action="store_true",
        help=f"ask for nnrp.{TIMING_HINT} and measure vLLM chunk → client receive "
        f"from the adapter's per-event nnrp.{BACKEND_STAMP}",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help="output folder (default artifacts/bench-vllm/vllm-VERSION)",
    )
    p.add_argument(
        "--beside",
        default=None,
        metavar="WHAT",
        help="what else ran on the machine during this run (recorded in the results' "
        "parameters as measured_beside: the release passes its background vLLM builds)",
    )
    args = p.parse_args(list(argv))
    plan = QUICK if args.quick else FULL
    context: dict[str, Any] = {"quick": bool(args.quick), "load_average_start": load_average()}
    if args.beside:
        context["measured_beside"] = args.beside
    try:
        if args.target:
            out = (args.out or Path("artifacts/bench-vllm/target")).resolve()
            context["adapter"] = "external"
            return anyio.run(
                _bench, args.target, plan, out, context, args.model, args.backend_timing
            )

        version = args.vllm_version or NEWEST_TESTED
        out = (args.out or Path(f"artifacts/bench-vllm/vllm-{version}")).resolve()
        out.mkdir(parents=True, exist_ok=True)
        python = vllm_python(version, build=False)
        model_dir = tiny_model(python)
        print(f"==> starting the adapter on vLLM {version} ({python})", flush=True)
        with AdapterProcess(python, model_dir, log_path=out / "adapter.log") as adapter:
            context.update(
                adapter="self-started",
                vllm_version=adapter.info.get("vllm_version"),
                adapter_start_s=round(adapter.started_in_s or 0.0, 2),
                adapter_rss_bytes=adapter.rss_bytes(),
            )
            print(
                f"==> adapter at {adapter.address}, up in {adapter.started_in_s:.1f} s", flush=True
            )
            return anyio.run(
                _bench, adapter.address, plan, out, context, args.model, args.backend_timing
            )
    except (NnrpClientError, OSError, RuntimeError, ValueError) as exc:
        print(f"vllm-nnrp bench vllm: {exc}", file=sys.stderr)
        return 2
