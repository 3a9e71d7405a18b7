"""What the release gate's pages (HTML and Markdown) show, read once from the gate's report
document: the order of their sections, the Levels table with the reason for every level not
claimed, the per-version recipe counts, the parity ratios by column, workload and concurrency,
a benchmark's size as its own run recorded it, and evidence entries as links relative to the
page. Both renderers draw from here, so the two pages say the same things in the same order.
"""

from __future__ import annotations

import posixpath
import re
from typing import Any, NamedTuple

__all__ = [
    "SECTIONS",
    "Cell",
    "EvidenceLink",
    "ParityRow",
    "benchmarks",
    "evidence_link",
    "gate",
    "href",
    "level_reasons",
    "level_rows",
    "parity_rows",
    "recipe_counts",
    "run_sizes",
]

#: the pages' sections, in order: the summary a release manager reads first, then the detail
#: (folded in the HTML page). ``id`` is the HTML anchor, ``title`` the heading on both pages.
SECTIONS: tuple[tuple[str, str], ...] = (
    ("conditions", "Release conditions"),
    ("levels", "Levels"),
    ("recipes", "Recipes"),
    ("parity", "Parity with vLLM's HTTP server"),
    ("benchmarks", "Benchmarks"),
    ("files", "Evidence files"),
    ("environment", "Environment"),
)


class Cell(NamedTuple):
    """One cell of the levels table: its text, and whether it is good (None: neutral)."""

    text: str
    ok: bool | None


def gate(report: dict[str, Any], name: str) -> dict[str, Any]:
    return next((g for g in report["gates"] if g["name"] == name), {})


def level_rows(report: dict[str, Any]) -> tuple[list[str], list[tuple[int, list[Cell]]]]:
    """(versions, one row per profile level: the level and per version a cell "claimed: k/n
    passed" (ok when all passed) or "not claimed" (ok None)), from the report alone: the first
    condition's per-version ``levels`` and the recipe rows' levels."""
    claims = gate(report, "level1_implemented").get("details", {}).get("versions") or {}
    results = gate(report, "recipes_pass").get("details", {}).get("versions", {})
    rows = []
    for level in sorted({e["level"] for entries in claims.values() for e in entries}):
        cells = []
        for version, entries in claims.items():
            entry = next((e for e in entries if e["level"] == level), None)
            if not entry or not entry["claimed"]:
                cells.append(Cell("not claimed", None))
                continue
            mine = [r for r in results.get(version, []) if r.get("level") == level]
            ok = sum(r["outcome"] == "passed" for r in mine)
            cells.append(Cell(f"claimed: {ok}/{len(mine)} passed", ok == len(mine) > 0))
        rows.append((level, cells))
    return list(claims), rows


def level_reasons(report: dict[str, Any]) -> list[tuple[str, int, str]]:
    """(version, level, why) for every level a version does not claim, as the gate recorded
    it (``reason`` of the level's entry; older reports without one: "no reason recorded")."""
    claims = gate(report, "level1_implemented").get("details", {}).get("versions") or {}
    return [(version, e["level"], e.get("reason") or "no reason recorded")
            for version, entries in claims.items() for e in entries if not e["claimed"]]


def recipe_counts(report: dict[str, Any]) -> list[tuple[str, int, int, list[str]]]:
    """(version, passed, total, ids of the recipes that neither passed nor were skipped)."""
    versions = gate(report, "recipes_pass").get("details", {}).get("versions", {})
    return [(version, sum(r["outcome"] == "passed" for r in rows), len(rows),
             [r["id"] for r in rows if r["outcome"] not in ("passed", "skipped")])
            for version, rows in versions.items()]


def benchmarks(report: dict[str, Any]) -> list[dict[str, Any]]:
    return list(gate(report, "benchmark_baseline").get("details", {}).get("benchmarks", []))


#: the parameters that say how big a benchmark's run was, in the order they are shown
_SIZE_KEYS = (
    "operations", "sessions", "tokens_per_stream", "rounds", "concurrency",
    "c1_requests_per_round", "c8_requests_per_round", "c32_requests_per_round",
    "requests_per_repeat", "max_tokens", "cancel_after_events", "ops", "burst",
    "mappings_per_repeat", "paths",
)


