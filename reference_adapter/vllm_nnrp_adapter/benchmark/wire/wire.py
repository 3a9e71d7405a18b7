"""``vllm-nnrp bench wire``: the naive nnrp-py pattern vs our binding, side by side,
cross-process.

For each column a server subprocess is started (``--serve naive|ours``) and this process
is the client (the naive public-API client, or ``NnrpClient``). Both run the same bench
handler, which stamps ``time.perf_counter_ns()`` into each delta at yield time; Linux's
perf_counter is CLOCK_MONOTONIC, one clock for every process, so handler-yield → client-
receive is measured on the same clock (checked and printed). Figures are medians of
several runs; the table prints both columns and ours/naive ratios, and ``--json`` writes
everything. Loopback only; every run is bounded.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from typing import Any

import anyio
from rich.console import Console
from rich.table import Table

from ..lib.results import BENCH_WIRE, metric, ratio_of, write_results
from ..lib.results import results_document as build
from . import clients as wire_clients
from .servers import envelope, serve_floor, serve_naive, serve_ours

STALL_MS = 30.0  # a Nagle/delayed-ACK stall is ~40 ms; anything above this counts as one


def pct(xs: list[float], p: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, round(p / 100 * (len(s) - 1)))] if s else float("nan")


def _proc_cpu_s(pid: int) -> float:
    """User+system CPU seconds of a process (Linux /proc; 10 ms ticks, fine for bursts)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


CLIENTS = {"ours": "OursClient", "naive": "NaiveClient", "floor": "FloorClient"}


async def measure(kind: str, target: str, cfg: dict[str, int], server_pid: int) -> dict[str, Any]:
    cls = getattr(wire_clients, CLIENTS[kind])
    c = await cls.connect(target)
    out: dict[str, Any] = {}
    try:
        for _ in range(cfg["warmup"]):
            await c.run(envelope(5))
        firsts, terms = [], []
        for _ in range(cfg["ops"]):
            r = await c.run(envelope(5))
            firsts.append((r["recv"][0][0] - r["t0"]) / 1e6)
            terms.append((r["end"] - r["t0"]) / 1e6)
        out["submit_to_first_ms"] = {
            "p50": pct(firsts, 50),
            "p95": pct(firsts, 95),
            "max": max(firsts),
        }
        out["submit_to_terminal_ms"] = {
            "p50": pct(terms, 50),
            "p95": pct(terms, 95),
            "max": max(terms),
        }
        lat: list[float] = []
        for _ in range(cfg["paced_runs"]):
            r = await c.run(envelope(cfg["paced_n"], cfg["paced_gap_us"]))
            lat += [(t - int(json.loads(b)["delta"])) / 1e6 for t, b in r["recv"]]
        out["per_event_ms"] = {
            "p50": pct(lat, 50),
            "p95": pct(lat, 95),
            "max": max(lat),
            "gap_us": cfg["paced_gap_us"],
            "n": len(lat),
        }
        rates, burst_lat, srv_cpu, cli_cpu = [], [], [], []
        for _ in range(cfg["runs"]):
            s0, c0 = _proc_cpu_s(server_pid), time.process_time()
            r = await c.run(envelope(cfg["burst"]))
            srv_cpu.append((_proc_cpu_s(server_pid) - s0) / cfg["burst"] * 1e6)
            cli_cpu.append((time.process_time() - c0) / cfg["burst"] * 1e6)
            assert len(r["recv"]) == cfg["burst"]
            rates.append(cfg["burst"] / ((r["end"] - r["t0"]) / 1e9))
            burst_lat += [(t - int(json.loads(b)["delta"])) / 1e6 for t, b in r["recv"]]
        out["one_stream_events_per_s"] = {"median": statistics.median(rates), "runs": rates}
        # CPU per event does not depend on how loaded the machine is; the rates above do
        out["server_cpu_us_per_event"] = {"median": statistics.median(srv_cpu), "runs": srv_cpu}
        out["client_cpu_us_per_event"] = {"median": statistics.median(cli_cpu), "runs": cli_cpu}
        out["burst_per_event_ms"] = {
            "p50": pct(burst_lat, 50),
            "p95": pct(burst_lat, 95),
            "max": max(burst_lat),
        }
    finally:
        await c.close()
    rates8 = []
    for _ in range(cfg["runs"]):
        clients = [await cls.connect(target) for _ in range(8)]
        try:
            per = cfg["burst8"]
            t0 = time.perf_counter_ns()
            async with anyio.create_task_group() as tg:
                for cl in clients:
                    tg.start_soon(cl.run, envelope(per))
            rates8.append(8 * per / ((time.perf_counter_ns() - t0) / 1e9))
        finally:
            for cl in clients:
                await cl.close()
    out["eight_sessions_events_per_s"] = {"median": statistics.median(rates8), "runs": rates8}
    out["samples"] = {
        "first_event_ms": firsts,
        "terminal_ms": terms,
        "per_event_ms": lat,
        "events_per_s": rates,
        "events_per_s_8_sessions": rates8,
        "server_cpu_us_per_event": srv_cpu,
        "client_cpu_us_per_event": cli_cpu,
    }
    return out


