"""The provider quickstart (docs/quickstart.md), run verbatim from the folders it names, and the
README's install command (issue 36 item 7).

The quickstart's install block runs in a fresh folder beside a checkout named
``nnrp-conformance`` (a link to this repository) and makes a fresh environment; the README's
``pip install .`` runs in the checkout, in that environment. With it active, the example
endpoint starts from the checkout as the page shows, and ``init`` and the suite run from an
empty folder with the page's address replaced by the endpoint's own (the page says to). The
run must pass and write the four files the page lists. No vLLM here: it lives beside the
real-vLLM tests because a fresh environment is their kind of cost (about 20 s on 2 cores).
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from vllm_nnrp_adapter.launch.processes import start_process_group, stop_process_group

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = REPO / "docs" / "quickstart.md"
README = REPO / "README.md"
PAGE_ADDRESS = "127.0.0.1:40613"


def sh_blocks(path: Path) -> list[str]:
    """The page's command blocks (```, ```sh), each as written (indentation dropped)."""
    blocks: list[tuple[str, list[str]]] = []
    current: list[str] | None = None
    for line in path.read_text(encoding="utf-8").splitlines():
        fence = re.match(r"^ *```(\w*)\s*$", line)
        if fence and current is None:
            current = []
            blocks.append((fence.group(1), current))
        elif fence:
            current = None
        elif current is not None:
            current.append(line.strip())
    return ["\n".join(body) + "\n" for lang, body in blocks if lang in ("", "sh") and body]


def block_starting(path: Path, start: str) -> str:
    (block,) = [b for b in sh_blocks(path) if b.startswith(start)]
    return block


def bash(script: str, cwd: Path, env: dict[str, str], timeout: float = 300) -> str:
    proc = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, f"{script}\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return proc.stdout


@pytest.mark.timeout(600)
def test_the_quickstart_runs_as_written(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items()
           if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
    (tmp_path / "nnrp-conformance").symlink_to(REPO)
    install = block_starting(QUICKSTART, "python3 -m venv .venv")
    assert "pip install ./nnrp-conformance" in install
    bash(install, tmp_path, env)
    venv = tmp_path / ".venv"
    active = {**env, "VIRTUAL_ENV": str(venv), "PATH": f"{venv / 'bin'}:{env['PATH']}"}
    # the README's install, in the checkout, in that environment
    bash(block_starting(README, "pip install ."), tmp_path / "nnrp-conformance", active)
    found = subprocess.run([str(venv / "bin" / "python"), "-c",
                            "import nnrp_conformance; print(nnrp_conformance.__file__)"],
                           capture_output=True, text=True, timeout=60)
    assert str(venv) in found.stdout, found  # the fresh install, not this checkout's

    serve = block_starting(QUICKSTART, "python docs/examples/minimal_endpoint/endpoint.py")
    command = serve.splitlines()[0]
    log = tmp_path / "endpoint.out"
    with log.open("wb") as out:
        proc = start_process_group(["bash", "-euo", "pipefail", "-c", command],
                                   cwd=tmp_path / "nnrp-conformance", env=active, stdout=out,
                                   stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not (m := re.match(r"LISTENING (\S+)\n", log.read_text(errors="replace"))):
            assert proc.poll() is None, log.read_text(errors="replace")
            assert time.monotonic() < deadline, "the example endpoint never announced itself"
            time.sleep(0.1)
        address = m.group(1)
        work = tmp_path / "empty"
        work.mkdir()
        for start in ("nnrp-conformance init --target", "pytest --nnrp-target"):
            block = block_starting(QUICKSTART, start)
            assert PAGE_ADDRESS in block
            out = bash(block.replace(PAGE_ADDRESS, address), work, active)
        assert "failed" not in out.splitlines()[-1] or " 0 failed" in out, out[-3000:]
        assert (work / "manifest.json.review.md").is_file()
        for name in ("execution-plan.json", "case-results.json", "report.md", "report.html"):
            assert (work / "out" / name).is_file(), name
    finally:
        stop_process_group(proc)
