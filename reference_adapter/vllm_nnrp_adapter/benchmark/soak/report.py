"""The soak's verdict and its table: RSS flat within the bound after warm-up (with the
growth's slope per 1,000 operations), no event lost, duplicated or misordered, every terminal
the expected one, nothing left open; and where any growth was (Python objects, malloc)."""

from __future__ import annotations

import argparse
import os
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from ..lib.results import machine_info, now_rfc3339, versions_info


def _commit() -> str | None:
    """The checkout's commit (``+dirty`` with local changes), when this runs from one."""
    root = Path(__file__).resolve().parents[4]
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--", "suite", "reference_adapter"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return head + ("+dirty" if dirty else "")


def _slope_kib_per_kop(points: list[dict[str, Any]]) -> float:
    """Least-squares RSS growth per 1,000 operations over ``points``."""
    xs: list[float] = [p["operations"] for p in points]
    ys: list[float] = [p["rss_mib"] * 1024 for p in points]
    if len(points) < 2 or max(xs) == min(xs):
        return 0.0
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    num = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    den = sum((x - mx) ** 2 for x in xs)
    return round(num / den * 1000, 1)


def _verdict(
    args: argparse.Namespace,
    client: dict[str, Any],
    samples: list[dict[str, Any]],
    marks: dict[str, Any],
    final: dict[str, Any],
    census_end: Counter[str],
    trace_top: list[str],
    server: dict[str, Any],
) -> dict[str, Any]:
    w = marks.get("warmup")
    if w is None:
        raise RuntimeError(f"no sample reached the warm-up ({args.warmup} operations)")
    base = samples[w]
    after = samples[w:]
    dev = max(abs(s["rss_mib"] - base["rss_mib"]) for s in after) / base["rss_mib"] * 100
    late = samples[marks.get("late", len(samples) - 1)]
    growth = marks.get("census_late", census_end) - marks["census"]

    def grew(key: str, at: dict[str, Any]) -> float | None:
        return round(at[key] - base[key], 2) if key in base else None

    clean = (
        client["lost"] == client["duplicated"] == client["misordered"] == 0
        and client["bad_terminals"] == 0
        and not client["wire_findings"]
        and client["operations"] == args.ops
        and not any(
            server[k]
            for k in (
                "open_operations",
                "open_handler_tasks",
                "unfinished_backend_requests",
                "recorder_in_flight",
            )
        )
    )

    return {
        "name": "soak",
        "generated_at": now_rfc3339(),
        "commit": _commit(),
        "parameters": {
            "operations": args.ops,
            "sessions": args.sessions,
            "reconnect_every": args.reconnect_every,
            "tokens_per_stream": args.tokens,
            "warmup_operations": args.warmup,
            "sample_interval_s": args.sample_interval,
            "client": "same process" if args.in_process else "child process",
            "mix": "per 10 ops: 6 streaming text, 1 cancelled stream, 1 non-streaming, "
            "1 tool call stream, 1 malformed submit",
        },
        "machine": {**machine_info(), "nproc": os.cpu_count()},
        "versions": versions_info(),
        "load_average_start": server["load_average_start"],
        "load_average_end": server["load_average_end"],
        "operations": client["operations"],
        "wall_s": client["wall_s"],
        "ops_per_s": client["ops_per_s"],
        "events": client["events"],
        "lost": client["lost"],
        "duplicated": client["duplicated"],
        "misordered": client["misordered"],
        "bad_terminals": client["bad_terminals"],
        "wire_findings": client["wire_findings"],
        "cancel_races_result_after_cancel": client["cancel_races"],
        "outcomes": client["outcomes"],
        "problems": client["problems"],
        "warmup": {"operations": base["operations"], "t_s": base["t_s"]},
        "rss_baseline_mib": base["rss_mib"],
        "rss_min_after_warmup_mib": min(s["rss_mib"] for s in after),
        "rss_max_after_warmup_mib": max(s["rss_mib"] for s in after),
        "rss_final_mib": final["rss_mib"],
        "rss_max_deviation_percent": round(dev, 2),
        "rss_slope_kib_per_1000_ops": _slope_kib_per_kop(after),
        # "late" = the first sample at 90 % of the operations, sessions still open;
        # "closed" = the last sample, after the client closed its sessions
        "late_sample": {"operations": late["operations"], "t_s": late["t_s"]},
        "py_blocks_growth_late": grew("py_blocks", late),
        "malloc_in_use_growth_late_mib": grew("malloc_in_use_mib", late),
        "malloc_in_use_growth_closed_mib": grew("malloc_in_use_mib", final),
        "malloc_free_held_growth_closed_mib": grew("malloc_free_held_mib", final),
        "rss_after_malloc_trim_mib": server["rss_after_malloc_trim_mib"],
        "object_growth_late": dict(growth.most_common(10)),
        "tracemalloc_growth_late": trace_top,
        "client_rss_start_mib": client["client_rss_start_mib"],
        "client_rss_end_mib": client["client_rss_end_mib"],
        "client_objects_top": client["client_objects_top"],
        **{
            k: server[k]
            for k in (
                "server_operations",
                "open_operations",
                "open_handler_tasks",
                "unfinished_backend_requests",
                "recorder_in_flight",
            )
        },
        "flat_within_10_percent": dev <= 10.0,
        "clean": clean,
        "samples": samples,
    }


