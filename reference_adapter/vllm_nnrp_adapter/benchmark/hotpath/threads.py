"""The threads a serving process runs, read from ``/proc/PID/task``: each thread's name
(``comm``), CPU seconds and context switches, and what they spent between two readings,
grouped by name (digits dropped: ``ZMQbg/IO/0`` and ``ZMQbg/IO/1`` are one pool).

``schedstat`` adds the time each thread spent *runnable but not running* (waiting on a run
queue): a sampling profiler sees a preempted thread at its last Python frame, so on a busy
machine a thread's samples, and the categories they are shared into, grow with that wait
while its CPU does not.

Context switches stand in for GIL hand-offs: a thread that waits for the GIL (or for a
futex, a poll, a condition) sleeps and is switched out *voluntarily*; one preempted by the
scheduler with work left is switched out *involuntarily*. Per token, they say how often the
process's threads hand the CPU to each other, which py-spy's sampling cannot.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

from vllm_nnrp_adapter.observability.proc_cpu import _TICK


@dataclass(frozen=True)
class ThreadReading:
    name: str
    cpu_s: float
    voluntary: int
    involuntary: int
    #: nanoseconds spent runnable, waiting for a CPU (``/proc/.../schedstat``, field 2)
    runq_ns: int = 0


def read_threads(pid: int) -> dict[int, ThreadReading]:
    """Every live thread of ``pid``, by thread id (a thread gone mid-read is skipped)."""
    out: dict[int, ThreadReading] = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        base = f"/proc/{pid}/task/{tid}"
        try:
            with open(f"{base}/stat", encoding="ascii", errors="replace") as fh:
                head, _, tail = fh.read().rpartition(")")
            with open(f"{base}/status", encoding="ascii", errors="replace") as fh:
                status = dict(
                    line.split(":", 1) for line in fh.read().splitlines() if ":" in line
                )
            with open(f"{base}/schedstat", encoding="ascii") as fh:
                sched = fh.read().split()
        except OSError:
            continue
        fields = tail.split()
        out[int(tid)] = ThreadReading(
            head.partition("(")[2],
            (int(fields[11]) + int(fields[12])) / _TICK,
            int(status.get("voluntary_ctxt_switches", "0")),
            int(status.get("nonvoluntary_ctxt_switches", "0")),
            int(sched[1]) if len(sched) > 1 else 0,
        )
    return out


def pool_name(comm: str) -> str:
    """A thread's name without its number, so a pool's threads group together."""
    return re.sub(r"\d+", "N", comm)


def per_token_by_pool(
    before: Mapping[int, ThreadReading],
    after: Mapping[int, ThreadReading],
    tokens: int,
    names: Mapping[int, str] | None = None,
) -> dict[str, dict[str, float]]:
    """Per thread pool (name without digits): threads, CPU µs per token, voluntary and
    involuntary context switches per token and µs per token spent waiting for a CPU,
    between two readings; largest CPU first.
    A thread born between them counts from zero; one that ended is lost. ``names``: a
    Python thread's own name (py-spy's) by thread id, where ``comm`` says only ``python``."""
    pools: dict[str, dict[str, float]] = {}
    for tid, now in after.items():
        was = before.get(tid, ThreadReading(now.name, 0.0, 0, 0))
        p = pools.setdefault(
            pool_name((names or {}).get(tid) or now.name), {"threads": 0, "cpu_us": 0.0, "vol": 0.0, "invol": 0.0, "runq_us": 0.0}
        )
        p["threads"] += 1
        p["cpu_us"] += (now.cpu_s - was.cpu_s) * 1e6 / max(tokens, 1)
        p["vol"] += (now.voluntary - was.voluntary) / max(tokens, 1)
        p["invol"] += (now.involuntary - was.involuntary) / max(tokens, 1)
        p["runq_us"] += (now.runq_ns - was.runq_ns) / 1e3 / max(tokens, 1)
    return dict(sorted(pools.items(), key=lambda kv: -kv[1]["cpu_us"]))


def pool_table(pools: Mapping[str, Mapping[str, float]]) -> str:
    """Markdown: one line per thread pool."""
    lines = [
        "| threads (comm) | n | CPU µs per token | voluntary cs per token | involuntary "
        "| runnable, not running: µs per token |",
        "|---|---|---|---|---|---|",
    ]
    for name, p in pools.items():
        if p["cpu_us"] < 0.5 and p["vol"] < 0.01:
            continue
        lines.append(
            f"| {name} | {int(p['threads'])} | {p['cpu_us']:.0f} | {p['vol']:.2f} "
            f"| {p['invol']:.2f} | {p.get('runq_us', 0.0):.0f} |"
        )
    return "\n".join(lines)