def run_sizes(bench: dict[str, Any]) -> str:
    """The run's own size (``parameters`` of its benchmark document, copied by the gate), e.g.
    "operations 2,000 · sessions 4 · quick run"; empty when the document recorded none."""
    params = bench.get("parameters") or {}
    parts = []
    for key in _SIZE_KEYS:
        value = params.get(key)
        if value is None or isinstance(value, bool):
            continue
        text = f"{value:,}" if isinstance(value, int) else str(value)
        parts.append(f"{key.replace('_', ' ')} {text}")
    if params.get("quick") is True:
        parts.append("quick run")
    parts.append(f"{bench['runs']} run(s)")
    if isinstance(params.get("measured_beside"), str):
        # what else loaded the machine meanwhile (``bench vllm --beside``): read the figures so
        parts.append(f"measured beside {params['measured_beside']}")
    return " · ".join(parts)


class ParityRow(NamedTuple):
    """One vLLM version's parity ratio for one NNRP column, workload, concurrency and metric."""

    version: str
    column: str
    workload: str
    concurrency: int
    metric: str
    value: float
    #: the lowest and highest per-round ratio (None: not recorded per round)
    low: float | None
    high: float | None


#: the ratios the summary shows: key in the ratio's name -> (label, which way is better)
PARITY_METRICS: dict[str, tuple[str, str]] = {
    "aggregate_tokens_per_s": ("tokens/s", "higher is better"),
    "ttft_p50": ("TTFT p50", "lower is better"),
    "serving_cpu_s_per_1k_tokens": ("serving CPU per token", "lower is better"),
}
#: the NNRP columns the summary compares with HTTP (the gate's, and the lean client over ipc)
PARITY_COLUMNS = ("nnrp", "nnrp_ipc")
_RATIO = re.compile(r"^(?P<col>[a-z0-9_]+)/http\.(?P<wl>[a-z]+)\.c(?P<c>\d+)\.(?P<m>[a-z0-9_]+)$")


def parity_rows(report: dict[str, Any]) -> list[ParityRow]:
    """Every recorded parity ratio of the summary's columns and metrics, per version."""
    out = []
    for b in benchmarks(report):
        if b["name"] != "parity":
            continue
        spread = {m["name"]: m for m in b["metrics"] if m["name"].endswith("_by_round")}
        for r in b.get("ratios", []):
            m = _RATIO.match(r["name"])
            if not m or m["col"] not in PARITY_COLUMNS or m["m"] not in PARITY_METRICS:
                continue
            rounds = spread.get(f"{r['name']}_by_round", {})
            out.append(ParityRow(b.get("vllm") or "—", m["col"], m["wl"], int(m["c"]),
                                 m["m"], float(r["value"]), rounds.get("min"),
                                 rounds.get("max")))
    order = list(PARITY_METRICS)
    versions = list(dict.fromkeys(r.version for r in out))
    return sorted(out, key=lambda r: (versions.index(r.version), order.index(r.metric),
                                      r.concurrency))


def href(report: dict[str, Any], path: str) -> str:
    """A relative link to ``path`` (relative to the evidence folder) from the report's folder."""
    base = report["environment"].get("evidence_dir") or "."
    return posixpath.normpath(posixpath.join(base, path))


class EvidenceLink(NamedTuple):
    """An evidence entry as the pages show it: a link (None: a fact, not a file) and text."""

    href: str | None
    text: str


# "PATH", "PATH:LINE" or "PATH:LINE: what it says" where PATH names a file (has an extension)
_EVIDENCE = re.compile(r"^(?P<path>[^\s:]+\.[A-Za-z0-9]+)(?::(?P<line>\d+))?(?::\s*(?P<what>.*))?$")


def evidence_link(report: dict[str, Any], entry: str) -> EvidenceLink:
    """An evidence entry (relative to the evidence folder) as a link relative to the page;
    its text names the file as seen from the page without leading ``../`` steps."""
    m = _EVIDENCE.match(entry)
    if not m:
        return EvidenceLink(None, entry)
    target = href(report, m["path"])
    name = re.sub(r"^(\.\./)+", "", target)
    text = name + (f", line {m['line']}" if m["line"] else "")
    return EvidenceLink(target, text + (f": {m['what']}" if m["what"] else ""))
