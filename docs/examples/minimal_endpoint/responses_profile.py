"""The `responses.create` side of the minimal endpoint (Level 2, docs/levels.md#level2).

This module owns the Responses request checks and the answer's plan: the output-item
lifecycle (``response.output_item.added``, the item's deltas, ``response.output_item.done``),
the ``response.usage`` event and the terminal ``response.completed`` whose body is the
Response object.  The "model" is the chat one: it echoes words of the last user input, one
word per token.  A ``tool_choice`` of ``"required"`` calls two tools (or one tool twice), so
a client sees two output items one after the other.  NNRP framing, cancels and timeouts are
the endpoint's (``endpoint.py``); the envelope is ``envelope``'s.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import time
from dataclasses import dataclass
from typing import Any

import input_faults
from chat_body import MAX_OUTPUT_TOKENS
from chat_profile import DEFAULT_OUTPUT_TOKENS, arguments_for, split3
from envelope import Plan, ProfileError, encode, is_int

#: roles of a Responses input message (OpenAI EasyInputMessage / input message item)
INPUT_ROLES = frozenset({"user", "system", "developer", "assistant"})
#: input items of a conversation that carry no text for the "model" to echo
OTHER_INPUT_ITEMS = frozenset({"function_call", "function_call_output", "reasoning"})
TOOL_CHOICES = ("auto", "none", "required")
_RESPONSE_SEQ = itertools.count(1)


def _invalid(message: str) -> ProfileError:
    return ProfileError("invalid_request", message)


_TEXT_PARTS = frozenset({"input_text", "output_text"})


def _part_text(content: Any, where: str) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise _invalid(f"{where}.content must be a string or an array of content parts")
    texts = []
    for j, part in enumerate(content):
        # OpenAI's text parts of a Responses input: input_text (and output_text, an earlier
        # answer given back); an image or file part is not one this model reads
        if not (isinstance(part, dict) and part.get("type") in _TEXT_PARTS
                and isinstance(part.get("text"), str)):
            raise _invalid(f"{where}.content[{j}] must be a text part (input_text or "
                           "output_text): this model reads text only")
        texts.append(part["text"])
    return " ".join(texts)


def input_texts(body: dict[str, Any]) -> list[tuple[str, str]]:
    """``(role, text)`` of every input message; an invalid ``input`` raises invalid_request."""
    if "input" not in body:
        raise _invalid("responses body has no 'input'")
    value = body["input"]
    if isinstance(value, str):
        return [("user", value)]
    if not isinstance(value, list) or not value:
        raise _invalid("'input' must be a string or a non-empty array of input items")
    texts = []
    for i, item in enumerate(value):
        where = f"input[{i}]"
        if not isinstance(item, dict):
            raise _invalid(f"{where} must be an object")
        kind = item.get("type", "message")
        if kind in OTHER_INPUT_ITEMS:
            continue
        if kind != "message":
            raise _invalid(f"{where}.type {kind!r} is not an input item type served here")
        if item.get("role") not in INPUT_ROLES:
            raise _invalid(f"{where}.role must be one of {sorted(INPUT_ROLES)}")
        texts.append((item["role"], _part_text(item.get("content"), where)))
    return texts


def _check_tools(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The tools the model calls, in output order (empty for a text answer)."""
    tools, choice = body.get("tools"), body.get("tool_choice")
    if tools is None or tools == []:
        if choice not in (None, "none", "auto"):
            raise _invalid("'tool_choice' asks for a tool call but there are no 'tools'")
        return []
    if not isinstance(tools, list):
        raise _invalid("'tools' must be an array")
    by_name: dict[str, dict[str, Any]] = {}
    for i, tool in enumerate(tools):
        # the flat Responses form; the nested chat form {function: {...}} is not it
        if not (isinstance(tool, dict) and tool.get("type") == "function"):
            raise _invalid(f"tools[{i}] must be a function tool")
        if not isinstance(tool.get("name"), str) or not tool["name"]:
            raise _invalid(f"tools[{i}].name must be a non-empty string")
        if "parameters" in tool and not isinstance(tool["parameters"], dict):
            raise _invalid(f"tools[{i}].parameters must be an object")
        by_name[tool["name"]] = tool
    if choice == "none":
        return []
    if choice in (None, "auto"):
        return [next(iter(by_name.values()))]
    if choice == "required":
        # Two calls, so that a client sees two output items in a row (ordering across items).
        first_two = list(by_name.values())[:2]
        return first_two * 2 if len(first_two) == 1 else first_two
    if isinstance(choice, dict) and choice.get("type") == "function":
        if choice.get("name") in by_name:
            return [by_name[choice["name"]]]
        raise _invalid(f"'tool_choice' names unknown tool {choice.get('name')!r}")
    raise _invalid(f"'tool_choice' must be one of {list(TOOL_CHOICES)} or a function")


