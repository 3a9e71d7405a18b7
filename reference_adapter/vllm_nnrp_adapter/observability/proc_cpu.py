"""CPU time, memory and threads of a serving process and its children, read from ``/proc``.

Owns the ``/proc`` readings the benchmarks and the adapter's tooling take. The main fact: how many CPU seconds (user + system, every thread, exited threads included)
a process tree spent between two readings. A server under test is split into its *serving*
process (the root: ``vllm serve``'s API server, or the adapter) and its *engine* (every
descendant: vLLM's engine core). ``/proc/PID/stat`` accumulates the time of a process's
threads, including threads that have exited, so a thread pool that shrinks loses nothing;
its resolution is one clock tick (10 ms at the usual 100 Hz), small against a round of
several seconds. Linux only; elsewhere :func:`cpu_seconds` returns ``None``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

__all__ = [
    "TreeCpu",
    "cpu_seconds",
    "descendants",
    "rss_bytes",
    "thread_count",
    "tree_cpu",
]

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def rss_bytes(pid: int) -> int | None:
    """Resident memory of process ``pid`` in bytes (``/proc/PID/statm``), or None if gone."""
    try:
        with open(f"/proc/{pid}/statm", encoding="ascii") as fh:
            return int(fh.read().split()[1]) * _PAGE
    except OSError:
        return None


def thread_count(pid: int) -> int | None:
    """How many threads process ``pid`` has now, or None if it is gone."""
    try:
        return len(os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return None


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of process ``pid`` (all its threads), or None if gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            text = fh.read()
    except OSError:
        return None
    # the command name (field 2) may hold spaces and parentheses: split after its last ')'
    fields = text.rsplit(")", 1)[1].split()
    utime, stime = int(fields[11]), int(fields[12])  # fields 14 and 15 of proc(5)
    return (utime + stime) / _TICK


def descendants(root: int) -> list[int]:
    """Every live process below ``root`` (not ``root`` itself)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    out: list[int] = []
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


@dataclass(frozen=True)
class TreeCpu:
    """CPU seconds of a serving process and of its engine (descendants), at one reading."""

    serving: float
    engine: float
    #: per descendant pid, so a reading can be diffed against one taken earlier
    by_pid: tuple[tuple[int, float], ...] = ()

    def since(self, earlier: TreeCpu) -> TreeCpu:
        """CPU spent between ``earlier`` and this reading (a process new since then counts
        from zero; one that ended in between is lost, which a long-lived engine never does)."""
        before = dict(earlier.by_pid)
        engine = sum(now - before.get(pid, 0.0) for pid, now in self.by_pid)
        return TreeCpu(self.serving - earlier.serving, engine)


def tree_cpu(root: int) -> TreeCpu:
    """One reading of ``root`` and its descendants."""
    serving = cpu_seconds(root)
    if serving is None:
        raise ProcessLookupError(f"process {root} is gone")
    by_pid = tuple(
        (pid, value) for pid in descendants(root) if (value := cpu_seconds(pid)) is not None
    )
    return TreeCpu(serving, sum(v for _, v in by_pid), by_pid)
