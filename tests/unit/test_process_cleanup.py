"""Stopping a process group we started removes the shared-memory files its processes held and
left behind (vLLM's ring buffer and semaphores, OpenMP's registration), and nothing else."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from vllm_nnrp_adapter.launch.processes import (
    shm_files_in_use,
    start_process_group,
    stop_process_group,
)

pytestmark = pytest.mark.skipif(not Path("/dev/shm").is_dir(), reason="needs /dev/shm (Linux)")

# a child that holds one file open, maps another, holds a third the test process holds too, ignores SIGTERM (as a wedged engine
# core does, so the group is killed) and never removes either
CHILD = """
import mmap, signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
held = open(sys.argv[1], "w")
shared = open(sys.argv[3])
with open(sys.argv[2], "w+b") as f:
    f.write(b"x" * 4096)
    f.flush()
    mapped = mmap.mmap(f.fileno(), 4096)
print("ready", flush=True)
time.sleep(60)
"""


def test_stopping_a_group_removes_the_shm_files_its_processes_left(tmp_path: Path) -> None:
    tag = f"nnrp-test-{os.getpid()}-{time.monotonic_ns()}"
    held, mapped, ours = (Path("/dev/shm") / f"{tag}-{n}" for n in ("held", "mapped", "ours"))
    # a file the group held that a live process (this one) still holds: never removed
    try:
        with open(ours, "w") as keep:
            proc = start_process_group(
                [sys.executable, "-c", CHILD, str(held), str(mapped), str(ours)],
                stdout=subprocess.PIPE,
                text=True,
            )
            try:
                assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
                assert {held, mapped, ours} <= shm_files_in_use([proc.pid])
                code = stop_process_group(proc, timeout=0.5)
                assert code == -9  # it ignored SIGTERM and was killed with its group
                assert not held.exists() and not mapped.exists()
                assert ours.exists()
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
            assert keep.writable()
    finally:
        for path in (held, mapped, ours):
            path.unlink(missing_ok=True)