def _check_scalars(body: dict[str, Any]) -> int | None:
    """The output token limit; raises on malformed members and on server-side state."""
    if "stream" in body and not isinstance(body["stream"], bool):
        raise _invalid("'stream' must be a boolean")
    for key in ("temperature", "top_p"):
        if key in body and (not isinstance(body[key], int | float) or isinstance(body[key], bool)):
            raise _invalid(f"'{key}' must be a number")
    if body.get("instructions") is not None and not isinstance(body["instructions"], str):
        raise _invalid("'instructions' must be a string")
    if body.get("metadata") is not None and not isinstance(body["metadata"], dict):
        raise _invalid("'metadata' must be an object")
    # This endpoint keeps no responses: say so rather than ignore the request (docs/levels.md).
    for key in ("store", "background"):
        if body.get(key) is True:
            raise _invalid(f"'{key}: true' needs server-side state, which is not kept here")
    if body.get("previous_response_id") is not None:
        raise _invalid("'previous_response_id' needs stored responses, which are not kept here")
    limit = body.get("max_output_tokens")
    if limit is None:
        return None
    if not is_int(limit) or limit <= 0:
        raise _invalid("'max_output_tokens' must be a positive integer")
    if limit > MAX_OUTPUT_TOKENS:
        raise ProfileError("context_length_exceeded", f"'max_output_tokens' {limit} exceeds "
                           f"this model's {MAX_OUTPUT_TOKENS} output tokens")
    return limit


@dataclass
class _Item:
    """One output item: its events between ``added`` and ``done``, and its final form."""

    added: dict[str, Any]
    deltas: list[dict[str, Any]]
    done: dict[str, Any]
    tokens: int


