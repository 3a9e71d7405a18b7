"""The release run's background builds: each version's run starts when its own environment
is announced ready, in the order they become ready, and the builder runs at a lower CPU
priority than the runs beside it. A stand-in builder (a script that announces as
``scripts/vllm-venv --announce`` does) replaces the real one; no vLLM here."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from vllm_nnrp_adapter.release.builds import BackgroundBuild

# announces 0.32.0 first, then waits for a go-file before announcing 0.18.1 and exiting
STAND_IN = """
import sys, time
from pathlib import Path
args = sys.argv[1:]
assert args[0] == "--announce", args
go = Path(sys.argv[0]).with_name("go")
print(f"[stand-in] building {' '.join(args[1:])}", file=sys.stderr, flush=True)
print("ready 0.32.0 /venvs/0.32.0", flush=True)
for _ in range(1000):
    if go.exists():
        break
    time.sleep(0.01)
print("[vllm-venv] a log line on stdout is not an announcement", flush=True)
print("ready 0.18.1 /venvs/0.18.1", flush=True)
"""


def stand_in(tmp_path: Path) -> Path:
    script = tmp_path / "vllm-venv"
    script.write_text(STAND_IN, encoding="utf-8")
    return script


def test_versions_come_in_the_order_their_environments_are_ready(tmp_path: Path) -> None:
    build = BackgroundBuild(stand_in(tmp_path), ["0.18.1", "0.32.0"])
    try:
        # the policy lists 0.18.1 first; 0.32.0 is ready first, so it runs first
        assert build.next_ready(["0.18.1", "0.32.0"]) == "0.32.0"
        assert build.ready_now(["0.18.1"]) is None  # not announced: the run does not wait
        assert build.running
        (tmp_path / "go").touch()
        assert build.next_ready(["0.18.1"]) == "0.18.1"
    finally:
        (tmp_path / "go").touch()
        assert build.wait() == 0
    assert not build.running
    assert build.seconds > 0


def test_a_version_never_announced_is_handed_out_once_the_builder_ends(tmp_path: Path) -> None:
    (tmp_path / "go").touch()
    build = BackgroundBuild(stand_in(tmp_path), ["0.22.1"])
    assert build.wait() == 0
    # 0.22.1 was never announced (its build failed): its own environment step says why
    assert build.next_ready(["0.22.1"]) == "0.22.1"
    assert build.ready_now(["0.22.1"]) == "0.22.1"


def test_the_builder_runs_at_a_lower_priority(tmp_path: Path) -> None:
    build = BackgroundBuild(stand_in(tmp_path), ["0.32.0"])
    try:
        assert build.next_ready(["0.32.0"]) == "0.32.0"  # nice has exec'd the builder by now
        stat = Path(f"/proc/{build.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        # field 19 of /proc/PID/stat is the nice value; fields after the name start at 3
        assert int(stat[19 - 3]) == os.getpriority(os.PRIO_PROCESS, 0) + BackgroundBuild.NICENESS
        assert Path(f"/proc/{build.proc.pid}/cmdline").read_bytes().split(b"\0")[0] \
            == sys.executable.encode()
    finally:
        (tmp_path / "go").touch()
        assert build.wait() == 0
