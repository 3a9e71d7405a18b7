"""What every benchmark shares: machine and version capture, statistics, the rich table and
the benchmark-results JSON (validated against the suite's ``benchmark-results`` schema).

Benchmarks build metrics with :func:`metric`, a document with :func:`results_document`,
print it with :func:`print_results` and write it with :func:`write_results`. The documents
the release baseline requires are named here (``BENCH_*``); the metrics each must carry are
the adapter's release policy's (:func:`required_metrics`), which the gate reads too.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import math
import os
import platform
import statistics
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any, TypeVar

import anyio
from rich.console import Console
from rich.table import Table

from nnrp_conformance import validation
from nnrp_conformance.gate.requirements import Requirements, requirements_from_document
from vllm_nnrp_adapter import __version__ as adapter_version
from vllm_nnrp_adapter.profile.policy import policy_document, policy_path

__all__ = [
    "BenchmarkError",
    "add_adapter_choice",
    "cores",
    "cpu_name",
    "machine_info",
    "median",
    "metric",
    "now_rfc3339",
    "percentile",
    "print_results",
    "ratio",
    "ratio_of",
    "results_document",
    "versions_info",
    "write_results",
]


T = TypeVar("T")

#: the benchmark-results documents of the release baseline (the policy lists each with scope)
BENCH_WIRE = "wire"
BENCH_MAPPER = "mapper"
BENCH_STREAMING_LATENCY = "streaming-latency"
BENCH_CANCELLATION_LATENCY = "cancellation-latency"
BENCH_PARITY = "parity"
BENCH_SOAK = "soak"
BENCH_LOAD = "load"


@functools.cache
def release_requirements() -> Requirements:
    """The adapter's release policy, checked against the ``release-policy`` schema."""
    return requirements_from_document(policy_document(), source=str(policy_path()))


def required_metrics(name: str) -> tuple[str, ...]:
    """The metric names the release policy requires of benchmark ``name``."""
    metrics = release_requirements().metrics_of(name)
    if not metrics:
        raise KeyError(f"the release policy {policy_path()} requires no benchmark {name!r}")
    return metrics


async def run_concurrent(
    n: int, concurrency: int, one: Callable[[int], Awaitable[T]]
) -> tuple[list[T], float]:
    """``n`` calls of ``one(worker)`` from ``concurrency`` workers, closed loop (a worker
    starts its next call when its last one ends; each call is taken by exactly one worker);
    returns (results in completion order, wall seconds)."""
    counter = itertools.count()
    results: list[T] = []

    async def worker(w: int) -> None:
        while next(counter) < n:
            results.append(await one(w))

    t0 = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for w in range(max(1, concurrency)):
            tg.start_soon(worker, w)
    return results, time.perf_counter() - t0


class BenchmarkError(ValueError):
    """A results document that breaks the schema, or statistics asked of no samples."""


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip() or "unknown"
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def cores() -> int:
    """Cores this process may run on (the affinity mask), not the host's total."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, OSError, ValueError):
        return None


def machine_info() -> dict[str, Any]:
    info: dict[str, Any] = {
        "cpu": cpu_name(),
        "cores": cores(),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }
    memory = _memory_bytes()
    if memory is not None:
        info["memory_bytes"] = memory
    return info


def _dist(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def versions_info(vllm: str | None = None, **extra: str | None) -> dict[str, str | None]:
    """nnrp-py, the suite, the adapter and vLLM (None when the benchmark runs without it)."""

    out: dict[str, str | None] = {
        "nnrp_py": _dist("nnrp-py") or "unknown",
        "suite": _dist("nnrp-conformance") or "unknown",
        "adapter": adapter_version,
        "vllm": vllm,
    }
    out.update(extra)
    return out


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (``q`` in 0..100), as numpy's default."""
    if not values:
        raise BenchmarkError("percentile of no samples")
    ordered = sorted(values)
    pos = (len(ordered) - 1) * min(max(q, 0.0), 100.0) / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def median(values: Sequence[float]) -> float:
    if not values:
        raise BenchmarkError("median of no samples")
    return float(statistics.median(values))


def metric(
    name: str,
    unit: str,
    values: Sequence[float],
    *,
    description: str | None = None,
    keep_values: bool = True,
) -> dict[str, Any]:
    """One ``metrics[]`` item summarising ``values`` (all ≥ 0)."""
    vals = [float(v) for v in values]
    if not vals:
        raise BenchmarkError(f"metric {name}: no samples")
    out: dict[str, Any] = {
        "name": name,
        "unit": unit,
        "median": median(vals),
        "p50": percentile(vals, 50),
        "p95": percentile(vals, 95),
        "p99": percentile(vals, 99),
        "min": min(vals),
        "max": max(vals),
        "mean": statistics.fmean(vals),
        "stdev": statistics.stdev(vals) if len(vals) > 1 else 0.0,
        "samples": len(vals),
    }
    if keep_values:
        out["values"] = vals
    if description:
        out["description"] = description
    return out


