"""The end-to-end smoke on real vLLM: a handful of requests (streamed text, non-streamed,
a forced tool call, usage) each judged by what arrived, recorded as case results
(``DIR/smoke.json``) for the release gate to re-judge (``nnrp_conformance.gate.smoke``)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import anyio

from nnrp_conformance import contract, validation
from nnrp_conformance.client import NnrpClient
from nnrp_conformance.gate.smoke import sequence_problems

from ..lib.streams import (
    TOOLS,
    StreamSample,
    chat_envelope,
    engine_settled,
    late_frames,
    run_stream,
)

SMOKE_FILE = "smoke.json"
#: every smoke request (gate-judged or not) with its local verdict; the gate ignores it
SMOKE_CHECKS_FILE = "smoke-checks.json"
SMOKE_ADAPTER = "vllm-nnrp-adapter"


@dataclass
class SmokeCase:
    id: str
    description: str
    envelope: dict[str, Any]
    #: the terminal this request must end in
    expect: str = contract.TERMINAL_SUCCESS
    #: the gate's smoke rule (a successful streamed text answer) applies to it
    gated: bool = True
    cancel_after: int | None = None
    tool_name: str | None = None


def smoke_cases(model: str | None) -> list[SmokeCase]:
    return [
        SmokeCase(
            "smoke.stream_text",
            "streaming text, runs to max_tokens",
            chat_envelope(max_tokens=24, model=model, request_id="smoke-stream"),
        ),
        SmokeCase(
            "smoke.stream_text_stop",
            "streaming text with n=1 and a stop sequence that never matches",
            chat_envelope(
                max_tokens=16,
                model=model,
                request_id="smoke-stream-stop",
                stop=["\u2603\u2603\u2603"],
                n=1,
            ),
        ),
        SmokeCase(
            "smoke.non_streaming",
            "non-streaming answer: one response.completed carrying the chat completion",
            chat_envelope(max_tokens=16, stream=False, model=model, request_id="smoke-unary"),
            gated=False,
        ),
        SmokeCase(
            "smoke.forced_tool_call",
            "streamed tool call forced by a named tool_choice",
            # no ignore_eos: the grammar ends the answer with EOS once the JSON is complete
            chat_envelope(
                max_tokens=64,
                model=model,
                request_id="smoke-tool",
                tools=TOOLS,
                tool_choice={"type": "function", "function": {"name": "lookup"}},
                ignore_eos=False,
            ),
            gated=False,
            tool_name="lookup",
        ),
        SmokeCase(
            "smoke.cancel",
            "client FRAME_CANCEL after 5 text deltas of a long answer",
            chat_envelope(max_tokens=400, model=model, request_id="smoke-cancel"),
            expect=contract.TERMINAL_CANCELLED,
            gated=False,
            cancel_after=5,
        ),
    ]


def judge_smoke_case(case: SmokeCase, sample: StreamSample) -> list[str]:
    """Why this recorded answer is not what its smoke request must produce ([] = passed)."""
    events = sample.events
    problems = [f"undecodable frame: {e}" for e in sample.decode_errors]
    if sample.outcome != case.expect:
        problems.append(
            f"ended in {sample.outcome!r} ({sample.delivery}), expected {case.expect!r}"
        )
    if case.gated:
        return problems + sequence_problems(events, str(sample.outcome))
    for i, ev in enumerate(events):
        problems += [f"event #{i}: {v}" for v in validation.validate_event(ev)]
    kinds = [ev.get("type") for ev in events]
    terminals = [i for i, k in enumerate(kinds) if k in contract.TERMINAL_EVENT_TYPES]
    if sample.after_terminal:
        problems.append(f"{sample.after_terminal} frame(s) after the terminal")
    if case.expect == contract.TERMINAL_CANCELLED:
        # a cancel may end in a drop without an event body; if there is one it is last
        if terminals and (terminals != [len(kinds) - 1] or kinds[-1] != contract.EV_CANCELLED):
            problems.append(f"terminal events {terminals} of {kinds}: one response.cancelled, last")
        return problems
    if terminals != [len(kinds) - 1] or kinds[-1] != contract.EV_COMPLETED:
        problems.append(f"expected exactly one response.completed, last; got {kinds}")
        return problems
    if case.tool_name:
        # the gate's sequence rule minus its text-delta clause: a forced call carries no text
        problems += [
            p
            for p in sequence_problems(events, str(sample.outcome))
            if contract.EV_OUTPUT_TEXT_DELTA not in p
        ]
        names = [ev.get("name") for ev in events if ev.get("type") == contract.EV_TOOL_CALL_STARTED]
        if names != [case.tool_name]:
            problems.append(f"tool calls started: {names}, expected [{case.tool_name!r}]")
        done = [ev for ev in events if ev.get("type") == contract.EV_TOOL_CALL_COMPLETED]
        for ev in done:
            try:
                json.loads(ev.get("arguments", ""))
            except ValueError:
                problems.append(f"tool call arguments are not JSON: {ev.get('arguments')!r}")
        if not done:
            problems.append("no response.tool_call.completed")
        return problems
    if not case.envelope["body"].get("stream"):
        response = events[-1].get("response") or events[-1].get("body") or {}
        choices = response.get("choices") if isinstance(response, Mapping) else None
        message = (choices or [{}])[0].get("message") if choices else None
        if not isinstance(message, Mapping) or not message.get("content"):
            problems.append("response.completed carries no choices[0].message.content")
    return problems


def smoke_result(
    case: SmokeCase, sample: StreamSample, problems: Sequence[str], vllm_version: str
) -> dict[str, Any]:
    """One case-results item: outcome, terminal, the full events, diagnostics.vllm."""
    terminal = sample.outcome if sample.outcome in contract.TERMINALS else contract.TERMINAL_ERROR
    out: dict[str, Any] = {
        "id": case.id,
        "outcome": contract.OUTCOME_FAILED if problems else contract.OUTCOME_PASSED,
        "terminal": terminal,
        "events": list(sample.events),
        "diagnostics": {
            "vllm": vllm_version,
            "description": case.description,
            "request": case.envelope,
            "delivery": sample.delivery,
            "duration_ms": None if sample.total_ns is None else round(sample.total_ns / 1e6, 3),
            "ttft_ms": None if sample.ttft_ns is None else round(sample.ttft_ns / 1e6, 3),
            "text_deltas": len(sample.text_ns),
            "events_after_cancel": sample.after_cancel,
            "events_after_terminal": sample.after_terminal,
            "gated": case.gated,
            "server": sample.diagnostics,
        },
    }
    if problems:
        out["message"] = "; ".join(problems)[:65536]
    return out


def smoke_document(results: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A case-results document (validated) holding ``results``."""
    doc = {
        "$schema": validation.schema_uri("case-results"),
        "profile": contract.PROFILE,
        "schema_version": contract.SCHEMA_VERSION,
        "adapter": SMOKE_ADAPTER,
        "results": [dict(r) for r in results],
    }
    validation.check("case-results", doc)
    return doc


async def run_smoke(
    client: NnrpClient, model: str | None, vllm_version: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(gated results for smoke.json, every result for smoke-checks.json)."""
    everything: list[dict[str, Any]] = []
    for case in smoke_cases(model):
        sample = await run_stream(client, case.envelope, cancel_after=case.cancel_after)
        await anyio.sleep(0.2)
        sample.after_terminal = late_frames(sample)
        problems = judge_smoke_case(case, sample)
        everything.append(smoke_result(case, sample, problems, vllm_version))
    left = await engine_settled(client)
    if left != 0:
        everything[-1].setdefault("message", "")
        everything[-1]["outcome"] = contract.OUTCOME_FAILED
        everything[-1]["message"] += f"; the engine still holds {left} request(s) afterwards"
    gated = [r for r, c in zip(everything, smoke_cases(model), strict=True) if c.gated]
    return gated, everything
