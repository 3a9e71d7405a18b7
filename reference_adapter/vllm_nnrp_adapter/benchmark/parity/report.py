"""The parity benchmark's document: per path and workload the medians and spread across
rounds (tokens/s, TTFT, inter-token gaps, CPU per 1,000 tokens of the serving and engine
processes, the clients' CPU apart), every NNRP column's ratios to HTTP, the issue's targets
(judged on the ``nnrp`` column, what a user runs), and the table printed from it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

from ..lib.results import (
    BENCH_PARITY,
    median,
    metric,
    percentile,
    ratio,
    results_document,
)
from ..lib.streams import gaps_ms
from .facts import (
    CONCURRENCY,
    HTTP,
    HTTP_TPS,
    LABELS,
    MAX_TOKENS,
    NNRP,
    NNRP_COLUMNS,
    NNRP_TPS,
    PATHS,
    Workload,
)
from .run import Plan, RoundResult, _ok


def summarise(rounds: Sequence[RoundResult]) -> dict[str, Any]:
    """Pooled per-request samples of one path and workload, and per-round figures."""
    ttft: list[float] = []
    itl: list[float] = []
    total: list[float] = []
    tps: list[float] = []
    out: dict[str, Any] = {
        "aggregate_tokens_per_s": [],
        "ttft_p50_by_round": [],
        "serving_cpu_s_per_1k_tokens": [],
        "engine_cpu_s_per_1k_tokens": [],
        "client_cpu_s_per_1k_tokens": [],
        "idle_other_cpu_s": [],
        "load_average": [],
    }
    errors = 0
    first_error: Any = None
    for rr in rounds:
        round_ttft: list[float] = []
        for s in rr.samples:
            if not _ok(s):
                errors += 1
                first_error = first_error or s.error or "no content or no end of stream"
                continue
            ttft_ms, total_ms = s.ttft_ms, s.total_ms
            assert ttft_ms is not None and total_ms is not None, "_ok(s) checked both"
            round_ttft.append(ttft_ms)
            itl.extend(gaps_ms(s.content_ns))
            total.append(total_ms)
            if s.tokens_per_s is not None:
                tps.append(s.tokens_per_s)
        ttft += round_ttft
        if round_ttft:
            out["ttft_p50_by_round"].append(median(round_ttft))
        if rr.wall_s > 0 and rr.tokens:
            out["aggregate_tokens_per_s"].append(rr.tokens / rr.wall_s)
        if rr.server is not None and rr.tokens:
            out["serving_cpu_s_per_1k_tokens"].append(rr.per_1k(rr.server.serving))
            out["engine_cpu_s_per_1k_tokens"].append(rr.per_1k(rr.server.engine))
        if rr.tokens:
            out["client_cpu_s_per_1k_tokens"].append(rr.per_1k(rr.client_cpu_s))
        if rr.idle_other_cpu_s is not None:
            out["idle_other_cpu_s"].append(rr.idle_other_cpu_s)
        out["load_average"].append(rr.load_average)
    out.update(
        ttft_ms=ttft,
        itl_ms=itl,
        total_ms=total,
        tokens_per_s=tps,
        errors=errors,
        first_error=first_error,
    )
    return out


#: (field, unit, description, keep raw values)
_FIELDS = (
    (
        "aggregate_tokens_per_s",
        "tokens/s",
        "all completion tokens of a round / its wall time",
        True,
    ),
    ("ttft_ms", "ms", "request sent → first content chunk, every request", False),
    ("ttft_p50_by_round", "ms", "median TTFT of each round (spread across rounds)", True),
    ("itl_ms", "ms", "gap between content chunks, every request", False),
    ("total_ms", "ms", "request sent → end of stream, every request", False),
    ("tokens_per_s", "tokens/s", "completion tokens / total time, every request", False),
    (
        "serving_cpu_s_per_1k_tokens",
        "s",
        "CPU s of the serving process (API server or "
        "adapter) per 1,000 completion tokens, per round",
        True,
    ),
    (
        "engine_cpu_s_per_1k_tokens",
        "s",
        "CPU s of the engine-core process per 1,000 completion tokens, per round",
        True,
    ),
    (
        "client_cpu_s_per_1k_tokens",
        "s",
        "CPU s of the benchmark's client per 1,000 "
        "completion tokens, per round (kept out of the server figures)",
        True,
    ),
    ("idle_other_cpu_s", "s", "CPU s the other, idle server spent during this path's round", True),
)


#: the ratios reported per workload: (name, summary field, statistic)
_RATIOS = (
    ("aggregate_tokens_per_s", "aggregate_tokens_per_s", "median"),
    ("ttft_p50", "ttft_ms", "p50"),
    ("ttft_p95", "ttft_ms", "p95"),
    ("itl_p50", "itl_ms", "p50"),
    ("itl_p95", "itl_ms", "p95"),
    ("serving_cpu_s_per_1k_tokens", "serving_cpu_s_per_1k_tokens", "median"),
    ("engine_cpu_s_per_1k_tokens", "engine_cpu_s_per_1k_tokens", "median"),
)


#: the per-round figures whose ratio is also reported round by round (for its spread)
_BY_ROUND = ("aggregate_tokens_per_s", "serving_cpu_s_per_1k_tokens")


def _stat(values: Sequence[float], how: str) -> float:
    return median(values) if how == "median" else percentile(values, 95 if how == "p95" else 50)


def _key(w: Workload) -> str:
    return f"{w[0]}.c{w[1]}"


def targets(summaries: Mapping[str, Mapping[Workload, Mapping[str, Any]]]) -> dict[str, bool]:
    """The issue's parity targets, per workload: True where met in this run."""
    out: dict[str, bool] = {}
    for w, a in summaries[NNRP].items():
        b = summaries[HTTP].get(w)
        if b is None or not a["ttft_ms"] or not b["ttft_ms"]:
            continue
        k = _key(w)
        out[f"target.{k}.tokens_per_s_ratio_ge_0.97"] = median(
            a["aggregate_tokens_per_s"]
        ) >= 0.97 * median(b["aggregate_tokens_per_s"])
        out[f"target.{k}.ttft_p50_le_1.05x_plus_1ms"] = (
            percentile(a["ttft_ms"], 50) <= 1.05 * percentile(b["ttft_ms"], 50) + 1.0
        )
        if a["itl_ms"] and b["itl_ms"]:
            out[f"target.{k}.itl_p95_le_1.05x"] = percentile(a["itl_ms"], 95) <= 1.05 * percentile(
                b["itl_ms"], 95
            )
        # the goal: serving CPU per token <= 1.0x at every concurrency (c = 1, 8, 32)
        if a["serving_cpu_s_per_1k_tokens"] and b["serving_cpu_s_per_1k_tokens"]:
            out[f"target.{k}.serving_cpu_per_1k_le_http"] = median(
                a["serving_cpu_s_per_1k_tokens"]
            ) <= median(b["serving_cpu_s_per_1k_tokens"])
    return out