#: (metric suffix, unit, samples key, description)
_METRICS = (
    ("events_per_s", "1/s", "events_per_s", "events/s on one stream (5,000-event bursts)"),
    ("events_per_s_8_sessions", "1/s", "events_per_s_8_sessions", "events/s across 8 sessions"),
    ("first_event_ms", "ms", "first_event_ms", "submit → first event (5-event operations)"),
    ("terminal_ms", "ms", "terminal_ms", "submit → terminal (5-event operations)"),
    ("per_event_ms", "ms", "per_event_ms", "handler yield → client receive, paced 2 ms"),
    ("server_cpu_us_per_event", "us", "server_cpu_us_per_event", "server CPU per streamed event"),
    ("client_cpu_us_per_event", "us", "client_cpu_us_per_event", "client CPU per received event"),
)


#: column -> metric-name prefix in the benchmark-results document
PREFIXES = {"ours": "wire", "floor": "floor", "naive": "naive"}


def wire_ratios(medians: dict[str, float]) -> list[dict[str, Any]]:
    """Each column against ours, from the metric medians present, oriented so higher is
    worse for ``*.over_floor`` ("cost ×": 1.0 is the SDK floor, 2.0 half its speed) and
    better for ``*.speedup`` (ours over naive): a rate (1/s) is the other way up from a time or
    a CPU cost, so its numerator and denominator swap."""

    out = []
    for suffix, unit, _, _ in _METRICS:
        ours, floor = f"wire.{suffix}", f"floor.{suffix}"
        if ours in medians and floor in medians:
            num, den = (floor, ours) if unit == "1/s" else (ours, floor)
            out.append(ratio_of(medians, f"{suffix}.over_floor", num, den))
    for suffix, unit, _, _ in _METRICS:
        ours, naive = f"wire.{suffix}", f"naive.{suffix}"
        if ours in medians and naive in medians:
            num, den = (ours, naive) if unit == "1/s" else (naive, ours)
            out.append(ratio_of(medians, f"{suffix}.speedup", num, den))
    return out


def results_document(results: dict[str, Any]) -> dict[str, Any]:
    """Both columns as one ``benchmark-results`` document (the gate's ``wire`` baseline)."""

    metrics = []
    for kind, prefix in PREFIXES.items():
        if kind not in results:
            continue
        samples = results[kind]["samples"]
        for suffix, unit, key, doc in _METRICS:
            metrics.append(metric(f"{prefix}.{suffix}", unit, samples[key], description=doc))
    ratios = wire_ratios({m["name"]: m["median"] for m in metrics})
    return build(
        BENCH_WIRE,
        metrics,
        runs=CONFIGS["ours"]["runs"],
        parameters=dict(CONFIGS["ours"]),
        ratios=ratios,
        notes=[
            f"stall over {STALL_MS:.0f} ms (submit→terminal max): {results.get('stall_over_30ms')}"
        ],
        description=(
            "NNRP wire over loopback TCP, cross-process: naive nnrp-py, the SDK's one-thread "
            "floor and this binding, in one run"
        ),
    )


@contextlib.contextmanager
def server_process(kind: str):  # type: ignore[no-untyped-def]
    extra = [f"--switch-interval-us={sys.getswitchinterval() * 1e6}"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "vllm_nnrp_adapter.benchmark.wire.wire", "--serve", kind, *extra],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        addr = proc.stdout.readline().strip()
        if not addr:
            raise RuntimeError(f"{kind} server did not start (exit {proc.poll()})")
        yield addr, proc.pid
    finally:
        with contextlib.suppress(Exception):
            assert proc.stdin is not None
            proc.stdin.close()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


_FULL = {
    "warmup": 20,
    "ops": 300,
    "paced_runs": 3,
    "paced_n": 200,
    "paced_gap_us": 2000,
    "runs": 5,
    "burst": 5000,
    "burst8": 2000,
}


CONFIGS = {
    "floor": dict(_FULL),
    "ours": {
        "warmup": 20,
        "ops": 300,
        "paced_runs": 3,
        "paced_n": 200,
        "paced_gap_us": 2000,
        "runs": 5,
        "burst": 5000,
        "burst8": 2000,
    },
    "naive": {
        "warmup": 3,
        "ops": 40,
        "paced_runs": 1,
        "paced_n": 100,
        "paced_gap_us": 2000,
        "runs": 3,
        "burst": 300,
        "burst8": 100,
    },
}


