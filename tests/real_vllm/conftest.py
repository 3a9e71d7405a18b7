"""Real-vLLM tests: the vLLM CPU venvs are built by scripts/vllm-venv (the test command does).

With NNRP_REQUIRE_REAL_VLLM=1 (set by scripts/test, hence CI) a missing venv is a failure,
not a skip: the real path must never silently drop out of the run.
"""

from __future__ import annotations

import os

import pytest

from vllm_nnrp_adapter import CURRENT_LINE_TESTED, LOWER_BOUND_TESTED
from vllm_nnrp_adapter.conformance import ConformanceSetupError, tiny_model, vllm_python

VERSIONS = (LOWER_BOUND_TESTED, CURRENT_LINE_TESTED)


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
    model = tiny_model(python, tmp_path_factory.getbasetemp() / f"tiny-model-{version}")
    return {"version": version, "python": python, "model": model}
