"""A generating run says what it saved, counted by what each file shows (issue 47 item 3): a
non-strict generated case is shrunk and saved as well as a failed one, so "shrunk failures are
saved" miscounted (measured: 125 files for 9 failures). Over the real wire, against the
example endpoint with a variant whose every answer is non-strict (``upstream-names``: a
top-level ``diagnostics`` field) and a defect that fails the invalid requests
(``bad-error-body``)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.wire

RECIPE = Path(__file__).resolve().parents[2] / "recipes" / "level1" / "chat-streaming-text.yaml"


def test_the_saved_files_are_counted_as_failures_and_as_recommendations(
        tmp_path: Path, start_endpoint: Any) -> None:
    with start_endpoint(tmp_path, "bad-error-body", ("--variant", "upstream-names")) as ep:
        proc = subprocess.run(
            [sys.executable, "-m", "nnrp_conformance.cli", "run", "--target", ep.address,
             "--manifest", str(ep.manifest), "--results", "r.json", "--recipes", str(RECIPE),
             "--generate", "8", "--seed", "5", "--model", "minimal-model"],
            cwd=tmp_path, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert "Traceback" not in proc.stderr, proc.stderr
    # upstream-names serves no discovery operation: the CLI warns first, then the seed line
    assert "each failed or non-strict one is shrunk and saved in" in proc.stdout
    results = json.loads((tmp_path / "r.json").read_text())["results"]
    saved = [r for r in results if "recipe_file" in r["diagnostics"].get("generated", {})]
    failed = [r for r in saved if r["outcome"] == "failed"]
    files = sorted((tmp_path / "generated-recipes").glob("*.yaml"))
    assert failed and len(failed) < len(saved) == len(files)
    line = re.search(r"saved (\d+) generated requests in (\S+): (\d+) failed, (\d+) non-strict "
                     r"\(recommendations shown, not failures\)", proc.stdout)
    assert line, proc.stdout[-2000:]
    assert [int(n) for n in line.group(1, 3, 4)] == \
        [len(files), len(failed), len(files) - len(failed)]
    assert Path(line.group(2)) == tmp_path / "generated-recipes"