ROWS = [
    ("submit→first event p50 (ms)", ("submit_to_first_ms", "p50"), "low"),
    ("submit→first event p95 (ms)", ("submit_to_first_ms", "p95"), "low"),
    ("submit→terminal p50 (ms)", ("submit_to_terminal_ms", "p50"), "low"),
    ("submit→terminal p95 (ms)", ("submit_to_terminal_ms", "p95"), "low"),
    ("submit→terminal max (ms)", ("submit_to_terminal_ms", "max"), "low"),
    ("per-event yield→recv p50 (ms, paced)", ("per_event_ms", "p50"), "low"),
    ("per-event yield→recv p95 (ms, paced)", ("per_event_ms", "p95"), "low"),
    ("per-event yield→recv max (ms, paced)", ("per_event_ms", "max"), "low"),
    ("per-event yield→recv p95 (ms, burst)", ("burst_per_event_ms", "p95"), "low"),
    ("events/s, one stream", ("one_stream_events_per_s", "median"), "high"),
    ("events/s, 8 sessions", ("eight_sessions_events_per_s", "median"), "high"),
    ("server CPU µs per event (burst)", ("server_cpu_us_per_event", "median"), "low"),
    ("client CPU µs per event (burst)", ("client_cpu_us_per_event", "median"), "low"),
]


COLUMNS = {
    "naive": "naive nnrp-py",
    "floor": "SDK floor",
    "ours": "our binding",
}


def render(results: dict[str, Any]) -> None:
    def fmt(v: float) -> str:
        return f"{v:,.3f}" if v < 1000 else f"{v:,.0f}"

    def better(a: float, b: float, low: bool) -> str:
        # how many times better ``b`` is than ``a``
        return f"{(a / b if low else b / a):,.2f}×" if a and b else "–"

    cols = [k for k in COLUMNS if k in results]
    t = Table(title="NNRP wire, loopback TCP, cross-process (medians)")
    t.add_column("metric")
    for k in cols:
        t.add_column(COLUMNS[k], justify="right")
    if "naive" in results and "ours" in results:
        t.add_column("ours vs naive (better ×)", justify="right")
    if "floor" in results and "ours" in results:
        t.add_column("ours vs floor (better ×)", justify="right")
    for label, (a, b), direction in ROWS:
        low = direction == "low"
        row = [label, *(fmt(results[k][a][b]) for k in cols)]
        if "naive" in results and "ours" in results:
            row.append(better(results["naive"][a][b], results["ours"][a][b], low))
        if "floor" in results and "ours" in results:
            row.append(better(results["floor"][a][b], results["ours"][a][b], low))
        t.add_row(*row)
    # piped output (logs, CI) would otherwise wrap the table at 80 columns
    Console(width=None if sys.stdout.isatty() else 160).print(t)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="vllm-nnrp bench wire", description=__doc__.splitlines()[0])
    ap.add_argument("--serve", choices=list(COLUMNS), help=argparse.SUPPRESS)
    ap.add_argument("--listen", default="127.0.0.1:0", help=argparse.SUPPRESS)
    ap.add_argument(
        "--json",
        default="wire-benchmark.json",
        help="where to write the results (benchmark-results JSON)",
    )
    ap.add_argument(
        "--only",
        choices=list(COLUMNS),
        action="append",
        help="run only this column (repeatable); default: naive, floor and ours",
    )

    ap.add_argument("--quick", action="store_true", help="fewer samples (release smoke runs)")
    ap.add_argument("--switch-interval-us", type=float, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.switch_interval_us:
        sys.setswitchinterval(args.switch_interval_us / 1e6)
    if args.serve:
        serve = {"naive": serve_naive, "floor": serve_floor}.get(args.serve, serve_ours)
        anyio.run(serve, args.listen)
        return 0
    clock = time.get_clock_info("perf_counter")
    results: dict[str, Any] = {
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
        },
        "clock": {
            "perf_counter": clock.implementation,
            "monotonic_same_clock": "CLOCK_MONOTONIC" in clock.implementation,
        },
        "configs": CONFIGS,
    }
    if args.quick:
        for cfg in CONFIGS.values():
            cfg.update(
                ops=min(cfg["ops"], 100),
                paced_runs=1,
                runs=3,
                burst=min(cfg["burst"], 2000),
                burst8=min(cfg["burst8"], 500),
            )
    kinds = args.only or ["naive", "floor", "ours"]
    for kind in COLUMNS:
        if kind not in kinds:
            continue
        with server_process(kind) as (addr, pid):
            t = time.monotonic()
            results[kind] = anyio.run(measure, kind, addr, CONFIGS[kind], pid)
            results[kind]["wall_s"] = round(time.monotonic() - t, 1)
    stalls = {
        k: results[k]["submit_to_terminal_ms"]["max"] > STALL_MS for k in COLUMNS if k in results
    }
    results["stall_over_30ms"] = stalls
    results["load_average"] = os.getloadavg()
    render(results)
    print(f"load average after the run: {results['load_average']}")
    print(f"clock: {clock.implementation}; results written to {args.json}")

    write_results(results_document(results), args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
