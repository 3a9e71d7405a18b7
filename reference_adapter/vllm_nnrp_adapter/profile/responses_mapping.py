"""Level 2's mapping table: vLLM's Responses stream events to ``openai-compatible/1`` events.

The table is docs/levels.md#level2-events; this module is it, event by event:

==========================================  ==============================================
vLLM Responses event                        profile event
==========================================  ==============================================
``response.created`` / ``.in_progress``     not sent (the NNRP operation is the lifecycle)
``response.output_item.added``              ``response.output_item.added``; for a
                                            ``function_call`` item then
                                            ``response.tool_call.started``
``response.output_text.delta``              ``response.output_text.delta`` with ``item_id``
``response.reasoning_text.delta``           ``response.reasoning_text.delta``
``response.function_call_arguments.delta``  ``response.tool_call.delta`` (``call_id`` from
                                            the item: vLLM's delta has none)
``response.function_call_arguments.done``   ``response.tool_call.completed``
``response.output_item.done``               ``response.output_item.done``
``response.content_part.*``, ``*.done``     not sent (``output_item.done`` carries the item)
``response.completed`` / ``.incomplete``    ``response.usage``, then (at the stream's end)
                                            the terminal ``response.completed {body}``
``response.failed``, ``error``              terminal ``response.error``
==========================================  ==============================================

Two things vLLM does that the table alone would pass on wrongly, and what is done here:

* vLLM sends ``function_call_arguments.done`` only when it streamed an argument delta; a call
  whose arguments came without one is closed at its ``output_item.done`` (its arguments, when
  not empty, as one delta first, so the completed arguments are still the deltas' sum).
* vLLM builds the final Response's ``output`` by parsing the whole text again, with new item
  ids (and call ids): the items the stream announced would not be found in the body. The body
  of a streamed answer therefore carries the streamed items as ``output_item.done`` gave them
  (the same items, the ids the client saw); everything else in it is vLLM's.

:class:`ResponsesMapper` is pure (no vLLM, no wire), unit-tested on event sequences recorded
from real vLLM (tests/fixtures/vllm-responses/). The handler that uses it is
:mod:`..adapter.handlers`; the chat path's mapping is :mod:`.mapping`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from . import profile
from .mapping import _usage_numbers, map_backend_error

__all__ = ["IGNORED_EVENT_TYPES", "ResponsesMapper"]

#: vLLM events the profile does not send (the table's "not sent" rows)
IGNORED_EVENT_TYPES: frozenset[str] = frozenset(
    {
        "response.created",
        "response.in_progress",
        "response.queued",
        "response.content_part.added",
        "response.content_part.done",
        "response.output_text.done",
        "response.reasoning_part.added",
        "response.reasoning_part.done",
        "response.reasoning_text.done",
    }
)


@dataclass
class _Call:
    """One function_call item, from its ``added`` to its ``done``."""

    index: int
    item_id: str
    call_id: str
    name: str
    arguments: list[str] = field(default_factory=list)
    completed: bool = False


class ResponsesMapper:
    """Maps one streamed Responses answer, event by event, to profile events.

    After the stream: :attr:`error` is the terminal ``response.error`` when vLLM reported a
    failure, else :meth:`completed_event` is the terminal (None when vLLM's stream ended
    without ``response.completed``: a cut-short answer). :attr:`usage` is the usage sent.
    """

    def __init__(self, *, attach_events: bool = False) -> None:
        self.attach_events = attach_events
        self._calls: dict[str, _Call] = {}
        self._done_items: dict[int, dict[str, Any]] = {}
        self._response: dict[str, Any] | None = None
        self.usage: dict[str, int] | None = None
        self.error: dict[str, Any] | None = None
        self._handlers: dict[str, Callable[[Mapping[str, Any]], list[dict[str, Any]]]] = {
            "response.output_item.added": self._item_added,
            "response.output_item.done": self._item_done,
            "response.output_text.delta": self._text_delta,
            "response.reasoning_text.delta": self._reasoning_delta,
            "response.function_call_arguments.delta": self._arguments_delta,
            "response.function_call_arguments.done": self._arguments_done,
            "response.completed": self._completed,
            "response.incomplete": self._completed,
            "response.failed": self._failed,
            "error": self._failed,
        }

    def map_event(self, event: Mapping[str, Any]) -> list[dict[str, Any]]:
        handler = self._handlers.get(event.get("type", ""))
        if handler is None:
            return []  # the table's "not sent" rows, and events of tools not offered here
        events = handler(event)
        if self.attach_events and events:
            events[0] = {**events[0], "openai_chunk": dict(event)}
        return events

    # -- items ----------------------------------------------------------------------------
    def _item_added(self, event: Mapping[str, Any]) -> list[dict[str, Any]]:
        index, item = int(event["output_index"]), event["item"]
        events = [profile.output_item_added_event(index, item)]
        if item.get("type") == "function_call":
            call = _Call(index, item["id"], item.get("call_id") or item["id"], item.get("name", ""))
            self._calls[call.item_id] = call
            events.append(
                profile.tool_call_started_event(index, call.item_id, call.call_id, call.name)
            )
        return events

    def _item_done(self, event: Mapping[str, Any]) -> list[dict[str, Any]]:
        index, item = int(event["output_index"]), event["item"]
        events: list[dict[str, Any]] = []
        call = self._calls.get(item.get("id", ""))
        if call is not None and not call.completed:
            final = item.get("arguments") or ""
            if final and not call.arguments:
                call.arguments.append(final)
                events.append(
                    profile.tool_call_delta_event(index, call.item_id, call.call_id, final)
                )
            events.append(self._complete(call))
        self._done_items[index] = dict(item)
        events.append(profile.output_item_done_event(index, item))
        return events

    # -- deltas ---------------------------------------------------------------------------
    def _text_delta(self, event: Mapping[str, Any]) -> list[dict[str, Any]]:
        return [
            profile.item_text_delta_event(
                int(event["output_index"]), event["item_id"], event.get("delta") or ""
            )
        ]

    def _reasoning_delta(self, event: Mapping[str, Any]) -> list[dict[str, Any]]:
        return [
            profile.reasoning_text_delta_event(
                int(event["output_index"]), event["item_id"], event.get("delta") or ""
            )
        ]

    def _arguments_delta(self, event: Mapping[str, Any]) -> list[dict[str, Any]]:
        call = self._calls.get(event.get("item_id", ""))
        delta = event.get("delta") or ""
        if call is None or call.completed or not delta:
            return []  # vLLM opens every call with its item first; nothing to attach it to
        call.arguments.append(delta)
        return [profile.tool_call_delta_event(call.index, call.item_id, call.call_id, delta)]

    def _arguments_done(self, event: Mapping[str, Any]) -> list[dict[str, Any]]:
        call = self._calls.get(event.get("item_id", ""))
        if call is None or call.completed:
            return []
        return [self._complete(call)]

    def _complete(self, call: _Call) -> dict[str, Any]:
        call.completed = True
        # the deltas' sum: what tool_call.completed means (spec §4), and vLLM's own
        # accumulation of the same deltas
        return profile.tool_call_completed_event(
            call.index, call.item_id, call.call_id, call.name, "".join(call.arguments)
        )

    # -- the end --------------------------------------------------------------------------
    def _completed(self, event: Mapping[str, Any]) -> list[dict[str, Any]]:
        response = dict(event.get("response") or {})
        if event.get("type") == "response.incomplete":
            response.setdefault("status", "incomplete")
        if self._done_items:
            response["output"] = [self._done_items[i] for i in sorted(self._done_items)]
        self._response = response
        self.usage = self.usage_of(response)
        return [] if self.usage is None else [profile.usage_event(**self.usage)]

    @staticmethod
    def usage_of(response: Mapping[str, Any]) -> dict[str, int] | None:
        """The profile's three counters from a Response object's ``usage`` (same names)."""
        usage = response.get("usage")
        return _usage_numbers(usage) if isinstance(usage, Mapping) else None

    def _failed(self, event: Mapping[str, Any]) -> list[dict[str, Any]]:
        error = event.get("error") or (event.get("response") or {}).get("error") or {}
        message = error.get("message") if isinstance(error, Mapping) else None
        self.error = map_backend_error(
            "engine_failure", str(message or event.get("message") or "vLLM's Responses stream failed")
        )
        return []

    @property
    def finished(self) -> bool:
        """True once vLLM's stream delivered its final Response (or its failure)."""
        return self._response is not None or self.error is not None

    def completed_event(self) -> dict[str, Any] | None:
        """The terminal ``response.completed``, once the final Response arrived."""
        return None if self._response is None else profile.completed_event(self._response)
