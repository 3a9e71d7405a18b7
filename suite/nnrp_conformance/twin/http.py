"""The HTTP side of the twin: one request body sent to the provider's own OpenAI-compatible
HTTP API, as that API's users send it, and what came back.

Owns: the operation -> HTTP path table (``chat.completions.create`` -> ``POST
/v1/chat/completions``, ``responses.create`` -> ``POST /v1/responses``, ``embeddings.create``
-> ``POST /v1/embeddings``, ``models.list`` -> ``GET /v1/models``), the base URL rule (``URL``
or ``URL/v1`` alike), sending the request body byte for byte (a body the profile calls invalid
is sent as it is: the comparison is of the two answers to the same bytes), reading a streamed
answer as Server-Sent Events (``stream: true``) and a plain one as JSON, and
:class:`HttpAnswer`, the raw result: status, JSON body or the SSE events' data, or why there
was no answer.

httpx, not the official ``openai`` client: the client's typed methods build the body from
arguments (an invalid body cannot be sent as it is) and shape the answer into its own models;
httpx is the HTTP stack that client is built on (same connection handling, same headers
here: JSON, and ``Authorization: Bearer $OPENAI_API_KEY`` when that is set, as the client
does). It is an extra (``nnrp-conformance[http-twin]``): :func:`load_httpx` says how to get
it. The SSE lines are read here (``data:`` fields joined, comments and other fields ignored,
an event ends at a blank line: the WHATWG event-stream rules a chat stream uses) rather than
with one more dependency; an OpenAI stream's events are single ``data:`` lines.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from nnrp_conformance import contract

__all__ = ["HTTP_ROUTES", "HttpAnswer", "HttpTwinUnavailable", "load_httpx", "route_for",
           "send", "sse_data"]

#: profile operation -> (HTTP method, path below the API's ``/v1``)
HTTP_ROUTES: Mapping[str, tuple[str, str]] = MappingProxyType({
    contract.OP_CHAT_COMPLETIONS_CREATE: ("POST", "/chat/completions"),
    contract.OP_RESPONSES_CREATE: ("POST", "/responses"),
    contract.OP_EMBEDDINGS_CREATE: ("POST", "/embeddings"),
    contract.OP_MODELS_LIST: ("GET", "/models"),
})
#: the end of an OpenAI stream (a ``data:`` line that is not JSON)
SSE_DONE = "[DONE]"
#: SSE events kept of one answer (a flood on the HTTP side must not exhaust the suite)
MAX_SSE_EVENTS = 20_000
EXTRA_HINT = "pip install 'nnrp-conformance[http-twin]' (it needs httpx)"


class HttpTwinUnavailable(RuntimeError):
    """``--nnrp-http-twin`` cannot be used here; the message says what to do."""


def load_httpx() -> Any:
    """The httpx module, or :class:`HttpTwinUnavailable` naming the extra to install."""
    try:
        # lazy on purpose: httpx is the http-twin extra; a run without the twin never needs it
        import httpx
    except ImportError:
        raise HttpTwinUnavailable(f"--nnrp-http-twin needs httpx, which is not installed: "
                                  f"{EXTRA_HINT}") from None
    return httpx


def api_base(url: str) -> str:
    """``http://h:p`` and ``http://h:p/v1`` both name the API whose paths start at ``/v1``
    (the openai client's ``base_url`` ends in ``/v1``; a server's address does not)."""
    base = url.rstrip("/")
    return base if base.endswith("/v1") else base + "/v1"


def route_for(operation: str) -> tuple[str, str] | None:
    """(method, path below ``/v1``) of a profile operation; None when HTTP has none."""
    return HTTP_ROUTES.get(operation)


@dataclass
class HttpAnswer:
    """What the HTTP API sent back for one request (or why nothing came)."""

    method: str
    url: str
    stream: bool
    status: int | None = None
    #: the JSON body of a plain answer (an error answer's too, streamed or not)
    body: Any = None
    #: the streamed answer: each SSE event's data, JSON-decoded (a line that is not JSON is
    #: kept as its text); the ``[DONE]`` marker ends it and is not kept
    events: list[Any] = field(default_factory=list)
    done_marker: bool = False
    #: no usable answer: connection refused, timeout, a body that is not JSON
    problem: str | None = None
    content_type: str = ""
    elapsed_ms: float | None = None

    def summary(self) -> dict[str, Any]:
        """The request and its status for a case's diagnostics (not the answer itself)."""
        return {"method": self.method, "url": self.url, "stream": self.stream,
                "status": self.status, "content_type": self.content_type,
                "sse_events": len(self.events) if self.stream else None,
                "done_marker": self.done_marker if self.stream else None,
                "problem": self.problem, "elapsed_ms": self.elapsed_ms}


async def sse_data(lines: AsyncIterator[str]) -> AsyncIterator[str]:
    """Each SSE event's data (its ``data:`` fields joined by newlines), in order."""
    data: list[str] = []
    async for line in lines:
        if line == "":
            if data:
                yield "\n".join(data)
            data = []
            continue
        if line.startswith(":"):
            continue  # a comment (keep-alive)
        name, _, value = line.partition(":")
        if name == "data":
            data.append(value[1:] if value.startswith(" ") else value)
    if data:
        yield "\n".join(data)


def _headers() -> dict[str, str]:
    headers = {"Accept": "application/json"}
    key = os.environ.get("OPENAI_API_KEY")
    if key:
        headers["Authorization"] = f"Bearer {key}"
    return headers


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


async def send(client: Any, base_url: str, operation: str, body: Any, *,
               timeout: float) -> HttpAnswer:
    """Send ``body`` (any JSON value) for ``operation``; never raises for the API's behaviour:
    a failure is the answer's ``problem``."""
    route = route_for(operation)
    assert route is not None, "the caller compares only operations with a route"
    method, path = route
    url = api_base(base_url) + path
    stream = isinstance(body, dict) and body.get("stream") is True
    answer = HttpAnswer(method, url, stream)
    payload = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    headers = _headers()
    if method == "POST":
        headers["Content-Type"] = "application/json"
    if stream:
        headers["Accept"] = "text/event-stream"
    t0 = time.perf_counter()
    try:
        request = client.build_request(method, url, headers=headers,
                                       content=payload if method == "POST" else None,
                                       timeout=timeout)
        response = await client.send(request, stream=True)
        try:
            answer.status = response.status_code
            answer.content_type = response.headers.get("content-type", "")
            if stream and answer.status == 200 and "text/event-stream" in answer.content_type:
                async for data in sse_data(response.aiter_lines()):
                    if data.strip() == SSE_DONE:
                        answer.done_marker = True
                        break
                    answer.events.append(_json(data))
                    if len(answer.events) >= MAX_SSE_EVENTS:
                        answer.problem = f"more than {MAX_SSE_EVENTS} SSE events: cut"
                        break
            else:
                text = (await response.aread()).decode("utf-8", errors="replace")
                answer.body = _json(text)
                if isinstance(answer.body, str):
                    answer.problem = f"the answer is not JSON: {text[:200]!r}"
        finally:
            await response.aclose()
    except Exception as exc:  # httpx's errors (refused, timeout, protocol): the API's answer
        answer.problem = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    answer.elapsed_ms = round((time.perf_counter() - t0) * 1000, 1)
    return answer
