"""The design's mapping table: vLLM OpenAI chunks and bodies to ``openai-compatible/1`` events.

=========================  =====================================================
vLLM output                profile event
=========================  =====================================================
``delta.content``          ``response.output_text.delta``
``delta.tool_calls``       ``response.tool_call.started`` / ``.delta`` / ``.completed``
``usage``                  ``response.usage`` (always requested from vLLM)
final body                 ``response.completed``
rejection                  ``response.error``
observed cancellation      ``response.cancelled``
=========================  =====================================================

:class:`ChunkMapper` is pure (no vLLM, no wire) so it is unit-tested with chunks recorded
from real vLLM runs; :func:`map_backend_error` turns a backend error family into the
profile's error event (:func:`backend_error_event` with vLLM's own account in the
diagnostics, :func:`stalled_event` for a backend that stopped producing), for every
operation. The handler that uses them is :mod:`..adapter.adapter`; Level 2's stream mapping is
:mod:`.responses_mapping`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from nnrp_conformance import contract

from . import profile

#: vLLM error family -> profile error code. Unknown model maps to ``backend_error`` because
#: the upstream ``backend-error`` recipe expects exactly that for a model the backend does
#: not serve; vLLM's own type and status stay in the diagnostics.
BACKEND_FAMILY_CODES: Mapping[str, str] = {
    "request_validation": contract.ERR_INVALID_REQUEST,
    "unknown_model": contract.ERR_BACKEND_ERROR,
    "context_too_long": contract.ERR_CONTEXT_LENGTH_EXCEEDED,
    "engine_failure": contract.ERR_BACKEND_ERROR,
    "internal": contract.ERR_INTERNAL,
}


@dataclass
class _ToolCallState:
    index: int
    item_id: str
    call_id: str
    name: str
    arguments: list[str] = field(default_factory=list)
    closed: bool = False


class ChunkMapper:
    """Maps one streamed chat completion, chunk by chunk, to profile events.

    It also folds the stream into the final ``chat.completion`` body that the terminal
    ``response.completed`` carries, so a streaming client gets the same final shape as a
    non-streaming one.
    """

    def __init__(self, *, attach_chunks: bool = False) -> None:
        self.attach_chunks = attach_chunks
        self._tool_calls: dict[tuple[int, int], _ToolCallState] = {}
        self._text: dict[int, list[str]] = {}
        self._finish: dict[int, str | None] = {}
        self._roles: dict[int, str] = {}
        self._usage: dict[str, int] | None = None
        self._usage_sent = False
        self._id: str | None = None
        self._model: str | None = None
        self._created: int | None = None

    # -- streaming ------------------------------------------------------------------------
    def map_chunk(self, chunk: Mapping[str, Any]) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        self._id = self._id or chunk.get("id")
        self._model = self._model or chunk.get("model")
        self._created = self._created or chunk.get("created")
        for choice in chunk.get("choices") or ():
            c_index = int(choice.get("index", 0))
            delta = choice.get("delta") or {}
            if delta.get("role"):
                self._roles[c_index] = delta["role"]
            content = delta.get("content")
            if content:
                self._text.setdefault(c_index, []).append(content)
                events.append(profile.text_delta_event(content, c_index))
            for call in delta.get("tool_calls") or ():
                events.extend(self._map_tool_call(c_index, call))
            if choice.get("finish_reason"):
                self._finish[c_index] = choice["finish_reason"]
                events.extend(self._close_tool_calls(c_index))
        usage = chunk.get("usage")
        if usage and not self._usage_sent:
            self._usage = _usage_numbers(usage)
            self._usage_sent = True
            events.append(profile.usage_event(**self._usage))
        if self.attach_chunks and events:
            events[0] = {**events[0], "openai_chunk": dict(chunk)}
        return events

    def _map_tool_call(self, c_index: int, call: Mapping[str, Any]) -> list[dict[str, Any]]:
        t_index = int(call.get("index", 0))
        key = (c_index, t_index)
        function = call.get("function") or {}
        state = self._tool_calls.get(key)
        events: list[dict[str, Any]] = []
        if state is None:
            call_id = call.get("id") or f"call_{c_index}_{t_index}"
            state = _ToolCallState(
                index=t_index,
                item_id=f"{self._id or 'chatcmpl'}:tool:{c_index}:{t_index}",
                call_id=call_id,
                name=function.get("name") or "",
            )
            self._tool_calls[key] = state
            if state.name:
                events.append(
                    profile.tool_call_started_event(
                        state.index, state.item_id, state.call_id, state.name
                    )
                )
        elif not state.name and function.get("name"):
            state.name = function["name"]
            events.append(
                profile.tool_call_started_event(
                    state.index, state.item_id, state.call_id, state.name
                )
            )
        arguments = function.get("arguments")
        if arguments:
            state.arguments.append(arguments)
            if state.name:
                events.append(
                    profile.tool_call_delta_event(
                        state.index, state.item_id, state.call_id, arguments
                    )
                )
        return events

    def _close_tool_calls(self, c_index: int | None = None) -> list[dict[str, Any]]:
        events = []
        for (ci, _), state in self._tool_calls.items():
            if state.closed or (c_index is not None and ci != c_index):
                continue
            state.closed = True
            if not state.name:
                events.append(
                    profile.tool_call_error_event(
                        state.index,
                        state.item_id,
                        state.call_id,
                        contract.ERR_TOOL_CALL_PARSE,
                        "the backend streamed tool-call arguments without a function name",
                    )
                )
                continue
            events.append(
                profile.tool_call_completed_event(
                    state.index, state.item_id, state.call_id, state.name, "".join(state.arguments)
                )
            )
        return events

    def finish(self) -> list[dict[str, Any]]:
        """Events owed at the end of the stream: tool calls the backend never closed."""
        return self._close_tool_calls()

    def final_body(self) -> dict[str, Any]:
        indexes = sorted(
            set(self._text)
            | set(self._finish)
            | set(self._roles)
            | {ci for ci, _ in self._tool_calls}
        )
        choices = []
        for ci in indexes or [0]:
            message: dict[str, Any] = {
                "role": self._roles.get(ci, "assistant"),
                "content": "".join(self._text.get(ci, [])),
            }
            calls = [s for (c, _), s in sorted(self._tool_calls.items()) if c == ci]
            if calls:
                message["tool_calls"] = [
                    {
                        "id": s.call_id,
                        "type": "function",
                        "function": {"name": s.name, "arguments": "".join(s.arguments)},
                    }
                    for s in calls
                ]
            choices.append({"index": ci, "message": message, "finish_reason": self._finish.get(ci)})
        body: dict[str, Any] = {
            "id": self._id or "chatcmpl-unknown",
            "object": "chat.completion",
            "created": self._created or int(time.time()),
            "model": self._model or "",
            "choices": choices,
        }
        if self._usage is not None:
            body["usage"] = {
                "prompt_tokens": self._usage["input_tokens"],
                "completion_tokens": self._usage["output_tokens"],
                "total_tokens": self._usage["total_tokens"],
            }
        return body

    @property
    def usage(self) -> dict[str, int] | None:
        return self._usage

    @property
    def finished(self) -> bool:
        """True once every choice seen so far has a finish_reason (and one was seen)."""
        seen = set(self._text) | set(self._roles) | {ci for ci, _ in self._tool_calls}
        return bool(self._finish) and seen <= set(self._finish)


def _usage_numbers(usage: Mapping[str, Any]) -> dict[str, int]:
    prompt = int(usage.get("prompt_tokens", usage.get("input_tokens", 0)) or 0)
    completion = int(usage.get("completion_tokens", usage.get("output_tokens", 0)) or 0)
    total = int(usage.get("total_tokens", prompt + completion) or 0)
    return {"input_tokens": prompt, "output_tokens": completion, "total_tokens": total}


def map_backend_error(family: str, message: str) -> dict[str, Any]:
    code = BACKEND_FAMILY_CODES.get(family, contract.ERR_INTERNAL)
    return profile.error_event(code, message)


def backend_error_event(exc: Any) -> dict[str, Any]:
    """A :class:`..vllm_backend.BackendError` as ``response.error``, with vLLM's own family,
    status, type and message in the diagnostics."""
    return with_backend_diagnostics(map_backend_error(exc.family, exc.message), exc)


def with_backend_diagnostics(event: dict[str, Any], exc: Any) -> dict[str, Any]:
    event.setdefault("nnrp", {}).setdefault("diagnostics", {}).update(
        {
            "backend_error": {
                "family": exc.family,
                "status": exc.status,
                "type": exc.error_type,
                "message": exc.message,
            }
        }
    )
    return event


def stalled_event(stall: float | None) -> dict[str, Any]:
    """The backend produced nothing for the stall bound: a hung engine ends in an error."""
    return map_backend_error(
        "engine_failure", f"the backend produced no output for {stall:g} s (stalled)"
    )