def _column_ratios(
    col: str,
    summaries: Mapping[str, Mapping[Workload, Mapping[str, Any]]],
    metrics: list[dict[str, Any]],
) -> list[dict[str, Any]]:
    """NNRP column ``col``'s ratios to HTTP per workload; its per-round tokens/s ratio (the
    pair measured back to back) goes to ``metrics``, for its spread."""
    out: list[dict[str, Any]] = []
    for w, a in summaries.get(col, {}).items():
        b = summaries[HTTP].get(w)
        if b is None:
            continue
        k = _key(w)
        for name, field_, how in _RATIOS:
            if not a[field_] or not b[field_] or _stat(b[field_], how) == 0:
                continue
            out.append(
                ratio(
                    f"{col}/{HTTP}.{k}.{name}",
                    f"{col}.{k}.{field_}",
                    f"{HTTP}.{k}.{field_}",
                    _stat(a[field_], how) / _stat(b[field_], how),
                    description=f"{how} over {'rounds' if how == 'median' else 'requests'}",
                )
            )
        # the same ratio round by round (each pair measured back to back): its spread
        for field_ in _BY_ROUND:
            by_round = [x / y for x, y in zip(a[field_], b[field_], strict=False) if y]
            if by_round:
                metrics.append(
                    metric(
                        f"{col}/{HTTP}.{k}.{field_}_by_round",
                        "ratio",
                        by_round,
                        description=f"{col}/{HTTP} {field_} of each round's pair",
                    )
                )
    return out