@dataclass
class _Response:
    op_id: int
    request_id: str
    model: str
    body: dict[str, Any]
    defect: str | None

    def __post_init__(self) -> None:
        # unique in this process (operation ids restart in every session), 24 hex digits
        seed = f"{next(_RESPONSE_SEQ)}:{self.op_id}:{self.request_id}"
        self.rid = hashlib.sha256(seed.encode()).hexdigest()[:24]

    def message_item(self, index: int, tokens: list[str], status: str) -> _Item:
        item_id = f"msg_{self.rid}_{index}"
        head = {"id": item_id, "type": "message", "role": "assistant"}
        deltas = [{"type": "response.output_text.delta", "index": index, "item_id": item_id,
                   "delta": token} for token in tokens]
        if self.defect == "delta-wrong-item" and len(deltas) > 1:
            deltas[1]["item_id"] = f"{item_id}_other"
        text = {"type": "output_text", "text": "".join(tokens), "annotations": []}
        return _Item(
            added={**head, "status": "in_progress", "content": []}, deltas=deltas,
            done={**head, "status": status, "content": [text]}, tokens=len(tokens),
        )

    def call_item(self, index: int, tool: dict[str, Any], prompt: str) -> _Item:
        item_id, call_id = f"fc_{self.rid}_{index}", f"call_{self.rid}_{index}"
        arguments = arguments_for(tool, prompt)
        head = {"id": item_id, "type": "function_call", "call_id": call_id, "name": tool["name"]}
        if self.defect == "tool-call-item-mismatch":
            call_id = f"{call_id}_other"  # the events' call id, consistent among themselves
        ids = {"index": index, "item_id": item_id, "call_id": call_id}
        chunks = split3(arguments)
        deltas = [
            {"type": "response.tool_call.started", **ids, "name": tool["name"]},
            *({"type": "response.tool_call.delta", **ids, "arguments_delta": c} for c in chunks),
            {"type": "response.tool_call.completed", **ids, "name": tool["name"],
             "arguments": arguments},
        ]
        return _Item(
            added={**head, "arguments": "", "status": "in_progress"}, deltas=deltas,
            done={**head, "arguments": arguments, "status": "completed"}, tokens=len(chunks),
        )

    def item_events(self, index: int, item: _Item) -> list[dict[str, Any]]:
        added = {"type": "response.output_item.added", "output_index": index, "item": item.added}
        done = {"type": "response.output_item.done", "output_index": index, "item": item.done}
        if self.defect == "item-done-early" and index == 0:
            return [added, done, *item.deltas]
        return [added, *item.deltas, done]

    def response(self, items: list[_Item], status: str, usage: dict[str, int]) -> dict[str, Any]:
        output = [dict(item.done) for item in items]
        if self.defect == "responses-item-id-mismatch":
            output = [{**item, "id": f"{item['id']}_final"} for item in output]
        body = self.body
        return {
            "id": f"resp_{self.rid}",
            "object": "response",
            "created_at": int(time.time()),
            "status": status,
            "error": None,
            "incomplete_details": {"reason": "max_output_tokens"}
            if status == "incomplete" else None,
            "instructions": body.get("instructions"),
            "max_output_tokens": body.get("max_output_tokens"),
            "model": self.model,
            "output": output,
            "parallel_tool_calls": True,
            "temperature": body.get("temperature", 1.0),
            "top_p": body.get("top_p", 1.0),
            "tool_choice": body.get("tool_choice", "auto"),
            "tools": body.get("tools") or [],
            "metadata": body.get("metadata") or {},
            "usage": {
                "input_tokens": usage["input_tokens"],
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": usage["output_tokens"],
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": usage["total_tokens"],
            },
        }

    def chat_body(self, items: list[_Item], usage: dict[str, int]) -> dict[str, Any]:
        """The responses-chat-body defect: a chat completion where the Response belongs."""
        text = "".join(part["text"] for item in items for part in item.done.get("content", ()))
        return {
            "id": f"chatcmpl-{self.rid}", "object": "chat.completion",
            "created": int(time.time()), "model": self.model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": usage["input_tokens"],
                      "completion_tokens": usage["output_tokens"],
                      "total_tokens": usage["total_tokens"]},
        }

    def plan(self) -> Plan:
        texts = input_texts(self.body)
        model = self.body.get("model")
        if not isinstance(model, str) or not model:
            raise _invalid("responses body needs a 'model' string")
        limit = _check_scalars(self.body)
        tools = _check_tools(self.body)
        if model != self.model:
            # A backend that rejects a model it does not serve (the recipes' "backend-error").
            raise ProfileError("backend_error", f"model {model!r} is not served here")
        user = [text for role, text in texts if role == "user"] or [t for _, t in texts]
        prompt = user[-1] if user else ""
        status = "completed"
        if tools:
            items = [self.call_item(i, tool, prompt) for i, tool in enumerate(tools)]
        else:
            words = prompt.split() or ["ok"]
            cycle = itertools.islice(itertools.cycle(words), limit or DEFAULT_OUTPUT_TOKENS)
            tokens = [w if i == 0 else " " + w for i, w in enumerate(cycle)]
            # OpenAI: a response that stops at max_output_tokens is "incomplete"
            status = "incomplete" if limit else "completed"
            if input_faults.responses_json_mode(self.defect, self.body):
                # JSON mode: a short object of the first three words, whole when it fits
                whole = split3(json.dumps({"answer": " ".join(words[:3])}, ensure_ascii=False),
                               min(3, len(words)) + 2)
                tokens = whole[:limit or len(whole)]
                status = "incomplete" if len(whole) > len(tokens) else "completed"
            items = [self.message_item(0, tokens, status)]
        instructions = self.body.get("instructions") or ""
        input_tokens = max(1, len(" ".join([instructions, *(t for _, t in texts)]).split()))
        output_tokens = sum(item.tokens for item in items)
        usage = {"input_tokens": input_tokens, "output_tokens": output_tokens,
                 "total_tokens": input_tokens + output_tokens}
        body = (self.chat_body(items, usage) if self.defect == "responses-chat-body"
                else self.response(items, status, usage))
        final = {"type": "response.completed", "body": body}
        if not self.body.get("stream"):
            # Generation still takes one step per token, so timeouts and cancels apply.
            return Plan(partials=[None] * output_tokens, terminal=final)
        events = [ev for i, item in enumerate(items) for ev in self.item_events(i, item)]
        if self.defect != "responses-no-usage":
            events.append({"type": "response.usage", "usage": usage})
        partials: list[bytes | None] = [encode(ev) for ev in events]
        return Plan(partials=partials, terminal=final,
                    empty_terminal=self.defect == "responses-empty-push")


def plan_responses(body: dict[str, Any], *, op_id: int, request_id: str, model: str,
                   defect: str | None) -> Plan:
    """The answer to one ``responses.create`` body (raises ProfileError when it is invalid)."""
    return _Response(op_id, request_id, model, body, defect).plan()

