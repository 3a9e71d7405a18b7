"""Docs that run (issue 36 item 7): every command block of README.md and docs/quickstart.md is
run verbatim by a named test, or is one of the two commands no test can run inside the test
command (the test command itself, and the release), which are checked for what they are.

A new command block in either page fails here until a test runs it; the README's time and
disk figures are the release's measured cost, ``reports/release-cost.json``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
QUICKSTART = REPO / "docs" / "quickstart.md"
COST = REPO / "reports" / "release-cost.json"

_QS = "tests/real_vllm/test_documented_quickstart.py"
#: each command block (first line) -> where it runs verbatim, or why it cannot
WHERE: dict[str, str] = {
    "pytest --nnrp-target=127.0.0.1:4433 --manifest=manifests/vllm-nnrp-adapter.json":
        "tests/real_vllm/test_documented_serve.py",
    "bash scripts/release": "the release itself (its cost: reports/release-cost.json): artifacts/release/; "
                            "scripts/regenerate-evidence records it in reports/evidence/",
    "bash scripts/test": "the test command itself: .ci/run",
    "pip install .  # the suite (and the adapter, without vLLM)": _QS,
    # vLLM's PyPI wheels are GPU builds and this machine has none; the CPU path the README
    # names instead, scripts/vllm-venv, builds the environment every real-vLLM test runs on
    'pip install ".[vllm]"': "not here: needs a GPU (scripts/vllm-venv is the CPU path)",
    "python3 -m venv .venv": _QS,
    "python docs/examples/minimal_endpoint/endpoint.py --listen 127.0.0.1:0": _QS,
    "nnrp-conformance init --target 127.0.0.1:40613 --out manifest.json": _QS,
    "pytest --nnrp-target 127.0.0.1:40613 --manifest manifest.json \\": _QS,
}


def command_blocks(path: Path) -> list[str]:
    """The fenced blocks that hold commands (```, ```sh, ```bash; not text, json or yaml)."""
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
    return ["\n".join(body) for lang, body in blocks
            if lang in ("", "sh", "bash") and body
            and not body[0].startswith(("suite/", "{"))]  # a file tree, a document


def first_command(block: str) -> str:
    line = block.strip().splitlines()[0]
    return re.sub(r" {2,}#", "  #", line.rstrip())


def test_every_documented_command_is_run_by_a_test() -> None:
    found = {first_command(b) for page in (README, QUICKSTART) for b in command_blocks(page)}
    assert found == set(WHERE), sorted(found ^ set(WHERE))
    for where in set(WHERE.values()):
        if where.startswith("tests/"):
            assert (REPO / where).is_file(), where


def test_the_two_commands_no_test_can_run_are_what_they_say() -> None:
    # the test command is CI's entry point, exactly
    assert "exec bash scripts/test" in (REPO / ".ci" / "run").read_text(encoding="utf-8")
    # and it tests the newest tested version only, as the README says
    from vllm_nnrp_adapter import NEWEST_TESTED

    assert NEWEST_TESTED == "0.32.0"
    assert "real-vLLM tests on the newest tested\nversion, 0.32.0" in \
        README.read_text(encoding="utf-8")
    # the release ran, every step ok: its last evidence (a list of steps before release runs
    # recorded themselves, {"run", "steps"} since)
    recorded = json.loads((REPO / "reports" / "evidence" / "release-run.json").read_text())
    steps = recorded["steps"] if isinstance(recorded, dict) else recorded
    assert steps and all(s["ok"] for s in steps)


def test_the_readmes_time_and_disk_are_the_releases_measured_cost() -> None:
    cost = json.loads(COST.read_text(encoding="utf-8"))
    text = " ".join(README.read_text(encoding="utf-8").split())
    assert f"about {cost['disk_gb']} GB of disk for the release's four vLLM environments " \
        f"({', '.join(cost['environments'][:-1])}, {cost['environments'][-1]};" in text
    assert f"It takes about {cost['cold_minutes']} minutes on a cold machine" in text
    assert len(cost["environments"]) == 4
    # no other figure of either kind anywhere in the README
    assert re.findall(r"\b\d+ GB\b", text) == [f"{cost['disk_gb']} GB"]
    assert re.findall(r"\b\d+ minutes\b", text) == [f"{cost['cold_minutes']} minutes"]
