"""The test run's time per test directory, printed at the end (set-up and teardown included,
so a module's shared adapter counts where it is started): where the test command's minutes go.

With ``NNRP_TEST_TIMES=FILE`` (scripts/test) each pytest run also appends its table and its
outcome counts (pytest's own, as its closing line counts them), its number of xdist workers
and its wall-clock time to FILE as one JSON line; ``scripts/test-times FILE`` prints the whole
command's table from them."""

from __future__ import annotations

import json
import os
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

# taken out of the environment at start-up, so the pytest runs some tests start in a
# subprocess (the backend binding's, in the vLLM venv) do not add lines of their own
TIMES_FILE = os.environ.pop("NNRP_TEST_TIMES", None)
SECONDS: defaultdict[str, float] = defaultdict(float)
TESTS: defaultdict[str, set[str]] = defaultdict(set)
STARTED = time.monotonic()


def directory_of(nodeid: str) -> str:
    """``tests/<dir>`` of a node id relative to the rootdir (``tests/unit/test_x.py::t`` →
    ``tests/unit``); a test outside ``tests/`` counts under its first path part."""
    parts = Path(nodeid.split("::", 1)[0]).parts
    return "/".join(parts[:2]) if parts[:1] == ("tests",) and len(parts) > 2 else parts[0]


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    where = directory_of(report.nodeid)
    SECONDS[where] += report.duration
    TESTS[where].add(report.nodeid)


def summary_counts(stats: dict[str, list[Any]]) -> dict[str, int]:
    """The counts of pytest's own closing line ("3 passed, 2 skipped"): every outcome's reports
    that count towards the summary, collection skips and errors included (the terminal
    reporter's ``stats``, as ``_pytest.terminal.build_summary_stats_line`` counts them)."""
    counts: dict[str, int] = {}
    for key, reports in stats.items():
        if key in ("", "warnings"):
            continue
        n = sum(1 for r in reports if getattr(r, "count_towards_summary", True))
        if n:
            counts[key] = n
    return counts


def pytest_sessionstart(session: pytest.Session) -> None:
    global STARTED
    STARTED = time.monotonic()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not SECONDS:
        return
    terminalreporter.section("time per test directory")
    for where, seconds in sorted(SECONDS.items(), key=lambda kv: -kv[1]):
        terminalreporter.write_line(f"{seconds:8.1f} s  {len(TESTS[where]):4d} tests  {where}")
    terminalreporter.write_line(f"{sum(SECONDS.values()):8.1f} s  in all")
    out = TIMES_FILE
    if out and not hasattr(terminalreporter.config, "workerinput"):
        workers = getattr(terminalreporter.config.option, "numprocesses", None) or 0
        line = {"directories": {w: [round(s, 1), len(TESTS[w])] for w, s in SECONDS.items()},
                "outcomes": summary_counts(terminalreporter.stats),
                "workers": int(workers),
                "wall_s": round(time.monotonic() - STARTED, 1)}
        with open(out, "a", encoding="utf-8") as f:
            f.write(json.dumps(line) + "\n")