def _print(doc: dict[str, Any], console: Console) -> None:
    p = doc["parameters"]
    table = Table(
        title=f"soak: {doc['operations']} operations, {p['sessions']} sessions, client in "
        f"{p['client']}, load {doc['load_average_start'][0]}→{doc['load_average_end'][0]}",
        title_justify="left",
    )
    table.add_column("figure", no_wrap=True)
    table.add_column("value", justify="right")
    w = doc["warmup"]
    rows = [
        ("wall", f"{doc['wall_s']:.1f} s"),
        ("throughput", f"{doc['ops_per_s']:.1f} ops/s"),
        ("events checked", f"{doc['events']:,}"),
        (
            "lost / duplicated / misordered",
            f"{doc['lost']} / {doc['duplicated']} / {doc['misordered']}",
        ),
        ("wrong terminals", str(doc["bad_terminals"])),
        ("wire findings (other)", str(sum(doc["wire_findings"].values()))),
        ("cancel races (push after cancel)", str(doc["cancel_races_result_after_cancel"])),
        ("warm-up point", f"{w['operations']} ops at {w['t_s']} s"),
        ("server RSS baseline", f"{doc['rss_baseline_mib']:.1f} MiB"),
        (
            "server RSS min / max after",
            f"{doc['rss_min_after_warmup_mib']:.1f} / {doc['rss_max_after_warmup_mib']:.1f} MiB",
        ),
        ("server RSS max deviation", f"{doc['rss_max_deviation_percent']:.2f} %"),
        ("server RSS slope", f"{doc['rss_slope_kib_per_1000_ops']} KiB / 1,000 ops"),
        (
            f"growth by {doc['late_sample']['operations']} ops: Python blocks",
            f"{doc['py_blocks_growth_late']:,}",
        ),
        (
            f"growth by {doc['late_sample']['operations']} ops: malloc in use",
            f"{doc['malloc_in_use_growth_late_mib']} MiB",
        ),
        (
            "malloc in use / free-held growth, sessions closed",
            f"{doc['malloc_in_use_growth_closed_mib']} / "
            f"{doc['malloc_free_held_growth_closed_mib']} MiB",
        ),
        ("RSS after malloc_trim at end", f"{doc['rss_after_malloc_trim_mib']} MiB"),
        (
            "client RSS start → end",
            f"{doc['client_rss_start_mib']:.1f} → {doc['client_rss_end_mib']:.1f} MiB",
        ),
        (
            "left open (ops/tasks/backend)",
            f"{doc['open_operations']} / "
            f"{doc['open_handler_tasks']} / {doc['unfinished_backend_requests']}",
        ),
        ("flat within ±10 %", str(doc["flat_within_10_percent"])),
    ]
    for row in rows:
        table.add_row(*row)
    console.print(table)
    series = Table(title="server RSS over time", title_justify="left")
    for col in ("t (s)", "operations", "RSS (MiB)", "vs baseline"):
        series.add_column(col, justify="right")
    samples = doc["samples"]
    step = max(1, len(samples) // 16)
    shown = samples[::step] + ([samples[-1]] if (len(samples) - 1) % step else [])
    for s in shown:
        rel = (s["rss_mib"] / doc["rss_baseline_mib"] - 1) * 100
        series.add_row(str(s["t_s"]), str(s["operations"]), f"{s['rss_mib']:.1f}", f"{rel:+.1f} %")
    console.print(series)
    if doc["object_growth_late"]:
        console.print(
            f"object count growth warm-up → late (top): {doc['object_growth_late']}", markup=False
        )
    for line in doc["tracemalloc_growth_late"]:
        console.print(f"  {line}", markup=False)
    for line in doc["problems"]:
        console.print(f"  problem: {line}", markup=False)