def build_document(
    measured: Mapping[Workload, Sequence[RoundResult]],
    *,
    plan: Plan,
    vllm_version: str,
    parameters: dict[str, Any],
    notes: list[str],
) -> dict[str, Any]:
    summaries: dict[str, dict[Workload, dict[str, Any]]] = {p: {} for p in PATHS}
    for w, rounds in measured.items():
        for p in PATHS:
            mine = [rr for rr in rounds if rr.path == p]
            if mine:
                summaries[p][w] = summarise(mine)
    headline: Workload = ("short", 1)
    metrics: list[dict[str, Any]] = []
    for prefix, tps_name in ((NNRP, NNRP_TPS), (HTTP, HTTP_TPS)):
        vals = summaries[prefix].get(headline, {}).get("tokens_per_s")
        if not vals:
            raise RuntimeError(f"{prefix}: no successful request in the short c=1 workload")
        metrics.append(
            metric(tps_name, "tokens/s", vals, description="per request, short prompt, c=1")
        )
    for prefix in PATHS:
        for w, s in summaries[prefix].items():
            base = f"{prefix}.{_key(w)}"
            for field_, unit, what, keep in _FIELDS:
                if s[field_]:
                    metrics.append(
                        metric(
                            f"{base}.{field_}", unit, s[field_], description=what, keep_values=keep
                        )
                    )
            parameters[f"{base}.errors"] = s["errors"]
            if s["first_error"]:
                parameters[f"{base}.first_error"] = str(s["first_error"])[:500]
            parameters[f"{base}.load_average_by_round"] = " | ".join(s["load_average"])
    ratios = [
        ratio(
            f"{NNRP}/{HTTP}.tokens_per_s",
            NNRP_TPS,
            HTTP_TPS,
            median(summaries[NNRP][headline]["tokens_per_s"])
            / median(summaries[HTTP][headline]["tokens_per_s"]),
            description="> 1: the adapter is faster",
        )
    ]
    for col in NNRP_COLUMNS:
        ratios += _column_ratios(col, summaries, metrics)
    parameters.update(targets(summaries))
    return results_document(
        BENCH_PARITY,
        metrics,
        runs=plan.rounds,
        vllm=vllm_version,
        parameters=parameters,
        ratios=ratios,
        notes=notes,
        description="The same engine (version, flags, tiny model), prompts and sampling "
        f"(greedy, ignore_eos, max_tokens {MAX_TOKENS}) through vLLM's own OpenAI HTTP/SSE "
        "server and through the adapter over NNRP, both up for the whole run and measured in "
        "interleaved rounds (the first path alternating), loopback only.",
    )


def print_summary(doc: Mapping[str, Any], console: Console) -> None:
    """The comparison at a glance: per workload and NNRP column, the ratios to HTTP (medians,
    with the per-round spread) and every process's CPU per 1k tokens, the client's apart."""
    by = {r["name"]: r["value"] for r in doc.get("ratios", ())}
    med = {m["name"]: m for m in doc["metrics"]}
    table = Table(
        title="parity (ratios to HTTP, medians and min–max over rounds; CPU s per 1k tokens)",
        title_justify="left",
    )
    for col in (
        "workload",
        "path",
        "tok/s",
        "spread",
        "TTFT p50",
        "ITL p95",
        "srv CPU",
        "srv ratio",
        "spread",
        "engine",
        "eng ratio",
        "client",
    ):
        table.add_column(col, justify="right", no_wrap=True)

    def f(x: float | None, digits: int = 3) -> str:
        return "—" if x is None else f"{x:.{digits}f}"

    def spread(name: str) -> str:
        m = med.get(name)
        return "—" if not m else f"{m['min']:.2f}–{m['max']:.2f}"

    for prompt in ("short", "long"):
        for c in CONCURRENCY:
            k = f"{prompt}.c{c}"
            for p in PATHS:
                cpu = {
                    what: (med.get(f"{p}.{k}.{what}_cpu_s_per_1k_tokens") or {}).get("median")
                    for what in ("serving", "engine", "client")
                }
                if cpu["serving"] is None and f"{p}.{k}.aggregate_tokens_per_s" not in med:
                    continue
                r = f"{p}/{HTTP}.{k}"
                table.add_row(
                    k if p == HTTP else "",
                    LABELS[p],
                    f(by.get(f"{r}.aggregate_tokens_per_s"), 2) if p != HTTP else "1",
                    spread(f"{r}.aggregate_tokens_per_s_by_round"),
                    f(by.get(f"{r}.ttft_p50"), 2),
                    f(by.get(f"{r}.itl_p95"), 2),
                    f(cpu["serving"]),
                    f(by.get(f"{r}.serving_cpu_s_per_1k_tokens"), 2),
                    spread(f"{r}.serving_cpu_s_per_1k_tokens_by_round"),
                    f(cpu["engine"]),
                    f(by.get(f"{r}.engine_cpu_s_per_1k_tokens"), 2),
                    f(cpu["client"]),
                )
    console.print(table)
    params = doc.get("parameters", {})
    console.print(
        f"  load average: start {params.get('load_average_start', '?')}, "
        f"end {params.get('load_average_end', '?')}; targets judged on the {NNRP!r} column "
        "(lean client, one session per stream); client: this process's CPU per 1k tokens",
        markup=False,
    )
    missed = [k for k, v in params.items() if k.startswith("target.") and not v]
    console.print(f"  targets missed: {', '.join(missed) if missed else 'none'}", markup=False)
