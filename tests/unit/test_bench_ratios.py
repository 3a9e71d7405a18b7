"""Every benchmark ratio is what its label says: ``value == numerator / denominator`` of the
recorded medians, in the direction its name promises, in every report that shows it."""

from __future__ import annotations

import contextlib
import io
import re

import pytest
from rich.console import Console

from nnrp_conformance.reports import gate_html, gate_markdown
from vllm_nnrp_adapter.benchmark.lib import results
from vllm_nnrp_adapter.benchmark.lib.results import metric, print_results, results_document
from vllm_nnrp_adapter.benchmark.wire import wire

#: ours is 3× slower than the floor and 10× faster than naive, on every metric: a rate is
#: a third of the floor's, a time or CPU cost is three times the floor's
MEDIANS = {
    "wire.events_per_s": 4000.0, "floor.events_per_s": 12000.0, "naive.events_per_s": 400.0,
    "wire.events_per_s_8_sessions": 2000.0, "floor.events_per_s_8_sessions": 6000.0,
    "naive.events_per_s_8_sessions": 200.0,
    **{f"{p}.{s}": base * k
       for s, base in (("first_event_ms", 1.0), ("terminal_ms", 2.0), ("per_event_ms", 0.5),
                       ("server_cpu_us_per_event", 50.0), ("client_cpu_us_per_event", 80.0))
       for p, k in (("floor", 1.0), ("wire", 3.0), ("naive", 30.0))},
}


def _wire_document() -> dict:
    units = {s: u for s, u, _, _ in wire._METRICS}
    metrics = [metric(name, units[name.split(".", 1)[1]], [value, value, value])
               for name, value in MEDIANS.items()]
    return results_document("wire", metrics, runs=3, ratios=wire.wire_ratios(MEDIANS))


def test_each_wire_ratio_is_its_numerator_over_its_denominator() -> None:
    ratios = wire.wire_ratios(MEDIANS)
    assert len(ratios) == 2 * len(wire._METRICS)
    for r in ratios:
        assert r["value"] == pytest.approx(MEDIANS[r["numerator"]] / MEDIANS[r["denominator"]])


@pytest.mark.parametrize(("name", "numerator", "denominator", "value"), [
    # cost × over the SDK floor: ours is 3× slower on every metric, so 3 everywhere
    ("events_per_s.over_floor", "floor.events_per_s", "wire.events_per_s", 3.0),
    ("events_per_s_8_sessions.over_floor", "floor.events_per_s_8_sessions",
     "wire.events_per_s_8_sessions", 3.0),
    ("first_event_ms.over_floor", "wire.first_event_ms", "floor.first_event_ms", 3.0),
    ("server_cpu_us_per_event.over_floor", "wire.server_cpu_us_per_event",
     "floor.server_cpu_us_per_event", 3.0),
    # better × than naive: ours is 10× faster on every metric, so 10 everywhere
    ("events_per_s.speedup", "wire.events_per_s", "naive.events_per_s", 10.0),
    ("terminal_ms.speedup", "naive.terminal_ms", "wire.terminal_ms", 10.0),
    ("client_cpu_us_per_event.speedup", "naive.client_cpu_us_per_event",
     "wire.client_cpu_us_per_event", 10.0),
])
def test_wire_ratio_direction_is_pinned(name: str, numerator: str, denominator: str,
                                        value: float) -> None:
    r = next(r for r in wire.wire_ratios(MEDIANS) if r["name"] == name)
    assert (r["numerator"], r["denominator"]) == (numerator, denominator)
    assert r["value"] == pytest.approx(value)


def _gate_report(doc: dict) -> dict:
    bench = {"name": doc["name"], "file": "bench/wire.json", "vllm": None, "latency": False,
             "runs": doc["runs"], "machine": doc["machine"], "versions": doc["versions"],
             "metrics": doc["metrics"], "ratios": doc["ratios"], "targets_missed": []}
    return {"passed": True, "generated_at": "2026-01-31T12:00:00Z",
            "gates": [{"name": "benchmark_baseline", "passed": True, "reason": "", "evidence": [],
                       "details": {"benchmarks": [bench]}}],
            "environment": {"evidence_dir": "."}, "recipes": [], "files": []}


def test_every_report_labels_a_ratio_as_it_was_computed() -> None:
    doc = _wire_document()
    html = gate_html.render_gate_html(_gate_report(doc))
    md = gate_markdown.render_gate_markdown(_gate_report(doc))
    out = io.StringIO()
    print_results(doc, Console(file=out, width=200))
    terminal = out.getvalue()
    for r in doc["ratios"]:
        value = MEDIANS[r["numerator"]] / MEDIANS[r["denominator"]]
        assert re.search(rf"<code>{re.escape(r['name'])}</code></td><td>"
                         rf"{re.escape(r['numerator'])} / {re.escape(r['denominator'])}</td>"
                         rf"<td class='num'>{re.escape(gate_html._fmt(value))}</td>", html), r
        assert (f"ratio `{r['name']}` | `{r['numerator']}` / `{r['denominator']}` | "
                f"{gate_markdown._num(value)} |" in md), r
        assert f"{r['name']} = {r['numerator']} / {r['denominator']}" in terminal
        assert re.search(rf"{re.escape(r['name'])}\s+│\s+ratio\s+│\s+"
                         rf"{re.escape(results._fmt(value))}", terminal), r


def test_terminal_table_better_columns_point_the_same_way() -> None:
    """``vllm-nnrp bench wire``'s own table: "ours vs X (better ×)" is > 1 when ours is better."""
    results = {k: {} for k in ("naive", "floor", "ours")}
    for kind, prefix in wire.PREFIXES.items():
        for _, (a, b), _ in wire.ROWS:
            suffix = {"one_stream_events_per_s": "events_per_s",
                      "eight_sessions_events_per_s": "events_per_s_8_sessions"}.get(a)
            value = MEDIANS[f"{prefix}.{suffix}"] if suffix else MEDIANS[f"{prefix}.terminal_ms"]
            results[kind].setdefault(a, {})[b] = value
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        wire.render(results)
    rows = {line.split("│")[1].strip(): [c.strip() for c in line.split("│")[2:-1]]
            for line in out.getvalue().splitlines() if line.count("│") >= 6}
    # columns: naive, floor, ours, ours vs naive, ours vs floor
    assert rows["events/s, one stream"][3:] == ["10.00×", "0.33×"]
    assert rows["submit→terminal p50 (ms)"][3:] == ["10.00×", "0.33×"]
