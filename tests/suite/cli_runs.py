"""One CLI run of the suite against an example endpoint, for the modules that judge its case
results file: ``run_cli(tmp, endpoint, *options)`` runs ``nnrp-conformance run`` in ``tmp``
and returns its exit code and its case results, validated by their schema (never a
traceback)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from nnrp_conformance import validation


def run_cli(tmp: Path, ep: Any, *extra: str) -> tuple[int, dict[str, Any]]:
    cmd = [sys.executable, "-m", "nnrp_conformance.cli", "run", "--target", ep.address,
           "--manifest", str(ep.manifest), "--results", "r.json", *extra]
    proc = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL)
    assert "Traceback" not in proc.stderr, proc.stderr
    doc = json.loads((tmp / "r.json").read_text())
    assert validation.validate("case-results", doc) == []
    return proc.returncode, doc