def ratio(
    name: str, numerator: str, denominator: str, value: float, description: str | None = None
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": name,
        "numerator": numerator,
        "denominator": denominator,
        "value": float(value),
    }
    if description:
        out["description"] = description
    return out


def ratio_of(
    medians: Mapping[str, float],
    name: str,
    numerator: str,
    denominator: str,
    description: str | None = None,
) -> dict[str, Any]:
    """The ratio of two metrics' medians, computed from the very names its label shows, so
    the recorded ``numerator / denominator`` and the value cannot disagree."""
    return ratio(name, numerator, denominator, medians[numerator] / medians[denominator],
                 description)


def results_document(
    name: str,
    metrics: Sequence[Mapping[str, Any]],
    *,
    runs: int,
    vllm: str | None = None,
    parameters: Mapping[str, str | int | float | bool | None] | None = None,
    ratios: Sequence[Mapping[str, Any]] = (),
    notes: Sequence[str] = (),
    description: str | None = None,
) -> dict[str, Any]:
    """A benchmark-results document, validated (raises :class:`BenchmarkError` naming fields)."""
    doc: dict[str, Any] = {
        "$schema": validation.schema_uri("benchmark-results"),
        "name": name,
        "generated_at": now_rfc3339(),
        "machine": machine_info(),
        "versions": versions_info(vllm),
        "runs": runs,
        "metrics": [dict(m) for m in metrics],
    }
    if description:
        doc["description"] = description
    if parameters:
        doc["parameters"] = dict(parameters)
    if ratios:
        doc["ratios"] = [dict(r) for r in ratios]
    if notes:
        doc["notes"] = list(notes)
    _check(doc)
    return doc


def _check(doc: Mapping[str, Any]) -> None:
    violations = validation.validate("benchmark-results", doc)
    if violations:
        raise BenchmarkError(
            f"benchmark {doc.get('name')!r}: results break the benchmark-results schema: "
            + "; ".join(str(v) for v in violations)
        )


def write_results(doc: Mapping[str, Any], path: Path | str) -> Path:
    """Validate ``doc`` and write it as indented UTF-8 JSON; returns the path."""
    _check(doc)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def _fmt(value: float) -> str:
    if value >= 1000:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:,.1f}"
    return f"{value:.3f}"


def print_results(doc: Mapping[str, Any], console: Console | None = None) -> None:
    """The document as a rich table: each metric's median (= p50), p95, min, max; then ratios."""
    console = console or Console(highlight=False)
    m = doc["machine"]
    table = Table(
        title=f"{doc['name']} — {m['cpu']}, {m['cores']} core(s), Python {m['python']}, "
        f"{doc['runs']} run(s)",
        title_justify="left",
    )
    table.add_column("metric", no_wrap=True)
    table.add_column("unit", no_wrap=True)
    # p50 is the median: one column for both keeps the table inside 80 columns
    for col in ("median", "p95", "min", "max", "n"):
        table.add_column(col, justify="right", no_wrap=True)
    for item in doc["metrics"]:
        table.add_row(
            item["name"],
            item["unit"],
            _fmt(item["median"]),
            _fmt(item["p95"]),
            _fmt(item.get("min", item["p50"])),
            _fmt(item.get("max", item["p95"])),
            str(item["samples"]),
        )
    for r in doc.get("ratios", ()):
        table.add_row(r["name"], "ratio", _fmt(r["value"]), "", "", "", "")
    console.print(table)
    for r in doc.get("ratios", ()):
        console.print(f"  {r['name']} = {r['numerator']} / {r['denominator']}", markup=False)
    for note in doc.get("notes", ()):
        console.print(f"  {note}", markup=False)


def add_adapter_choice(p: argparse.ArgumentParser) -> None:
    """``--vllm-version`` (start the adapter here) or ``--target`` (one already serving): the
    choice every real-vLLM benchmark that can measure someone else's adapter offers."""
    where = p.add_mutually_exclusive_group()
    where.add_argument(
        "--vllm-version",
        default=None,
        help="start the adapter on this cached vLLM venv (default: current line)",
    )
    where.add_argument(
        "--target", default=None, help="measure an adapter already serving at HOST:PORT instead"
    )
