"""The minimal endpoint's OpenAI-compatible HTTP API: its twin for ``--nnrp-http-twin``.

Every provider the suite serves runs an OpenAI-compatible HTTP API beside its NNRP endpoint;
this is the example endpoint's. It answers from the same "model" and the same request checks
(``chat_profile.plan_request``, with the Level 2 and 3 planners of ``--levels``), so for every
request the two answers agree: ``POST /v1/chat/completions``, ``/v1/responses``,
``/v1/embeddings`` (JSON, or SSE ``data:`` lines ending with ``data: [DONE]`` for
``stream: true``) and ``GET /v1/models``; an error is OpenAI's ``{"error": {...}}`` with the
status the NNRP terminal carries. ``--defect`` makes it part from the NNRP answers in one
known way (repeat it for several at once), so the suite's tests see each kind of difference
reported::

    python docs/examples/minimal_endpoint/http_api.py --listen 127.0.0.1:0 [--levels N] [--defect NAME ...]

The first stdout line is ``LISTENING http://127.0.0.1:<port>``. Standard library only.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from chat_profile import plan_request
from discovery_profile import plan_embeddings, plan_models
from envelope import OP_CHAT, OP_EMBEDDINGS, OP_MODELS, OP_RESPONSES, SCHEMA_VERSION
from responses_profile import plan_responses

ROUTES = {("POST", "/v1/chat/completions"): OP_CHAT, ("POST", "/v1/responses"): OP_RESPONSES,
          ("POST", "/v1/embeddings"): OP_EMBEDDINGS, ("GET", "/v1/models"): OP_MODELS}
PLANNERS = {2: {OP_RESPONSES: plan_responses},
            3: {OP_MODELS: plan_models, OP_EMBEDDINGS: plan_embeddings}}
#: how the HTTP answer parts from the NNRP one (the suite's twin tests use each)
DEFECTS = {
    "text": "one more word at the end of every text",
    "usage": "one more prompt token in every usage",
    "finish": "finish_reason 'stop' where the model stopped at max_tokens",
    "accepts-invalid": "an invalid chat body answered 200 with an empty completion",
    # the model itself, not the face: a relation the NNRP answers break is broken here too
    "sampled": ("temperature 0 opens a chat answer with a word drawn by chance (the NNRP "
                "defect temperature-zero-sampled): the model is not deterministic"),
}
_IDS = itertools.count(1)


def _events(plan: Any) -> list[dict[str, Any]]:
    return [json.loads(p) for p in plan.partials if p is not None]


def _chunk(body: dict[str, Any], choices: list[dict[str, Any]], **more: Any) -> dict[str, Any]:
    return {"id": body.get("id"), "object": "chat.completion.chunk",
            "created": body.get("created"), "model": body.get("model"), "choices": choices,
            **more}


def _chat_chunks(events: list[dict[str, Any]], body: dict[str, Any]) -> list[dict[str, Any]]:
    """A chat completion's SSE chunks (OpenAI's shape) from the NNRP events and final body."""
    out, usage = [], None
    for ev in events:
        kind = ev.get("type")
        choice = 0  # a tool call's index is its own; every call is choice 0's (n is 1)
        if kind == "response.output_text.delta":
            delta: dict[str, Any] = {"content": ev["delta"]}
            choice = ev["index"]
        elif kind == "response.tool_call.started":
            delta = {"tool_calls": [{"index": ev["index"], "id": ev["call_id"],
                                     "type": "function",
                                     "function": {"name": ev["name"], "arguments": ""}}]}
        elif kind == "response.tool_call.delta":
            delta = {"tool_calls": [{"index": ev["index"],
                                     "function": {"arguments": ev["arguments_delta"]}}]}
        else:
            usage = ev.get("usage") if kind == "response.usage" else usage
            continue
        out.append(_chunk(body, [{"index": choice, "delta": delta, "finish_reason": None}]))
    for end in body["choices"]:
        out.append(_chunk(body, [{"index": end["index"], "delta": {},
                                  "finish_reason": end["finish_reason"]}]))
    if usage is not None:
        out.append(_chunk(body, [], usage=body["usage"]))
    return out


def _responses_events(events: list[dict[str, Any]], body: dict[str, Any]) -> list[dict[str, Any]]:
    out = [{k: v for k, v in ev.items() if k != "openai_chunk"} for ev in events
           if ev.get("type") != "response.usage"]
    return [*out, {"type": "response.completed", "response": body}]


def _apply_defects(defects: frozenset[str], body: Any) -> None:
    if not isinstance(body, dict):
        return
    usage = body.get("usage")
    if "usage" in defects and isinstance(usage, dict):
        for key in ("prompt_tokens", "input_tokens"):
            if key in usage:
                usage[key] += 1
                usage["total_tokens"] += 1
    for choice in body.get("choices") or ():
        message = choice.get("message") or {}
        if "text" in defects and isinstance(message.get("content"), str):
            message["content"] += " more"
        if "finish" in defects and choice.get("finish_reason") == "length":
            choice["finish_reason"] = "stop"


def answer(method: str, path: str, raw: bytes, *, model: str, levels: int,
           defects: frozenset[str]) -> tuple[int, dict[str, Any] | list[dict[str, Any]]]:
    """(status, a JSON body or the list of SSE events) for one HTTP request."""
    operation = ROUTES.get((method, path.split("?", 1)[0].rstrip("/")))
    if operation is None:
        return 404, {"error": {"type": "invalid_request_error", "code": "not_found",
                               "message": f"no route {method} {path}"}}
    try:
        body = json.loads(raw or b"{}")
    except ValueError as exc:
        return 400, {"error": {"type": "invalid_request_error", "code": "invalid_request",
                               "message": f"the body is not JSON: {exc}"}}
    envelope = {"schema_version": SCHEMA_VERSION, "operation": operation, "body": body}
    planners = {op: p for level in range(2, levels + 1) for op, p in PLANNERS[level].items()}
    model_defect = "temperature-zero-sampled" if "sampled" in defects else None
    plan = plan_request(json.dumps(envelope).encode(), op_id=next(_IDS), model=model,
                        defect=model_defect, levels=levels, planners=planners)
    terminal = plan.terminal or {}
    if terminal.get("type") == "response.error":
        if "accepts-invalid" in defects and operation == OP_CHAT:
            empty = {"role": "assistant", "content": ""}
            return 200, {"id": "chatcmpl-x", "object": "chat.completion", "model": model,
                         "created": int(time.time()),
                         "choices": [{"index": 0, "message": empty, "finish_reason": "stop"}],
                         "usage": {"prompt_tokens": 0, "completion_tokens": 0,
                                   "total_tokens": 0}}
        return plan.status, {"error": terminal["error"]}
    final = terminal.get("body") or {}
    _apply_defects(defects, final)
    if not (isinstance(body, dict) and body.get("stream") is True):
        return 200, final
    events = _events(plan)
    if "text" in defects:
        events.append({"type": "response.output_text.delta", "index": 0, "delta": " more"})
    if operation == OP_RESPONSES:
        return 200, _responses_events(events, final)
    return 200, _chat_chunks(events, final)


def handler(model: str, levels: int, defects: frozenset[str]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            status, out = answer(self.command, self.path, raw, model=model, levels=levels,
                                 defects=defects)
            if isinstance(out, list):
                data = b"".join(b"data: " + json.dumps(ev).encode() + b"\n\n" for ev in out)
                data += b"data: [DONE]\n\n"
                kind = "text/event-stream"
            else:
                data, kind = json.dumps(out).encode(), "application/json"
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = _serve

        def log_message(self, format: str, *args: Any) -> None:
            pass  # quiet: the suite's results are the record

    return Handler


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--listen", default="127.0.0.1:0", help="HOST:PORT (loopback)")
    parser.add_argument("--model", default="minimal-model")
    parser.add_argument("--levels", type=int, choices=(1, 2, 3), default=1)
    parser.add_argument("--defect", choices=sorted(DEFECTS), action="append", default=[])
    args = parser.parse_args(argv)
    host, _, port = args.listen.rpartition(":")
    server = ThreadingHTTPServer((host, int(port)), handler(args.model, args.levels,
                                                            frozenset(args.defect)))
    print(f"LISTENING http://{host}:{server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
