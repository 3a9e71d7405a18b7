"""The operator guide's tiny-model ``vllm-nnrp serve`` command, run verbatim.

A newcomer must be able to start the adapter by hand from the docs' command as written (it
once failed on vLLM's default memory reservation, and once printed no serving line). The test
takes the ``sh`` block from ``docs/operator-guide.md`` and runs it with bash from the
repository root, unchanged: it builds (or reuses) the vLLM environment of the newest tested version, makes the tiny
model in ``/tmp/tiny-model`` and serves it on ``127.0.0.1:4433``. Then the README's suite
command runs verbatim against that address, from the checkout, and must pass. The block's own fixed port and model path are part of what
is checked; a port already taken fails the test with that reason, and a model folder that was
not there before is removed afterwards.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from vllm_nnrp_adapter.launch.processes import start_process_group, stop_process_group

pytestmark = pytest.mark.real_vllm

REPO = Path(__file__).resolve().parents[2]
GUIDE = REPO / "docs" / "operator-guide.md"
TARGET = ("127.0.0.1", 4433)
MODEL_DIR = Path("/tmp/tiny-model")
START_LIMIT_S = 600.0


def test_the_documented_block_uses_the_newest_tested_vllm() -> None:
    from vllm_nnrp_adapter import NEWEST_TESTED

    assert set(re.findall(r"\.vllm-venvs/([\d.]+)/", documented_block())) == {NEWEST_TESTED}


def documented_block() -> str:
    blocks = re.findall(r"^```sh\n(.*?)^```$", GUIDE.read_text(encoding="utf-8"), re.S | re.M)
    (block,) = [b for b in blocks if "vllm-nnrp serve /tmp/tiny-model" in b]
    return block


def readme_blocks() -> list[str]:
    """The README's fenced command blocks, as written (their indentation dropped)."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    return [textwrap.dedent(body).strip() for _indent, body in
            re.findall(r"^( *)```\n(.*?)^\1```$", text, re.S | re.M)]


def port_taken(address: tuple[str, int]) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(address) == 0


def test_the_documented_serve_command_works_verbatim(tmp_path: Path) -> None:
    block = documented_block()
    assert "--nnrp-listen 127.0.0.1:4433" in block and str(MODEL_DIR) in block
    if port_taken(TARGET):
        pytest.fail("127.0.0.1:4433, the port the operator guide's command listens on, is "
                    "taken on this machine: the command cannot be checked as written")
    model_existed = MODEL_DIR.exists()
    log = tmp_path / "serve.log"
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    with log.open("wb") as out:
        proc = start_process_group(["bash", "-euo", "pipefail", "-c", block], cwd=REPO,
                                   env=env, stdout=out, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + START_LIMIT_S
        while "LISTENING 127.0.0.1:4433" not in log.read_text(errors="replace"):
            if proc.poll() is not None:
                pytest.fail(f"the documented command exited with {proc.returncode}:\n"
                            f"{log.read_text(errors='replace')[-4000:]}")
            if time.monotonic() > deadline:
                pytest.fail(f"the documented command did not serve within {START_LIMIT_S:g} s:\n"
                            f"{log.read_text(errors='replace')[-4000:]}")
            time.sleep(0.5)
        text = log.read_text(errors="replace")
        assert "vllm-nnrp serving: {" in text, text[-4000:]  # the line the guide promises
        # the README's suite command, verbatim, from the checkout (issue 36 item 7)
        (command,) = [b for b in readme_blocks() if b.startswith("pytest --nnrp-target=")]
        assert "127.0.0.1:4433" in command
        env_path = f"{Path(sys.executable).parent}:{env.get('PATH', '')}"
        suite = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", command], cwd=REPO,
            env={**env, "PATH": env_path}, capture_output=True, text=True, timeout=900,
            stdin=subprocess.DEVNULL)
        assert suite.returncode == 0, suite.stdout[-6000:] + suite.stderr[-2000:]
        assert " 0 failed" in suite.stdout
    finally:
        code = stop_process_group(proc)
        if not model_existed:
            shutil.rmtree(MODEL_DIR, ignore_errors=True)
    assert code in (0, -15), f"the adapter exited with {code} on SIGTERM:\n{log.read_text()[-3000:]}"
