"""The capacity benchmark's step over the real wire: N sessions streaming at once through the
adapter handler (scripted backend), every answer counted as clean or as an error by kind, and
the document naming the largest step below the first one with an error."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from nnrp_conformance import validation
from vllm_nnrp_adapter.benchmark.soak import capacity

sys.path.insert(0, str(Path(__file__).parent))
from conftest import chat, envelope, serve_adapter

pytestmark = [pytest.mark.anyio, pytest.mark.wire]


async def test_a_step_counts_clean_answers_and_errors_by_kind() -> None:
    async with serve_adapter() as a:
        clean = await capacity.run_step(a.address, 4, 2, lambda: envelope(chat("short")))
        failing = await capacity.run_step(a.address, 6, 1, lambda: envelope(chat("raise")))
        assert await a.settle() == []
    assert (clean.answers, clean.failed, clean.tokens) == (8, 0, 8 * 3)
    assert len(clean.ttft_ms) == 8 and clean.wall_s > 0
    # the backend error reaches the client as the profile's error terminal: never clean
    assert failing.answers == 0 and failing.failed == 6
    assert set(failing.errors) == {"terminal_error"}

    # steps ascend: the answer is the largest step below the first one with an error
    doc = capacity.build_document([clean, failing], 2, "scripted", {})
    assert validation.validate("benchmark-results", doc) == []
    best = doc["metrics"][0]
    assert best["name"] == "capacity.max_sessions_without_errors" and best["median"] == 4
    assert doc["parameters"]["first_step_with_errors"] == 6
    assert doc["parameters"]["sessions_6.errors"] == 6
    assert any("terminal_error ×6" in n for n in doc["notes"])


async def test_sessions_that_cannot_be_opened_are_errors_of_the_step() -> None:
    async with serve_adapter() as a:
        address = a.address
    # the server is gone: nothing listens there any more
    step = await capacity.run_step(address, 3, 1, lambda: envelope(chat("short")))
    assert step.answers == 0 and step.errors["session_not_opened"] == 3
    doc = capacity.build_document([step], 1, "scripted", {})
    assert doc["metrics"][0]["median"] == 0
