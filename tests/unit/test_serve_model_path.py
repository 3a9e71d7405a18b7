"""``vllm-nnrp serve`` refuses a model path that is no model before vLLM is imported.

Before, a missing path reached vLLM after the engine's start-up and came back as Hugging
Face's repo-id message or 30 s of retries against the hub. The command runs in a subprocess
of this (development) environment, which has no vLLM at all: the refusal must come first.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from vllm_nnrp_adapter.launch.settings import model_argument, model_path_problem


def serve(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "vllm_nnrp_adapter.cli", "serve", *argv],
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("argv", [
    ["/no/such/model"],
    ["--model", "/no/such/model", "--dtype", "bfloat16"],
    ["--model=/no/such/model"],
])
def test_a_missing_model_path_is_refused_before_vllm_starts(argv: list[str]) -> None:
    proc = serve(*argv, "--nnrp-listen", "127.0.0.1:0")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.strip() == ("vllm-nnrp serve: error: model path /no/such/model does not "
                                   "exist (a local model directory, or a Hugging Face repo id "
                                   "such as org/name)")


def test_a_folder_without_config_is_refused(tmp_path: Path) -> None:
    proc = serve(str(tmp_path))
    assert proc.returncode == 2
    assert f"model directory {tmp_path} has no config.json" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(("model", "problem"), [
    ("org/name", None),  # a repo id: vLLM's to resolve
    ("name", None),
    ("./missing", "does not exist"),
    ("../missing", "does not exist"),
    ("~/definitely-missing-model", "does not exist"),
    ("a/b/c", "does not exist"),
])
def test_what_counts_as_a_path(model: str, problem: str | None) -> None:
    found = model_path_problem(model)
    assert (found is None) if problem is None else (found is not None and problem in found)


def test_a_model_folder_is_accepted(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}", encoding="utf-8")
    assert model_path_problem(str(tmp_path)) is None
    assert model_path_problem(str(tmp_path / "config.json")) is not None  # a file


def test_the_model_argument_is_found_in_either_spelling() -> None:
    assert model_argument(["--model", "m", "--x"]) == "m"
    assert model_argument(["--x", "--model=m"]) == "m"
    assert model_argument(["--x"]) is None
