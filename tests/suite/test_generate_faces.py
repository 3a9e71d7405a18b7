"""Generated requests through both faces against the correct example endpoint: the pytest
plugin under xdist without a seed prints the seed it drew (and its workers draw the same
requests as the controller planned), and the CLI given that seed draws the same requests."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.wire
REPO = Path(__file__).resolve().parents[2]
ONE_RECIPE = REPO / "recipes" / "level1" / "capabilities-document.yaml"
CLI = [sys.executable, "-c", "import sys; from nnrp_conformance.cli import main; sys.exit(main())"]
CASES = 10


def _generated(doc: dict[str, Any]) -> list[tuple[str, Any]]:
    return [(c["id"], c["request"]) for c in doc["cases"] if c["id"].startswith("generated.")]


def test_the_printed_seed_draws_the_same_requests_on_either_face(
        pytester: pytest.Pytester, endpoint: Any, args_for: Any, tmp_path: Path) -> None:
    result = pytester.runpytest_subprocess(
        *args_for(endpoint, "--recipes", str(ONE_RECIPE), "--nnrp-generate", str(CASES),
                  "-n", "2"))
    out = result.stdout.str()
    assert result.ret == 0, out
    result.assert_outcomes(passed=CASES + 1)
    seed = re.search(r"generated 10 requests from seed (\d+) \(--nnrp-seed \1 draws them", out)
    assert seed, out
    planned = _generated(json.loads((pytester.path / "execution-plan.json").read_text()))
    assert len(planned) == CASES

    done = subprocess.run([*CLI, "run", "--target", endpoint.address, "--manifest",
                           str(endpoint.manifest), "--recipes", str(ONE_RECIPE), "--generate",
                           str(CASES), "--seed", seed.group(1)], capture_output=True, text=True,
                          cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert f"from seed {seed.group(1)}" in done.stdout.splitlines()[0]
    again = json.loads((tmp_path / "nnrp-conformance" / "execution-plan.json").read_text())
    assert _generated(again) == planned


def test_a_generating_pytest_run_draws_without_hypothesis_warnings(
        pytester: pytest.Pytester, endpoint: Any, args_for: Any) -> None:
    """hypothesis warns ("Slow code in plugin") about any draw during pytest's initialization,
    which ends at the session's start: the plugin draws after it, at the report header."""
    args = [a for a in args_for(endpoint, "--recipes", str(ONE_RECIPE), "--nnrp-generate", "3",
                                "--nnrp-seed", "1") if a not in ("-p", "no:hypothesispytest")]
    result = pytester.runpytest_subprocess(*args, "-p", "hypothesispytest")
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == 0, out
    result.assert_outcomes(passed=4)
    assert "generated 3 requests from seed 1" in out
    assert "HypothesisSideeffectWarning" not in out and "Slow code" not in out, out[:3000]
