"""Condition (c): the benchmark baseline the policy lists is recorded, schema-valid, with its
metrics, machine and versions (the shared ones once, the per-version ones on every declared
line's current line); a benchmark's own correctness failures fail it, its missed performance
targets are shown, never gating."""

from __future__ import annotations

from typing import Any

from nnrp_conformance import contract
from nnrp_conformance.gate.evidence import BENCH_DIR, Document, Evidence
from nnrp_conformance.gate.requirements import SCOPE_SHARED, BenchmarkRequirement, Requirements
from nnrp_conformance.gate.verdicts import (
    _MAX_VALUES,
    ROLE_CURRENT,
    Gated,
    GateInputs,
    GateVerdict,
    _gated,
    _verdict,
)


def _summary(
    version: str | None, doc: Document, title: str | None, latency: bool
) -> dict[str, Any]:
    data = doc.data
    metrics = []
    for m in data["metrics"]:
        item = {k: m[k] for k in ("name", "unit", "median", "p50", "p95", "samples")}
        for k in ("p99", "min", "max", "mean"):
            if k in m:
                item[k] = m[k]
        if isinstance(m.get("values"), list):
            item["values"] = m["values"][:_MAX_VALUES]
        metrics.append(item)
    out: dict[str, Any] = {
        "name": data["name"],
        "file": doc.label,
        "vllm": version,
        "latency": latency,
        "runs": data["runs"],
        "machine": data["machine"],
        "versions": data["versions"],
        "metrics": metrics,
        "ratios": data.get("ratios", []),
    }
    if title:
        out["title"] = title
    # the run's own description and size (its scalar parameters): the pages title a run by
    # what it did, not by what the policy asks of a full run
    if data.get("description"):
        out["description"] = data["description"]
    params = data.get("parameters") or {}
    out["parameters"] = {k: v for k, v in params.items()
                         if isinstance(v, bool | int | float) or
                         (isinstance(v, str) and len(v) <= 200 and "by_round" not in k)}
    if data.get("generated_at"):
        out["generated_at"] = data["generated_at"]
    return out


#: where a benchmark must be: (folder, version or None, its documents, the line it is for)
_Place = tuple[str, str | None, list[Document], str]


def _places(b: BenchmarkRequirement, ev: Evidence, req: Requirements,
            currents: list[Gated], failures: list[str]) -> list[_Place]:
    """Where benchmark ``b`` must be: once if shared, else on every declared line's current
    line (a line without one is a failure naming it)."""
    if b.scope == SCOPE_SHARED:
        return [(BENCH_DIR, None, ev.benchmarks, "")]
    out: list[_Place] = []
    for g in currents:
        if g.evidence is None:
            failures.append(f"no {b.name!r} benchmark for the {req.target} {g.line.name}: no "
                            f"{req.target} {g.version} evidence directory")
        else:
            out.append((ev.rel(g.evidence.directory / BENCH_DIR), g.version,
                        g.evidence.benchmarks, f" ({req.target} {g.line.name})"))
    return out


def _required(b: BenchmarkRequirement, ev: Evidence, req: Requirements,
              currents: list[Gated], evidence: list[str]) -> list[str]:
    """Why benchmark ``b`` is not recorded everywhere the policy requires it."""
    failures: list[str] = []
    for where, version, docs, line in _places(b, ev, req, currents, failures):
        named = [d for d in docs if d.ok and d.data["name"] == b.name]
        if not named:
            failures.append(f"no benchmark-results document named {b.name!r} under "
                            f"{where}/{line}")
            continue
        doc = named[-1]
        have = {m["name"] for m in doc.data["metrics"]}
        missing = [m for m in b.metrics if m not in have]
        if missing:
            failures.append(f"{doc.label}: benchmark {b.name!r} lacks metric(s) "
                            f"{', '.join(missing)}{line}")
        recorded = doc.data["versions"].get(req.target_key)
        if version is not None and recorded != version:
            failures.append(f"{doc.label}: versions.{req.target_key} is {recorded!r}, the "
                            f"directory is for {req.target} {version}{line}")
        evidence.append(doc.label)
    return failures


def benchmark_baseline(inputs: GateInputs) -> GateVerdict:
    ev, req = inputs.evidence, inputs.requirements
    failures: list[str] = []
    evidence: list[str] = []
    currents = [g for g in _gated(inputs) if g.role == ROLE_CURRENT]
    for _version, doc in ev.all_benchmarks():
        failures += [f"schema-invalid benchmark: {p}" for p in doc.problems]
    wanted = {b.name: b for b in req.benchmarks}
    summaries = []
    for b in req.benchmarks:
        failures += _required(b, ev, req, currents, evidence)
    targets_missed: list[str] = []
    for version, doc in ev.all_benchmarks():
        if doc.ok:
            spec = wanted.get(doc.data["name"])
            summary = _summary(version, doc, spec.title if spec else None,
                               bool(spec and spec.latency))
            failures += benchmark_own_failures(doc)
            summary["targets_missed"] = missed_targets(doc)
            targets_missed += [f"{doc.label}: {t}" for t in summary["targets_missed"]]
            summaries.append(summary)
    names = ", ".join(b.name for b in req.benchmarks)
    lines = ", ".join(g.version for g in currents)
    ok = (f"benchmark baseline recorded ({names}; per version on {lines}), machine and "
          "versions included")
    return _verdict(contract.GATE_BENCHMARK_BASELINE, failures, ok, evidence=evidence,
                    details={"benchmarks": summaries, "targets_missed": targets_missed})


#: parameters by which a benchmark records that its run failed a correctness check (a cancel
#: that did not take effect, a frame after a terminal): such evidence can never pass the gate
_MUST_BE_ZERO = ("cancel_not_effective", "events_after_terminal")


def benchmark_own_failures(doc: Document) -> list[str]:
    """Correctness failures a benchmark recorded about its own run (they fail the gate)."""
    params = doc.data.get("parameters") or {}
    out = []
    for key, value in params.items():
        if key.endswith("_verdict") and value == "fail":
            out.append(f"{doc.label}: the benchmark's own verdict {key} is 'fail'")
    for key in _MUST_BE_ZERO:
        value = params.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
            out.append(f"{doc.label}: {key} = {value} (must be 0)")
    return out


def missed_targets(doc: Document) -> list[str]:
    """Performance targets (``target.*`` parameters) the recorded run did not meet.

    Shown in every gate report, in red; they do not fail the release: speed on a shared
    machine is evidence to read, correctness (``benchmark_own_failures``) is a gate."""
    params = doc.data.get("parameters") or {}
    return sorted(k for k, v in params.items() if k.startswith("target.") and v is False)
