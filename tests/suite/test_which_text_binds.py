"""Which text binds (issue 36 item 1), over the real wire.

Only the profile's normative documents bind; upstream's recipes are the authors' examples.
An endpoint written from the normative documents alone that sends OpenAI's own error codes
(``missing_required_parameter``, ``unsupported_model``: the example endpoint's
``openai-codes`` variant) and the example endpoint, which sends the codes upstream's recipes
expect (``missing_messages``, ``backend_error``), get the same default verdicts: the same
outcome for every case and the same exit code. ``--strict`` tells them apart, and what fails
names upstream's recipe; the case results keep upstream's own outcome.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.wire

UPSTREAM_RECIPES = Path(__file__).resolve().parents[2] / "recipes" / "upstream"


@pytest.fixture(scope="module")
def endpoints(tmp_path_factory: pytest.TempPathFactory, endpoint: Any,
              start_endpoint: Any) -> Iterator[dict[str, Any]]:
    """The example endpoint (upstream's codes) and its ``openai-codes`` variant."""
    with start_endpoint(tmp_path_factory.mktemp("openai-codes"), None,
                        ("--variant", "openai-codes")) as openais:
        yield {"upstream": endpoint, "openai": openais}


def run(tmp: Path, ep: Any, *args: str) -> tuple[int, dict[str, dict[str, Any]], str]:
    """One CLI run of the default selection: exit code, results by case id, output."""
    proc = subprocess.run(
        [sys.executable, "-m", "nnrp_conformance.cli", "run", "--target", ep.address,
         "--manifest", str(ep.manifest), "--model", "minimal-model", "--results", "r.json",
         "--timeout", "10", *args],
        cwd=tmp, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert "Traceback" not in proc.stderr, proc.stderr
    doc = json.loads((tmp / "r.json").read_text())
    return proc.returncode, {r["id"]: r for r in doc["results"]}, proc.stdout + proc.stderr


def test_openais_codes_and_upstreams_get_the_same_default_verdicts(
        tmp_path: Path, endpoints: dict[str, Any]) -> None:
    (tmp_path / "u").mkdir()
    (tmp_path / "o").mkdir()
    code_u, up, out_u = run(tmp_path / "u", endpoints["upstream"])
    code_o, oa, out_o = run(tmp_path / "o", endpoints["openai"])
    assert code_u == code_o == 0, out_u + out_o
    assert {k: r["outcome"] for k, r in up.items()} == {k: r["outcome"] for k, r in oa.items()}
    # the OpenAI-codes endpoint really sent its codes where upstream's recipes expect theirs
    beyond = {k for k, r in oa.items() for f in r["diagnostics"].get("findings", ())
              if f["rule"] == "error.code"}
    assert beyond == {"openai-compatible.chat.invalid-body",
                      "openai-compatible.chat.backend-error"}, out_o
    for case_id in beyond:
        assert oa[case_id]["diagnostics"]["verdict"] == "non-strict"
        # the case result keeps what upstream's own runner says
        assert oa[case_id]["diagnostics"]["upstream_outcome"] == "failed"
        assert up[case_id]["diagnostics"]["upstream_outcome"] == "passed"
    assert "upstream's runner would fail this" in out_o


def test_strict_tells_them_apart_and_names_upstreams_recipe(
        tmp_path: Path, endpoints: dict[str, Any]) -> None:
    (tmp_path / "u").mkdir()
    (tmp_path / "o").mkdir()
    only = ("--strict", "--recipes", str(UPSTREAM_RECIPES))  # the cases that differ, strict
    code_u, up, out_u = run(tmp_path / "u", endpoints["upstream"], *only)
    code_o, oa, out_o = run(tmp_path / "o", endpoints["openai"], *only)
    assert code_u == 0, out_u
    assert code_o == 1, out_o
    for case_id, recipe, want, seen in (
            ("openai-compatible.chat.invalid-body", "chat-invalid-body.json",
             "missing_messages", "missing_required_parameter"),
            ("openai-compatible.chat.backend-error", "chat-backend-error.json",
             "backend_error", "unsupported_model")):
        assert oa[case_id]["outcome"] == "failed", out_o
        (finding,) = [f for f in oa[case_id]["diagnostics"]["findings"]
                      if f["rule"] == "error.code"]
        assert finding["level"] == "failed"
        assert f"upstream's recipe {recipe} expects error.code {want!r}, seen {seen!r}" \
            in finding["message"]
        assert finding["spec"].endswith(f"upstream recipe {recipe}")
        assert up[case_id]["outcome"] == "passed"
