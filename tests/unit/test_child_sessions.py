"""Every process the project starts stays in the caller's session (docs/vllm-cpu.md#machine-stalls):
no new session anywhere in the tree, and the group stop of :func:`start_process_group` still
ends a whole tree."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from vllm_nnrp_adapter.launch.processes import process_tree, start_process_group, stop_process_group

REPO = Path(__file__).resolve().parents[2]
# what makes a child a session leader: Popen's flag, the os call (also as a preexec_fn) and the
# command of that name; spelled in pieces so this file does not match itself
NEW_SESSION = re.compile("start_new_session" + r"\s*=\s*True|\bset" + "sid\\b")
SCANNED = {".py", ".sh", ".yml", ".yaml", ".toml", ".cfg", ".ini", ""}
SKIPPED_DIRS = {".git", ".venv", ".vllm-venvs", "site", "node_modules", "docs", "reports"}


def source_files() -> list[Path]:
    """Code, scripts and configuration in the checkout (prose and recorded evidence left out:
    the docs explain why a new session is not used, and name it)."""
    out = []
    for path in REPO.rglob("*"):
        rel = path.relative_to(REPO)
        if any(part in SKIPPED_DIRS or part.startswith(".pytest") for part in rel.parts[:-1]):
            continue
        if path.is_file() and path.suffix in SCANNED and path.stat().st_size < 1_000_000:
            out.append(path)
    return out


def test_no_child_is_started_in_a_new_session() -> None:
    files = source_files()
    assert any(p.name == "conformance.py" for p in files)  # the scan reaches the adapter
    assert (REPO / "scripts" / "release") in files  # and the scripts without a suffix
    found = []
    for path in files:
        text = path.read_text(encoding="utf-8", errors="replace")
        for number, line in enumerate(text.splitlines(), 1):
            if NEW_SESSION.search(line):
                found.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert not found, ("a child started in a new session is a task group of its own and brings "
                       "back the machine stalls (docs/vllm-cpu.md#machine-stalls); use "
                       "vllm_nnrp_adapter.launch.processes.start_process_group:\n" + "\n".join(found))


def test_the_scan_finds_each_spelling(tmp_path: Path) -> None:
    for line in ("subprocess.Popen(cmd, start_new_session" + "=True)",
                 "Popen(cmd, preexec_fn=os.set" + "sid)", "exec set" + "sid vllm serve"):
        assert NEW_SESSION.search(line), line
    assert not NEW_SESSION.search("start_process_group(cmd, stdout=log)")


def test_start_process_group_refuses_a_new_session() -> None:
    with pytest.raises(ValueError, match="caller's session"):
        start_process_group([sys.executable, "-c", "pass"], **{"start_new_session": True})


# a leader that starts a grandchild; both ignore SIGTERM (a wedged engine core), so only the
# group kill ends them
TREE = """
import signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
child = subprocess.Popen([sys.executable, "-c",
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"])
print(child.pid, flush=True)
time.sleep(60)
"""


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie is ended
    except OSError:
        return False


def test_a_stopped_group_leaves_no_process_and_stays_in_our_session() -> None:
    proc = start_process_group([sys.executable, "-c", TREE], stdout=subprocess.PIPE, text=True,
                               stdin=subprocess.DEVNULL)
    try:
        assert proc.stdout is not None
        grandchild = int(proc.stdout.readline())
        assert os.getsid(proc.pid) == os.getsid(0)  # our session, so our task group
        assert os.getsid(grandchild) == os.getsid(0)
        assert os.getpgid(proc.pid) == proc.pid != os.getpgid(0)  # its own group, for the stop
        assert os.getpgid(grandchild) == proc.pid
        tree = process_tree(proc.pid)
        assert grandchild in tree
        assert stop_process_group(proc, timeout=0.5) == -9
        deadline = time.monotonic() + 10  # the orphaned grandchild is reaped by init
        while any(alive(pid) for pid in tree) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not [pid for pid in tree if alive(pid)]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
