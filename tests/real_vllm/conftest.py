"""Real-vLLM tests: the vLLM CPU venvs are built by scripts/vllm-venv (the test command does).

With NNRP_REQUIRE_REAL_VLLM=1 (set by scripts/test, hence CI) a missing venv is a failure,
not a skip: the real path must never silently drop out of the run.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from vllm_nnrp_adapter import CURRENT_LINE_TESTED, LOWER_BOUND_TESTED
from vllm_nnrp_adapter.conformance import (
    ConformanceSetupError,
    engine_environment,
    tiny_model,
    vllm_python,
)

VERSIONS = (LOWER_BOUND_TESTED, CURRENT_LINE_TESTED)
REPO = Path(__file__).resolve().parents[2]
# Engine start-up, the tiny model and vLLM's warm-up run inside the first test of a module.
REAL_VLLM_TIMEOUT_S = 900


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(item.path).parents and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(REAL_VLLM_TIMEOUT_S))


def _refuse_other_checkouts(python: str) -> None:
    """The venv must run this checkout's code, not another clone's (a shared cache once did)."""
    probe = subprocess.run(
        [python, "-c", "import vllm_nnrp_adapter, nnrp_conformance as s; "
                       "print(vllm_nnrp_adapter.__file__); print(s.__file__)"],
        capture_output=True, text=True, timeout=120, env=engine_environment(python),
    )
    files = probe.stdout.split()
    if probe.returncode != 0 or len(files) != 2:
        pytest.fail(f"{python} cannot import the project: {probe.stderr.strip()[-2000:]}")
    foreign = [f for f in files if REPO not in Path(f).resolve().parents]
    if foreign:
        pytest.fail(f"{python} runs another checkout's code ({foreign}), not {REPO}: "
                    f"run scripts/vllm-venv VERSION in this checkout")


def _python_for(version: str) -> str:
    try:
        return vllm_python(version, build=False)
    except ConformanceSetupError as exc:
        if os.environ.get("NNRP_REQUIRE_REAL_VLLM") == "1":
            pytest.fail(f"real vLLM {version} is required here: {exc}")
        pytest.skip(str(exc))


@pytest.fixture(scope="session", params=VERSIONS, ids=lambda v: f"vllm-{v}")
def vllm_env(request, tmp_path_factory):
    version = request.param
    python = _python_for(version)
    _refuse_other_checkouts(python)
    model = tiny_model(python, tmp_path_factory.getbasetemp() / f"tiny-model-{version}")
    return {"version": version, "python": python, "model": model}
