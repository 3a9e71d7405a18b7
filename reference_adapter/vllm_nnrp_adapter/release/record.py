"""What a release run records about itself, and whether an evidence folder is one run.

A release run writes ``release-run.json``: ``run`` (its id, the commit it ran, its command,
start and end, seconds, whether it started cold, the environments' disk, the machine) and
``steps`` (:mod:`.steps`). Every other file of the folder is written by the same run, and
:func:`one_run_problems` says where a folder is not that: a document stamped outside the run's
start and end (a benchmark or a gate re-run later), a version folder or a root file the run did
not write (another command's output), a version without its suite results or its twin. The
release prints them at its end; ``tests/unit/test_release_record.py`` runs it on the recorded
evidence.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nnrp_conformance.gate.evidence import MANIFEST_FILE, POLICY_FILE

from ..benchmark.lib.results import machine_info, now_rfc3339
from ..launch.embedded import REPO_ROOT

RUN_FILE = "release-run.json"
#: what a release run writes at the root of its folder (the gate's report three times)
ROOT_ENTRIES = frozenset({MANIFEST_FILE, POLICY_FILE, RUN_FILE, "release-gate.json",
                          "release-gate.md", "release-gate.html", "bench", "long-runs"})
#: scripts/release exports how long its bootstrap took, so the run's cost includes it
BOOTSTRAP_ENV = "NNRP_RELEASE_BOOTSTRAP_SECONDS"
#: the titles of the steps whose output :func:`one_run_problems` looks for (:mod:`.versions`)
SUITE_STEP = "conformance suite against vLLM {}"
TWIN_STEP = "HTTP twin on vLLM {}"


def clear_earlier_run(out: Path) -> None:
    """Remove what a release run writes into ``out``: a stale file of an earlier run must not
    pass as this run's, nor its record or gate report stay beside this run's files if this one
    stops early. Anything else in ``out`` is left (and named by :func:`one_run_problems`)."""
    if not out.is_dir():
        return
    for child in out.iterdir():
        if child.name.startswith("vllm-") or child.name in ROOT_ENTRIES:
            if child.is_dir():
                shutil.rmtree(child)
            else:
                child.unlink()


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(REPO_ROOT), *args], capture_output=True,
                              text=True, timeout=30, check=True)
    except (OSError, subprocess.SubprocessError):
        return None  # not a checkout (an installed wheel): the run says so with null
    return done.stdout.strip()


def built_environments(versions: Sequence[str]) -> list[str]:
    """The versions whose vLLM environment this checkout has already built."""
    return [v for v in versions
            if (REPO_ROOT / ".vllm-venvs" / v / "nnrp-checkout-stamp.json").is_file()]


@dataclass
class RunRecord:
    """One release run's identity and cost, from its start."""

    command: list[str]
    quick: bool
    versions: list[str]
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    started_at: str = field(default_factory=now_rfc3339)
    _t0: float = field(default_factory=time.monotonic)
    commit: str | None = field(default_factory=lambda: _git("rev-parse", "HEAD"))
    #: files of the checkout changed or added and not committed when the run started
    dirty: bool | None = field(default_factory=lambda: None if (s := _git(
        "status", "--porcelain", "--untracked-files=normal")) is None else bool(s))
    ready_at_start: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.ready_at_start = built_environments(self.versions)

    def header(self, *, cache_bytes: int | None = None, ended: bool = False) -> dict[str, Any]:
        bootstrap = os.environ.get(BOOTSTRAP_ENV, "")
        return {
            "id": self.id,
            "commit": self.commit,
            "dirty": self.dirty,
            "command": shlex.join(["vllm-nnrp", "release", *self.command]),
            "quick": self.quick,
            "versions": self.versions,
            "started_at": self.started_at,
            "ended_at": now_rfc3339() if ended else None,
            "seconds": round(time.monotonic() - self._t0, 1) if ended else None,
            "bootstrap_seconds": float(bootstrap) if bootstrap.replace(".", "").isdigit()
            else None,
            # cold: no environment of these versions was built when the run started
            "cold": not self.ready_at_start,
            "environments_ready_at_start": self.ready_at_start,
            "cache_bytes": cache_bytes,
            "machine": machine_info(),
        }

    def write(self, out: Path, steps: Sequence[dict[str, Any]], *,
              cache_bytes: int | None = None, ended: bool = False) -> None:
        """``release-run.json``: written before the gate (which lists it) and again at the end."""
        doc = {"run": self.header(cache_bytes=cache_bytes, ended=ended), "steps": list(steps)}
        (out / RUN_FILE).write_text(json.dumps(doc, indent=2), encoding="utf-8")


def _stamped(folder: Path) -> Iterator[tuple[Path, str]]:
    """Every JSON document of the folder that carries a top-level ``generated_at``."""
    for path in sorted(folder.rglob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and isinstance(data.get("generated_at"), str):
            yield path, data["generated_at"]


def one_run_problems(folder: Path) -> list[str]:
    """Where ``folder`` is not the output of the one release run its ``release-run.json``
    records; empty when it is."""
    try:
        doc = json.loads((folder / RUN_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return [f"{RUN_FILE}: unreadable ({exc})"]
    run = doc.get("run") if isinstance(doc, dict) else None
    if not isinstance(run, dict) or not run.get("ended_at"):
        return [f"{RUN_FILE}: no record of an ended run (written before release runs "
                "recorded themselves, or the run did not end)"]
    problems = []
    start, end = run["started_at"], run["ended_at"]
    for path, stamp in _stamped(folder):
        if not start <= stamp <= end:
            problems.append(f"{path.relative_to(folder)}: generated {stamp}, outside the run "
                            f"({start} to {end})")
    versions = set(run.get("versions") or [])
    steps = [s.get("step", "") for s in doc.get("steps", []) if isinstance(s, dict)]
    for entry in sorted(folder.iterdir()):
        name = entry.name
        if name.startswith("vllm-"):
            if name.removeprefix("vllm-") not in versions:
                problems.append(f"{name}/: not a version of the run ({', '.join(sorted(versions))})")
        elif name not in ROOT_ENTRIES:
            problems.append(f"{name}: not written by the release run")
    for version in sorted(versions):
        vdir = folder / f"vllm-{version}"
        if SUITE_STEP.format(version) in steps \
                and not (vdir / "case-results.json").is_file():
            problems.append(f"vllm-{version}/case-results.json: missing, the run's suite step ran")
        if TWIN_STEP.format(version) in steps and not (vdir / "twin").is_dir():
            problems.append(f"vllm-{version}/twin/: missing, the run's twin step ran")
        if not any(re.search(rf"\bvLLM {re.escape(version)}\b", s) for s in steps):
            problems.append(f"vLLM {version}: in the run's versions, no step ran on it")
    return problems
