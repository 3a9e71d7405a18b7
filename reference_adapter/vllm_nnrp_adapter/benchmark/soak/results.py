"""A soak run as the release gate reads it: a benchmark-results document (``soak`` or ``load``).

The release run records two long-by-count runs of the soak benchmark: ``soak`` (10,000
operations on 4 sessions, resident memory judged flat) and ``load`` (64 sessions × 1,000
operations, every event of every operation checked). The test command runs the same
properties at a size that proves them (``tests/reliability/test_load.py``,
``tests/unit/test_soak_bench.py``); the counts live here, in the evidence the gate reads.

Correctness is the gate's (``events_verdict``: no event lost, duplicated or misordered, every
terminal the expected one, nothing left open; for ``soak`` also ``rss_verdict``); throughput
and memory are figures, shown, never gating.
"""

from __future__ import annotations

from typing import Any

from ..lib.results import BENCH_LOAD, BENCH_SOAK, metric, results_document

__all__ = ["OPS_PER_S", "SERVER_RSS", "results_for_gate"]

#: the metrics of both documents, by document name (the release policy requires them)
OPS_PER_S = {name: f"{name}.ops_per_s" for name in (BENCH_SOAK, BENCH_LOAD)}
SERVER_RSS = {name: f"{name}.server_rss_mib" for name in (BENCH_SOAK, BENCH_LOAD)}


def results_for_gate(doc: dict[str, Any], name: str) -> dict[str, Any]:
    """The benchmark-results document named ``name`` for the soak run ``doc``
    (:func:`.report._verdict`'s figures)."""
    after = [s["rss_mib"] for s in doc["samples"] if s["operations"] >= doc["warmup"]["operations"]]
    p = doc["parameters"]
    parameters: dict[str, str | int | float | bool | None] = {
        "operations": doc["operations"],
        "sessions": p["sessions"],
        "tokens_per_stream": p["tokens_per_stream"],
        "client": p["client"],
        "mix": p["mix"],
        "events_checked": doc["events"],
        "events_lost": doc["lost"],
        "events_duplicated": doc["duplicated"],
        "events_misordered": doc["misordered"],
        "bad_terminals": doc["bad_terminals"],
        "left_open": doc["open_operations"] + doc["open_handler_tasks"]
        + doc["unfinished_backend_requests"],
        "events_verdict": "pass" if doc["clean"] else "fail",
        "rss_max_deviation_percent": doc["rss_max_deviation_percent"],
        "load_average_start": doc["load_average_start"][0],
        "load_average_end": doc["load_average_end"][0],
    }
    if name == BENCH_SOAK:
        parameters["rss_verdict"] = "pass" if doc["flat_within_10_percent"] else "fail"
    return results_document(
        name,
        [
            metric(OPS_PER_S[name], "ops/s", [doc["ops_per_s"]]),
            metric(SERVER_RSS[name], "MiB", after or [doc["rss_final_mib"]],
                   description="server resident memory sampled after the warm-up"),
        ],
        runs=1,
        parameters=parameters,
        notes=[f"{doc['operations']} operations in {doc['wall_s']:.1f} s on {p['sessions']} "
               f"sessions; the full figures (memory over time, object growth): long-runs/{name}.json"],
    )
